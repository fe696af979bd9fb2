"""The fast path, measured on a GPU host: cold compile, warm profile, warm evaluate, throughput.

    python benchmarks/bench_fastpath.py --out DIR [--runs 3]

Every target is measured against its baseline in the same run, on the same machine:

- cold build of the seed's extension: the worker's load_inline route (split + precompiled header),
  against torch's own load_inline;
- profile, warm cache: `Profile` through `profsvc serve` over gRPC (the default metric set), against a plain
  `ncu --set full --import-source yes python harness` run;
- evaluate without profile: `Evaluate` through `profsvc serve` with warm workers, against the same server
  with `--no-warm-workers`;
- throughput of 20 distinct problems: `Profile` of all 20 through one server by 8 clients, against one
  fresh process per job, one after another.

It prints a table of medians and ratios and writes DIR/fastpath.json (every sample) and the
reports it compared. A target that fails is reported as failed; the run goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "tests" / "fixtures" / "seed47.py"
HARNESS = Path(__file__).resolve().parent / "plain_harness.py"
PLAIN_NCU = ["--config-file", "off", "--clock-control", "none", "--cache-control", "all", "--set", "full"]
PLAIN_NCU += ["--import-source", "yes", "--nvtx", "--nvtx-include", "profsvc/"]
# Figures of a kernel that do not change from run to run: the parity check compares these exactly.
DETERMINISTIC = (
    "launch__grid_size",
    "launch__block_size",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "smsp__inst_executed.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_inst_executed_op_global_ld.sum",
    "smsp__sass_inst_executed_op_global_st.sum",
    "launch__occupancy_limit_registers",
)
# The same, as the service reports them (catalog figures): compared exactly too.
DETERMINISTIC_FIGURES = (
    "grid_size",
    "block_size",
    "registers_per_thread",
    "shared_mem_static_per_block",
    "instructions_executed",
    "global_load_instructions",
    "global_store_instructions",
    "fp32_flop",
    "theoretical_occupancy_pct",
    "occupancy_limit_registers",
)

BUILD_SNIPPET = """
import sys, time, re, json
from pathlib import Path
route, cache, seed = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
text = seed.read_text()
import torch
from torch.utils import cpp_extension
if route != "torch":
    from profsvc.build import inline_builder
    from profsvc.worker import inline_cache
    if route == "split-nopch":
        inline_builder.prepare_pch = lambda *a, **k: []
    if route == "split-full":
        # The glue unit against the full torch/extension.h, precompiled (the route before the light header).
        prepare_full = inline_builder.prepare_pch
        inline_builder.prepare_pch = lambda *a, **k: prepare_full(*a, **{**k, "header": "full"})
    recorder = inline_cache.InlineRecorder()
    inline_cache.install(cache, lineinfo=True, user_text=text, recorder=recorder)
sys.path.insert(0, str(seed.parent))
import importlib
module = importlib.import_module(seed.stem)
kwargs = dict(name="vga_linear_probe", cpp_sources=module._cpp_src, cuda_sources=module._cuda_src,
              functions=["vga_linear_forward"], extra_cuda_cflags=["-O3", "--use_fast_math"], extra_cflags=["-O3"])
if route == "torch":
    # torch's own layout (TORCH_EXTENSIONS_DIR/NAME): the plain ncu runs then find this build.
    kwargs["build_directory"] = str(cache / "vga_linear_probe")
    (cache / "vga_linear_probe").mkdir(parents=True, exist_ok=True)
start = time.monotonic()
ext = cpp_extension.load_inline(**kwargs)
seconds = time.monotonic() - start
routes = [b.route for b in recorder.builds] if route != "torch" else ["torch"]
directories = [b.build_directory for b in recorder.builds] if route != "torch" else [kwargs["build_directory"]]
print(json.dumps({"seconds": seconds, "routes": routes, "directories": directories}))
"""


def log(message: str) -> None:
    """Progress on stderr, flushed."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def median(values: list[float]) -> float | None:
    """The median, or None without samples."""
    return statistics.median(values) if values else None


def python_env() -> dict[str, str]:
    """This environment with the repository's packages importable (the build snippets import profsvc)."""
    return {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'client'}:{os.environ.get('PYTHONPATH', '')}"}


def timed_build(route: str, cache: Path, env: dict[str, str]) -> dict[str, Any]:
    """One cold build of the seed's extension in a fresh process (only the load_inline call is timed)."""
    command = [sys.executable, "-c", BUILD_SNIPPET, route, str(cache), str(SEED)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def ninja_steps(directory: str) -> dict[str, float]:
    """Seconds per build step (object files, the link) from a build directory's .ninja_log."""
    log_file = Path(directory) / ".ninja_log"
    if not log_file.is_file():
        return {}
    steps = {}
    for line in log_file.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) == 5 and not line.startswith("#"):
            steps[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000
    return steps


def empty_but_the_pch(cache: Path) -> None:
    """Remove an extension cache's builds, keeping its precompiled headers (as a running server does)."""
    for entry in cache.iterdir():
        if entry.name != "pch":
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink()


def bench_builds(work: Path, runs: int, results: dict[str, Any]) -> None:
    """Cold builds: torch's default; the split route with the light header, the full one, none precompiled."""
    env = python_env()
    samples: dict[str, list[float]] = {"torch": [], "split-nopch": [], "split": [], "pch-first": [], "split-full": []}
    # Where each build's time goes: ninja's seconds per step (compile units in parallel, then the link).
    steps: dict[str, list[dict[str, float]]] = {route: [] for route in samples}

    def record(route: str, outcome: dict[str, Any]) -> None:
        samples[route].append(outcome["seconds"])
        steps[route].append({k: v for d in outcome.get("directories", []) for k, v in ninja_steps(d).items()})
        log(f"  {outcome['seconds']:.2f} s, steps {steps[route][-1]}")

    shared = work / "split-cache"
    log("cold build, split route, first ever (builds the precompiled header too)")
    record("pch-first", timed_build("split", shared, env))
    for i in range(runs):
        # Baseline and ours alternate, so that a drift of the host's speed touches both alike.
        log(f"cold build, torch's default load_inline {i + 1}/{runs}")
        record("torch", timed_build("torch", work / f"torch-build-{i}", env))
        empty_but_the_pch(shared)
        log(f"cold build, split route {i + 1}/{runs}")
        outcome = timed_build("split", shared, env)
        if outcome["routes"] not in (["split-light"], ["split"]):
            raise RuntimeError(f"the split route was not taken: {outcome}")
        record("split", outcome)
    log("cold build, split route, the full torch header precompiled (its header built first, untimed)")
    timed_build("split-full", work / "full-cache", env)
    empty_but_the_pch(work / "full-cache")
    record("split-full", timed_build("split-full", work / "full-cache", env))
    log("cold build, split route without the precompiled header")
    record("split-nopch", timed_build("split-nopch", work / "nopch-cache", env))
    results["build"] = samples
    results["build_steps"] = steps
    results["torch_extensions_dir"] = str(work / "torch-build-0")


class Server:
    """`profsvc serve` in a subprocess."""

    def __init__(self, work: Path, name: str, warm: bool, options: tuple[str, ...] = ()) -> None:
        self.state = work / name
        self.warm = warm
        self.port = _free_port()
        self.metrics_port = _free_port()
        command = [sys.executable, "-m", "profsvc_client.cli", "serve", "--port", str(self.port)]
        command += ["--state-dir", str(self.state), "--metrics-port", str(self.metrics_port), "--job-timeout", "80"]
        if not warm:
            command.append("--no-warm-workers")
        command += options
        self.log = open(work / f"{name}.log", "w")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        self.target = f"127.0.0.1:{self.port}"

    def wait_ready(self, kinds: tuple[str, ...], timeout: float = 120) -> bool:
        """Wait until the server answers and the named warm workers wait for a job (a server without any: answers)."""
        from profsvc_client.client import ProfilerClient

        deadline = time.monotonic() + timeout
        answered = False
        while not answered and time.monotonic() < deadline:
            try:
                with ProfilerClient(self.target, timeout=5) as client:
                    client.capabilities()
                answered = True
            except Exception:
                time.sleep(0.5)
        if not answered or not self.warm:
            return answered
        while time.monotonic() < deadline:
            ready = {
                p.parent.name.split("-")[0] + "-" + p.parent.name.split("-")[1]
                for p in self.state.glob("standby/*/ready")
            }
            if all(any(r.startswith(k) for r in ready) for k in kinds):
                return True
            time.sleep(0.05)
        return False

    def gpu_busy_seconds(self) -> float:
        """The server's profsvc_gpu_busy_seconds_total, summed over GPUs."""
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).read().decode()
        return sum(float(v) for v in re.findall(r"^profsvc_gpu_busy_seconds_total\{[^}]*\} (\S+)$", text, re.M))

    def stage_totals(self) -> dict[str, tuple[float, int]]:
        """Seconds and count per job stage (compile, gpu_wait, profile, parse, ...) from /metrics."""
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).read().decode()
        sums = dict(re.findall(r'^profsvc_job_stage_seconds_sum\{stage="([^"]+)"\} (\S+)$', text, re.M))
        counts = dict(re.findall(r'^profsvc_job_stage_seconds_count\{stage="([^"]+)"\} (\S+)$', text, re.M))
        return {stage: (float(sums[stage]), int(float(counts.get(stage, 0)))) for stage in sums}

    def stage_means(self, before: dict[str, tuple[float, int]]) -> dict[str, float]:
        """Mean seconds per job stage since `before`."""
        means = {}
        for stage, (total, count) in self.stage_totals().items():
            old_total, old_count = before.get(stage, (0.0, 0))
            if count > old_count:
                means[stage] = (total - old_total) / (count - old_count)
        return means

    def stop(self) -> None:
        """Stop the server (SIGINT: it stops its warm workers)."""
        self.process.send_signal(2)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.monotonic()
    value = call()
    return time.monotonic() - start, value


def bench_server(server: Server, runs: int, label: str, results: dict[str, Any], out: Path) -> None:
    """Warm-cache Profile and Evaluate (no profile) of the seed through the server."""
    from profsvc_client.client import ProfilerClient, load_source

    source = load_source(SEED)
    with ProfilerClient(server.target, timeout=90) as client:
        log(f"{label}: first Profile (builds the extension into the server's cache)")
        try:
            first_seconds, first = _timed(lambda: client.profile(source))
            results[f"{label}_first_profile"] = {"seconds": first_seconds, "ok": first.ok, "error": str(first.error)}
        except Exception as error:  # the timed calls below say whether it was more than a first-call failure
            results["errors"][f"{label}_first_profile"] = str(error)
        profiles, passes, evaluates = [], [], []
        before = server.stage_totals()
        for i in range(runs):
            server.wait_ready(("ncu",), timeout=60)
            seconds, result = _timed(lambda: client.profile(source))
            passes_now = result.ncu.passes if result.ncu else None
            log(f"{label}: Profile {i + 1}/{runs}: {seconds:.2f} s ok={result.ok} passes={passes_now}")
            if result.ok:
                profiles.append(seconds)
                passes = list(result.ncu.passes) if result.ncu else []
                report = next((a for a in result.artifacts if a.name.endswith(".ncu-rep")), None)
                if report is not None and i == 0:
                    client.download_artifact(report.id, out / f"{label}-profile.ncu-rep")
        # Where a profile's time goes, per server stage (the rest is gRPC, queueing and the client).
        results[f"{label}_profile_stages"] = server.stage_means(before)
        log(f"{label}: profile stages {results[f'{label}_profile_stages']}")
        before = server.stage_totals()
        for i in range(runs):
            server.wait_ready(("run",), timeout=60)
            seconds, result = _timed(lambda: client.evaluate(source, skip_profile=True))
            ok = result.correctness.ok
            log(f"{label}: Evaluate {i + 1}/{runs}: {seconds:.2f} s correct={ok}")
            evaluates.append(seconds)
    results[f"{label}_evaluate_stages"] = server.stage_means(before)
    log(f"{label}: evaluate stages {results[f'{label}_evaluate_stages']}")
    results[f"{label}_profile"] = profiles
    results[f"{label}_passes"] = passes
    results[f"{label}_evaluate"] = evaluates


def bench_plain_ncu(ncu: str, runs: int, work: Path, results: dict[str, Any], out: Path) -> None:
    """Plain `ncu --set full` around a fresh harness process, the extension already built (warm cache)."""
    if "torch_extensions_dir" not in results:
        # The build step was skipped: build torch's way once, untimed, so that the runs below find it cached.
        # Its time is the serial baseline's build (a fresh process per job builds torch's way).
        log("plain ncu: building the extension torch's way first")
        results["torch_build_for_plain_s"] = timed_build("torch", work / "torch-build-0", python_env())["seconds"]
        log(f"  {results['torch_build_for_plain_s']:.2f} s")
        results["torch_extensions_dir"] = str(work / "torch-build-0")
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": results["torch_extensions_dir"]}
    samples = []
    for i in range(runs):
        report = out / "plain.ncu-rep" if i == 0 else work / "plain.ncu-rep"
        command = [ncu, *PLAIN_NCU, "-f", "-o", str(report), sys.executable, str(HARNESS), str(SEED)]
        start = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
        seconds = time.monotonic() - start
        passes = re.findall(r"-\s*(\d+)\s*pass", done.stdout)
        log(f"plain ncu {i + 1}/{runs}: {seconds:.2f} s rc={done.returncode} passes={passes}")
        if done.returncode == 0:
            samples.append(seconds)
    results["plain_ncu"] = samples


def parity(out: Path, results: dict[str, Any]) -> None:
    """Compare the server's report with the plain run's: the same metrics, equal where deterministic."""
    from profsvc.metrics.nvtx import PROFILER_WARMUP_RANGE, in_profsvc_range
    from profsvc.metrics.reader import load_reader

    reader = load_reader()

    def actions(path: Path) -> list[Any]:
        return [a for r in reader.load_report(str(path)) for a in r]

    def metrics(path: Path) -> dict[str, Any]:
        # A warm worker's report holds its own warm-up kernel first: compare the seed's kernel.
        action = next(a for a in actions(path) if not in_profsvc_range(a, PROFILER_WARMUP_RANGE))
        return {name: action.metric_by_name(name).value() for name in action.metric_names()}

    warmup_kernels = sum(in_profsvc_range(a, PROFILER_WARMUP_RANGE) for a in actions(out / "warm-profile.ncu-rep"))
    ours, plain = metrics(out / "warm-profile.ncu-rep"), metrics(out / "plain.ncu-rep")
    shared = sorted(set(ours) & set(plain))
    equal = [n for n in shared if ours[n] == plain[n]]
    mismatched = {n: (ours.get(n), plain.get(n)) for n in DETERMINISTIC if ours.get(n) != plain.get(n)}
    # The service's view of both reports: catalog figures the plain run has and ours lacks.
    from profsvc.metrics.analysis import analyze_report

    ours_figures, plain_figures = (
        {n: v.value for n, v in analyze_report(path).kernels[0].figures.items() if v.value is not None}
        for path in (out / "warm-profile.ncu-rep", out / "plain.ncu-rep")
    )
    figures_mismatched = {
        n: [ours_figures.get(n), plain_figures.get(n)]
        for n in DETERMINISTIC_FIGURES
        if ours_figures.get(n) != plain_figures.get(n)
    }
    results["parity"] = {
        "warmup_kernels_in_ours": warmup_kernels,
        "metrics_ours": len(ours),
        "metrics_plain": len(plain),
        "metrics_shared": len(shared),
        "equal_values": len(equal),
        "deterministic_checked": [n for n in DETERMINISTIC if n in shared],
        "deterministic_mismatched": {k: [str(v) for v in pair] for k, pair in mismatched.items()},
        "catalog_figures_ours": len(ours_figures),
        "catalog_figures_plain": len(plain_figures),
        "catalog_figures_missing": sorted(set(plain_figures) - set(ours_figures)),
        "catalog_figures_equal": sum(ours_figures[n] == plain_figures.get(n) for n in ours_figures),
        "deterministic_figures_checked": [n for n in DETERMINISTIC_FIGURES if n in plain_figures],
        "deterministic_figures_mismatched": figures_mismatched,
    }


def make_problems(directory: Path, count: int) -> list[Path]:
    """`count` distinct problems: the seed with its own extension name and source each."""
    directory.mkdir(parents=True, exist_ok=True)
    text = SEED.read_text()
    paths = []
    for i in range(count):
        variant = text.replace('name="vga_linear_probe"', f'name="vga_linear_probe_{i}"')
        variant = variant.replace("#define WPB 7", f"#define WPB 7\n// variant {i}")
        path = directory / f"problem_{i:02d}.py"
        path.write_text(variant)
        paths.append(path)
    return paths


def bench_throughput(server: Server, problems: list[Path], results: dict[str, Any]) -> None:
    """All problems through one server by 8 clients: jobs per minute and the GPU-busy fraction."""
    from profsvc_client.client import ProfilerClient, load_source

    utilization: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            done = subprocess.run(
                ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode == 0 and done.stdout.strip():
                utilization.append(float(done.stdout.split()[0]))
            stop.wait(0.2)

    def one(path: Path) -> bool:
        with ProfilerClient(server.target, timeout=300) as client:
            return client.profile(load_source(path)).ok

    busy_before = server.gpu_busy_seconds()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        oks = list(pool.map(one, problems))
    wall = time.monotonic() - start
    stop.set()
    busy = server.gpu_busy_seconds() - busy_before
    results["throughput"] = {
        "problems": len(problems),
        "ok": sum(oks),
        "wall_s": wall,
        "jobs_per_min": 60 * len(problems) / wall,
        "gpu_lane_busy_fraction": busy / wall,
        "nvidia_smi_utilization_mean_pct": statistics.mean(utilization) if utilization else None,
    }
    log(f"throughput: {results['throughput']}")


def table(results: dict[str, Any]) -> str:
    """The summary table (medians; ratio = baseline / profsvc)."""
    build = results.get("build", {})
    # Each row: its label, profsvc's samples and step, the baseline's samples and step.
    targets = [
        ("cold build of the seed extension", build.get("split"), "build", build.get("torch"), "build"),
        ("  lever: split only, no precompiled header", build.get("split-nopch"), "build", build.get("torch"), "build"),
        ("  lever: split, full torch header", build.get("split-full"), "build", build.get("torch"), "build"),
        (
            "  first build ever (precompiled header built too)",
            build.get("pch-first"),
            "build",
            build.get("torch"),
            "build",
        ),
        (
            "profile, warm, through profsvc serve",
            results.get("warm_profile"),
            "warm",
            results.get("plain_ncu"),
            "plain",
        ),
        ("  same server path, no warm workers", results.get("cold_profile"), "cold", results.get("plain_ncu"), "plain"),
        ("evaluate (no profile), warm", results.get("warm_evaluate"), "warm", results.get("cold_evaluate"), "cold"),
    ]
    skipped = set(results.get("skipped", []))

    def shown(value: float | None, step: str) -> str:
        return f"{value:.2f} s" if value is not None else "not run" if step in skipped else "failed"

    rows = []
    for target, ours_samples, ours_step, base_samples, base_step in targets:
        ours, base = median(ours_samples or []), median(base_samples or [])
        ratio = f"{base / ours:.1f}x" if ours and base else "n/a"
        n = f"{len(ours_samples or [])} / {len(base_samples or [])}"
        rows.append(f"| {target} | {shown(ours, ours_step)} | {shown(base, base_step)} | {ratio} | {n} |")
    throughput = results.get("throughput")
    serial = results.get("serial_job_s")
    lines = [
        "| target | profsvc (median) | baseline (median) | ratio | n (profsvc / baseline) |",
        "| --- | --- | --- | --- | --- |",
        *rows,
    ]
    if throughput:
        lines.append("")
        lines.append(
            f"Throughput: {throughput['ok']}/{throughput['problems']} problems in {throughput['wall_s']:.1f} s = "
            f"{throughput['jobs_per_min']:.1f} jobs/min; "
            f"GPU lane busy {100 * throughput['gpu_lane_busy_fraction']:.0f} % "
            f"of the wall time; nvidia-smi utilization mean {throughput['nvidia_smi_utilization_mean_pct']:.1f} %."
        )
    if serial:
        lines.append(f"Serial fresh-process baseline: {serial:.1f} s per job = {60 / serial:.2f} jobs/min.")
        if throughput:
            lines.append(f"Throughput ratio: {throughput['jobs_per_min'] * serial / 60:.1f}x.")
    lines.append(f"Passes per profile (warm server): {results.get('warm_passes')}")
    lines.append(f"Parity with the plain ncu run: {json.dumps(results.get('parity'))}")
    return "\n".join(lines)


def main() -> int:
    """Run every target and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--problems", type=int, default=20)
    parser.add_argument("--skip", action="append", default=[], help="build, warm, plain, throughput, cold")
    parser.add_argument("--table", type=Path, default=None, help="only print the table of a fastpath.json")
    args = parser.parse_args()
    if args.table is not None:
        print(table(json.loads(args.table.read_text())))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="fastpath-"))
    ncu = shutil.which("ncu") or "ncu"
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "errors": {}}

    def step(name: str, action: Callable[[], None]) -> None:
        if name in args.skip:
            return
        try:
            action()
        except Exception as error:  # a failed target is reported, the others still run
            results["errors"][name] = f"{type(error).__name__}: {error}"[-3000:]
            log(f"{name} FAILED: {error}")
        # After every step: a run cut short still leaves what it measured.
        (args.out / "fastpath.json").write_text(json.dumps(results, indent=2, default=str))

    step("build", lambda: bench_builds(work, args.runs, results))
    pch = work / "split-cache" / "pch"
    if pch.is_dir():
        # The server's cache keeps the precompiled header across restarts: start it with the one built above.
        shutil.copytree(pch, work / "warm" / "cache" / "pch")
    if not {"warm", "throughput"} <= set(args.skip):
        warm = Server(work, "warm", warm=True)
        try:
            ready = warm.wait_ready(("compile", "analyze", "run", "ncu"))
            log(f"warm server ready: {ready}")
            step("warm", lambda: bench_server(warm, args.runs, "warm", results, args.out))
            problems = make_problems(work / "problems", args.problems)
            step("throughput", lambda: bench_throughput(warm, problems, results))
        finally:
            warm.stop()
    step("plain", lambda: bench_plain_ncu(ncu, args.runs, work, results, args.out))
    step("parity", lambda: parity(args.out, results))
    torch_build = results.get("build", {}).get("torch") or [results.get("torch_build_for_plain_s")]
    if torch_build[0] is not None and results.get("plain_ncu"):
        # One job done the usual way: a fresh process builds with torch's defaults, then a fresh ncu run.
        results["serial_job_s"] = median(torch_build) + median(results["plain_ncu"])
    results["skipped"] = args.skip
    if "cold" not in args.skip:
        cold = Server(work, "cold", warm=False)
        try:
            cold.wait_ready(())
            step("cold", lambda: bench_server(cold, 2, "cold", results, args.out))
        finally:
            cold.stop()
    for log_file in work.glob("*.log"):
        shutil.copy(log_file, args.out / f"server-{log_file.name}")
    (args.out / "fastpath.json").write_text(json.dumps(results, indent=2, default=str))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
