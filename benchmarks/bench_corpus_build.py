"""Cold builds of the build-form corpus (tests/corpus) through a profsvc server against torch's default, on a GPU host.

    python benchmarks/bench_corpus_build.py --out DIR [--jobs 12] [--limit N | --sample N [--seed S]] [--only NAME]
        [--unjailed] [--alone N]

Ours go the way a user's do: each corpus file is sent to `profsvc serve` (jailed; `--unjailed` where the host has
no bubblewrap) as a Compile, whose job imports the module in its worker and makes its lazy load_inline calls;
each call goes over the job's control channel to the server, whose builder (jailed too) builds it and whose cache
then holds it. The server is started first and its precompiled glue headers (and the shared bindings of the
commonest signatures, profsvc.build.binding) made before any timed build (as a
running server has them; their time is reported apart). Every corpus file's builds are distinct, so each is a
cold build. Ours is the Compile's own seconds (CompileResult.seconds: the job from its start to its answer,
worker start-up and module import included); each build's seconds as its job saw them are kept too.

Torch's default: the same source in a fresh process with a fresh TORCH_EXTENSIONS_DIR, importing the module and
making its lazy load_inline calls as the compile step does (profsvc.worker.prebuild); only that is timed (torch's
own import is not). Both get the GPU's TORCH_CUDA_ARCH_LIST (the server sets it for its builds).

`--jobs` builds run at once (three quarters of the cores by default), ours and torch's queued alternately per
source, so both see the same load. `--budget` seconds after the start no new build begins (a source with one side
measured is reported, not counted). Writes DIR/corpus_build.json (every sample, routes, reasons, ninja's seconds
per step, the server's log) and DIR/corpus_build.md (per source: route, seconds ours, seconds torch, ratio;
p50/p90 over the corpus; the targets: p90 <= 10 s, geometric-mean ratio >= 6x). `--alone N` then builds every
source cold again on a second server of its own, N at a time with nothing beside it, as an agent sends them: the
p90 of builds that do not share the machine with a dozen others.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_fastpath import Server, log, ninja_steps, python_env

from profsvc.build.binding import COMMON_SIGNATURES

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
TARGET_P90_S = 10.0
TARGET_RATIO = 6.0
# The server's log line once its glue headers are made, and one per shared binding made (profsvc.build.service).
HEADERS_MADE = ("glue headers: ", "the glue headers were not made")
BINDING_MADE = "shared binding made: "

TORCH_SNIPPET = """
import importlib.util, json, os, sys, time
from pathlib import Path
cache, path = Path(sys.argv[1]), Path(sys.argv[2])
import torch
from torch.utils import cpp_extension
os.environ["TORCH_EXTENSIONS_DIR"] = str(cache)
from profsvc.worker.prebuild import prebuild
start = time.monotonic()
spec = importlib.util.spec_from_file_location(path.stem, path)
module = importlib.util.module_from_spec(spec)
sys.modules[path.stem] = module
spec.loader.exec_module(module)
prebuild(module)
seconds = time.monotonic() - start
builds = [{"name": d.name, "route": "torch", "build_directory": str(d)} for d in sorted(cache.iterdir()) if d.is_dir()]
print(json.dumps({"seconds": seconds, "builds": builds}))
"""


def gpu_arch_list() -> str:
    """The first GPU's TORCH_CUDA_ARCH_LIST entry ("9.0" on an H200), as the server's job environment sets it."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True, text=True
        )
    except OSError:
        return "9.0"
    return done.stdout.split()[0] if done.returncode == 0 and done.stdout.split() else "9.0"


def manifest() -> dict[str, list[dict[str, Any]]]:
    """Each corpus file's expected calls, from tests/corpus/manifest.toml."""
    entries = tomllib.loads((CORPUS / "manifest.toml").read_text())["file"]
    return {entry["name"]: entry.get("call", []) for entry in entries}


def start_server(work: Path, unjailed: bool, timeout: float, name: str = "server") -> tuple[Server, dict[str, Any]]:
    """`profsvc serve` with warm workers (its own state: a cold cache), once its glue headers and commonest shared
    bindings are made: (the server, how long they took, how many bindings)."""
    start = time.monotonic()
    server = Server(work, name, warm=True, options=("--unjailed",) if unjailed else ())
    log_file = work / f"{name}.log"
    if not server.wait_ready(("builder", "compile"), timeout):
        server.stop()
        raise RuntimeError(f"the server did not start: {log_file.read_text()[-3000:]}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = [line for line in log_file.read_text().splitlines() if any(m in line for m in HEADERS_MADE)]
        if lines:
            line = json.loads(lines[0]).get("message", lines[0])
            # A running server has its commonest shared bindings too, made after the headers where the types and
            # binding headers were: wait for them (a minute at most), and say how many there were.
            wanted = len(COMMON_SIGNATURES) if "types: ok" in line and "bind: ok" in line else 0
            until = min(deadline, time.monotonic() + 60)
            while (made := log_file.read_text().count(BINDING_MADE)) < wanted and time.monotonic() < until:
                time.sleep(0.2)
            return server, {"seconds": time.monotonic() - start, "line": line, "bindings": made}
        time.sleep(0.2)
    server.stop()
    raise RuntimeError("the server's glue headers were not made in time")


def ours(server: Server, source: Path, timeout: float) -> dict[str, Any]:
    """One cold Compile of a corpus file through the server: seconds, builds (routes, reasons, ninja's steps)."""
    from profsvc_client.client import ProfilerClient
    from profsvc_contract.models import KernelSource, SourceFile

    start = time.monotonic()
    try:
        with ProfilerClient(server.target, timeout=timeout) as client:
            result = client.compile(KernelSource(main=SourceFile(name=source.name, content=source.read_bytes())))
    except Exception as error:  # the benchmark reports a failed call and goes on
        return {"error": f"{type(error).__name__}: {error}", "wall_s": time.monotonic() - start}
    outcome: dict[str, Any] = {"wall_s": time.monotonic() - start, "builds": []}
    for unit in result.units:
        folder = unit.cache_key if unit.route == "torch" else f"{unit.cache_key}-{unit.route}"
        build = unit.model_dump(include={"name", "route", "route_reason", "route_detail", "seconds", "cached"})
        outcome["builds"].append({**build, "steps": ninja_steps(str(server.state / "cache" / folder))})
    if not result.ok:
        message = result.diagnostics[0].message if result.diagnostics else "the build failed"
        return {**outcome, "error": f"{message}\n{result.log[-2000:]}"}
    return {**outcome, "seconds": result.seconds}


def theirs(cache: Path, source: Path, env: dict[str, str], timeout: float) -> dict[str, Any]:
    """One cold build of a source with torch's default, in a fresh process: seconds, builds, ninja's steps."""
    command = [sys.executable, "-c", TORCH_SNIPPET, str(cache), str(source)]
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s", "wall_s": time.monotonic() - start}
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-3000:], "wall_s": time.monotonic() - start}
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    outcome["wall_s"] = time.monotonic() - start
    for build in outcome["builds"]:
        build["steps"] = ninja_steps(build["build_directory"])
    return outcome


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation, None without values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def chosen(args: argparse.Namespace) -> list[Path]:
    """The corpus sources the arguments pick (--only, --sample, --limit)."""
    sources = sorted(CORPUS.glob("c*.py"))
    if args.only:
        sources = [s for s in sources if any(name in s.name for name in args.only)]
    if args.sample:
        sources = sorted(random.Random(args.seed).sample(sources, min(args.sample, len(sources))))
    return sources[: args.limit] if args.limit else sources


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build every chosen source both ways; the results as written to the JSON."""
    expected = manifest()
    sources = chosen(args)
    work = Path(tempfile.mkdtemp(prefix="corpus-build-"))
    arch = gpu_arch_list()
    env = {**python_env(), "TORCH_CUDA_ARCH_LIST": arch}
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "arch": arch,
        "jobs": args.jobs,
        "cpus": os.cpu_count(),
        "jailed": not args.unjailed,
        "sources": {},
    }
    start = time.monotonic()
    log("starting the server; it makes its glue headers")
    server, results["headers"] = start_server(work, args.unjailed, args.timeout)
    log(f"  {results['headers']}")
    tasks: list[tuple[str, Path]] = []
    for index, source in enumerate(sources):
        # Alternating which side goes first: neither always starts on a quieter machine.
        pair = [("profsvc", source), ("torch", source)]
        tasks += pair if index % 2 == 0 else pair[::-1]
    lock = threading.Lock()
    queue = iter(tasks)
    begun = time.monotonic()

    def worker() -> None:
        while True:
            with lock:
                task = next(queue, None)
            if task is None or time.monotonic() - begun > args.budget:
                return
            side, source = task
            if side == "profsvc":
                outcome = ours(server, source, args.timeout)
            else:
                cache = work / "torch" / source.stem
                cache.mkdir(parents=True)
                outcome = theirs(cache, source, env, args.timeout)
            with lock:
                entry = results["sources"].setdefault(source.name, {"expected": expected.get(source.name, [])})
                entry[side] = outcome
                # After every build: a run cut short still leaves what it measured.
                (args.out / "corpus_build.json").write_text(json.dumps(results, indent=2, default=str))
            shown = f"{outcome['seconds']:.2f} s" if "seconds" in outcome else f"FAILED {outcome['error'][-200:]}"
            log(f"{source.name} {side}: {shown}")

    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            for _ in range(args.jobs):
                pool.submit(worker)
    finally:
        server.stop()
        shutil.copyfile(work / "server.log", args.out / "server.log")
    if args.alone:
        results["alone"] = alone(work, sources, args)
    results["wall_s"] = time.monotonic() - start
    return results


def alone(work: Path, sources: list[Path], args: argparse.Namespace) -> dict[str, Any]:
    """Every source built cold through a second server of its own (a cold cache), `--alone` at a time and nothing
    else on the machine: as an agent sends its sources, not beside a dozen other builds."""
    log(f"alone: a second server, {args.alone} build(s) at a time")
    server, headers = start_server(work, args.unjailed, args.timeout, name="alone")
    outcomes: dict[str, Any] = {}
    try:
        with ThreadPoolExecutor(args.alone) as pool:
            built = pool.map(lambda source: ours(server, source, args.timeout), sources)
            for source, outcome in zip(sources, built, strict=True):
                outcomes[source.name] = outcome
                log(f"alone {source.name}: {outcome.get('seconds', 'FAILED')}")
    finally:
        server.stop()
        shutil.copyfile(work / "alone.log", args.out / "server-alone.log")
    return {"at_a_time": args.alone, "headers": headers, "sources": outcomes}


def summary(results: dict[str, Any]) -> dict[str, Any]:
    """p50/p90 of ours and torch's over the sources with a build measured on both sides, and the ratios."""
    ours, theirs, ratios = [], [], []
    for entry in results["sources"].values():
        mine, torch = entry.get("profsvc", {}), entry.get("torch", {})
        if "seconds" in mine and "seconds" in torch and mine.get("builds"):
            ours.append(mine["seconds"])
            theirs.append(torch["seconds"])
            ratios.append(torch["seconds"] / mine["seconds"])
    geomean = math.exp(statistics.fmean(math.log(r) for r in ratios)) if ratios else None
    p90 = percentile(ours, 90)
    by_itself = [
        o["seconds"] for o in results.get("alone", {}).get("sources", {}).values() if "seconds" in o and o["builds"]
    ]
    alone_p90 = percentile(by_itself, 90)
    return {
        "alone_p50_s": percentile(by_itself, 50),
        "alone_p90_s": alone_p90,
        "alone_p90_target_met": alone_p90 is not None and alone_p90 <= TARGET_P90_S,
        "alone_sources": len(by_itself),
        "sources_with_builds": len(ours),
        "ours_p50_s": percentile(ours, 50),
        "ours_p90_s": p90,
        "torch_p50_s": percentile(theirs, 50),
        "torch_p90_s": percentile(theirs, 90),
        "ratio_p50": percentile(ratios, 50),
        "ratio_p10": percentile(ratios, 10),
        "ratio_geomean": geomean,
        "ratio_of_totals": sum(theirs) / sum(ours) if ours else None,
        "p90_target_met": p90 is not None and p90 <= TARGET_P90_S,
        "ratio_target_met": geomean is not None and geomean >= TARGET_RATIO,
    }


def _seconds(value: float | None) -> str:
    return f"{value:.2f} s" if value is not None else "n/a"


def table(results: dict[str, Any]) -> str:
    """The Markdown table: one row per source, then the figures over the corpus."""
    rows = [
        "| source | route (ours) | seconds, profsvc | seconds, torch | ratio | note |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, entry in sorted(results["sources"].items()):
        mine, torch = entry.get("profsvc", {}), entry.get("torch", {})
        builds = mine.get("builds", [])
        route = ", ".join(b["route"] for b in builds) or ("no build" if "seconds" in mine else "failed")
        notes = [f"{b['route_reason']}: {b['route_detail']}" for b in builds if b.get("route_reason")]
        wanted = [call["route"] for call in entry.get("expected", [])]
        # split-light's build takes split-bind where the server has made the shared binding of its signatures.
        taken = [b["route"].replace("split-bind", "split-light") for b in builds]
        if builds and wanted and wanted != taken:
            notes.append(f"expected {', '.join(wanted)}")
        for side, outcome in (("profsvc", mine), ("torch", torch)):
            if "error" in outcome:
                notes.append(f"{side} failed: {outcome['error'].splitlines()[-1][:160]}")
        ratio = (
            f"{torch['seconds'] / mine['seconds']:.1f}x" if builds and "seconds" in torch and "seconds" in mine else ""
        )
        rows.append(
            f"| {name} | {route} | {_seconds(mine.get('seconds'))} | {_seconds(torch.get('seconds'))} | {ratio} | "
            f"{'; '.join(notes).replace('|', '/')} |"
        )
    figures = summary(results)
    lines = [
        *rows,
        "",
        f"Over {figures['sources_with_builds']} sources with a build (Triton sources have none), "
        f"{results['jobs']} builds at a time on {results['cpus']} CPUs, TORCH_CUDA_ARCH_LIST={results['arch']}:",
        "",
        "| figure | profsvc | torch's load_inline | target |",
        "| --- | --- | --- | --- |",
        f"| p50 cold build | {_seconds(figures['ours_p50_s'])} | {_seconds(figures['torch_p50_s'])} | |",
        f"| p90 cold build | {_seconds(figures['ours_p90_s'])} | {_seconds(figures['torch_p90_s'])} | "
        f"<= {TARGET_P90_S:.0f} s: {'met' if figures['p90_target_met'] else 'not met'} |",
    ]
    if results.get("alone"):
        lines.append(
            f"| p50 / p90 cold build, {results['alone']['at_a_time']} at a time on a server of its own "
            f"({figures['alone_sources']} sources) | {_seconds(figures['alone_p50_s'])} / "
            f"{_seconds(figures['alone_p90_s'])} | | p90 <= {TARGET_P90_S:.0f} s: "
            f"{'met' if figures['alone_p90_target_met'] else 'not met'} |"
        )
    if figures["ratio_geomean"] is not None:
        lines.append(
            f"| ratio torch / profsvc | geometric mean {figures['ratio_geomean']:.1f}x, p50 "
            f"{figures['ratio_p50']:.1f}x, p10 {figures['ratio_p10']:.1f}x, of totals "
            f"{figures['ratio_of_totals']:.1f}x | | >= {TARGET_RATIO:.0f}x: "
            f"{'met' if figures['ratio_target_met'] else 'not met'} |"
        )
    headers = results.get("headers", {})
    lines.append("")
    lines.append(
        f"Through `profsvc serve` ({'jailed' if results.get('jailed') else 'unjailed'}); its glue headers made at"
        f" its start, before the builds ({headers.get('line', 'n/a')}; server up with them in"
        f" {headers.get('seconds', 0):.1f} s, not in the builds' times); run {results['wall_s']:.0f} s."
    )
    return "\n".join(lines)


def main() -> int:
    """Run the benchmark, write the JSON and the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    # torch's build keeps about 1.3 cores busy on average (its C++ unit ends long before its CUDA unit), ours 2 for a
    # few seconds: three quarters of the cores in builds fills the machine without oversubscribing it.
    parser.add_argument("--jobs", type=int, default=max(1, 3 * (os.cpu_count() or 4) // 4), help="builds at once")
    parser.add_argument("--limit", type=int, default=0, help="only the first N sources")
    parser.add_argument("--sample", type=int, default=0, help="N sources drawn at random (--seed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", action="append", default=[], help="sources whose name contains this")
    parser.add_argument("--timeout", type=float, default=240, help="seconds one build may take")
    parser.add_argument("--budget", type=float, default=420, help="seconds after which no new build begins")
    parser.add_argument("--unjailed", action="store_true", help="serve without the jail (a host without bubblewrap)")
    parser.add_argument(
        "--alone", type=int, default=0, metavar="N", help="then every source cold on a second server, N at a time"
    )
    parser.add_argument("--table", type=Path, default=None, help="only print the table of a corpus_build.json")
    args = parser.parse_args()
    if args.table is not None:
        print(table(json.loads(args.table.read_text())))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    results = run(args)
    results["summary"] = summary(results)
    (args.out / "corpus_build.json").write_text(json.dumps(results, indent=2, default=str))
    rendered = table(results)
    (args.out / "corpus_build.md").write_text(rendered + "\n")
    print(rendered)
    return 0


if __name__ == "__main__":
    sys.exit(main())
