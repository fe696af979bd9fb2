"""The agent loop as agents run it: back to back, new sources, several clients; and analyze under load.

    python benchmarks/agent_loop.py --out DIR [--rounds 8] [--clients 8] [--skip NAME ...] [--unjailed]

Starts `profsvc serve` (warm workers, as deployed) and drives it with the Python client, with no pause between
calls; the GPU patterns call as the agent tools (MCP) do, drawing no roofline chart (`skip_charts`). Each
pattern is timed from the client's view, per call kind: p50, p90, max (seconds).

- `alternate`: evaluate (no profile) and profile of one source, alternating, `--rounds` pairs.
- `new_source`: one agent iteration per round with a new source (a comment changed): compile, full
  evaluate (correctness, timing and profile); the sources are the corpus's (tests/corpus, or the seed).
- `revise`: one agent iteration per round on the seed problem, revised as an agent revises it (a recorded trace
  renames its module and changes its kernel every iteration): the module renamed and the CUDA source changed,
  so each round is a cold build; compile, full evaluate. Each compile's build route is recorded.
- `clients`: `--clients` clients at once, each with its own source: evaluate then profile; the GPU lane's
  busy share of the wall time (the server's profsvc_gpu_busy_seconds over the run).
- `analyze`: the seed's report, warm, one at a time (`--rounds` x 3), then 64 clients at once (reports/s), with
  its charts drawn (as `profsvc analyze --out`) and then without (as the agent tools and `profsvc batch` read
  it); then the first on a server with `--readers-per-caller 0` (every report on a warm worker of its own), the
  baseline.
- `baseline`: what an agent without profsvc pays per iteration, in the same run: a fresh process doing a
  KernelBench-style evaluation (import, torch's own load_inline build, 5 trials, 100 timed calls), then a
  plain `ncu --set full` of the candidate (benchmarks/plain_harness.py).

`--unjailed` serves without the jail; `--jail-cost` runs `alternate` on a jailed server and then on an unjailed one
in the same run, for the jail's cost. `--think S` runs `alternate` again with S seconds before each call, as an
agent's model takes between its tool calls (4.7 to 15.3 s in a recorded trace of an agent on the seed problem).
`--metric-set NAME` runs `alternate` again with each profile asking that set (`basic`: fewer passes, no stall
reasons or source counters), as an agent may ask through its profile tool.
`--full-size` also evaluates (no profile) and profiles each problem of benchmarks/full_size, whose inputs are
gigabytes as in KernelBench's published problems, beside the same evaluation KernelBench's way in a fresh process.

The GPU patterns need a GPU host with ncu; `analyze` runs anywhere. Writes agent_loop.json and agent_loop.md.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fastpath import Server, log  # noqa: E402 (the benchmarks share one server driver)

SEED = ROOT / "tests" / "fixtures" / "seed47.py"
REPORT = ROOT / "tests" / "fixtures" / "seed47_full.ncu-rep"
CORPUS = ROOT / "tests" / "corpus"
FULL_SIZE = ROOT / "benchmarks" / "full_size"
PATTERNS = ("alternate", "new_source", "revise", "clients", "analyze", "baseline")
ANALYZE_CLIENTS = 64
# The alternating patterns' result keys: as served, with think time, with another metric set, unjailed.
ALTERNATES = ("alternate", "alternate_think", "alternate_set", "alternate_unjailed")
# What an agent harness without profsvc runs per candidate (argv: its folder, its module).
KERNELBENCH_EVALUATION = """
import sys, importlib, torch
sys.path.insert(0, sys.argv[1]); m = importlib.import_module(sys.argv[2])
torch.manual_seed(0); ref = m.Model(*m.get_init_inputs()).cuda(); torch.manual_seed(0)
new = m.ModelNew(*m.get_init_inputs()).cuda()
for t in range(5):
    x = [a.cuda() for a in m.get_inputs()]
    assert torch.allclose(new(*x), ref(*x), atol=1e-2, rtol=1e-2)
x = [a.cuda() for a in m.get_inputs()]
for model in (new, ref):
    for _ in range(100):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); model(*x); e.record(); torch.cuda.synchronize()
"""


def summary(samples: list[float]) -> dict[str, float | int]:
    """p50, p90, max and the count of a list of seconds."""
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"n": len(ordered), "p50": statistics.median(ordered), "p90": p90, "max": ordered[-1]}


def phase_medians(timings: list[dict[str, float]]) -> dict[str, float]:
    """The median of each server timing over a pattern's calls of one kind (a timing a call lacks counts 0 s), in
    seconds; the build cache's one-off timings of the compile before the pattern are left out."""
    names = sorted({name for calls in timings for name in calls if not name.startswith("compile:")})
    return {name: statistics.median(calls.get(name, 0.0) for calls in timings) for name in names}


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.monotonic()
    value = call()
    return time.monotonic() - start, value


def sources(count: int) -> list[Path]:
    """Candidate files for new-source rounds: the corpus where it is there, else the seed."""
    corpus = sorted(CORPUS.glob("*.py")) if CORPUS.is_dir() else []
    chosen = [p for p in corpus if "triton" not in p.name] or [SEED]
    return [chosen[i % len(chosen)] for i in range(count)]


def changed(path: Path, tag: str) -> Any:
    """The file as a new source: a comment changed, so nothing of it is remembered."""
    from profsvc_contract.models import KernelSource, SourceFile

    text = path.read_bytes() + f"\n# agent iteration {tag}\n".encode()
    return KernelSource(main=SourceFile(name=path.name, content=text))


def revised(tag: str) -> Any:
    """The seed as an agent's next revision: its module renamed and its CUDA source changed (a new build)."""
    from profsvc_contract.models import KernelSource, SourceFile

    text = SEED.read_text()
    revision = text.replace('name="vga_linear_probe"', f'name="vga_linear_{tag}"', 1)
    revision = revision.replace("_cuda_src = r'''", f"_cuda_src = r'''\n// revision {tag}", 1)
    if revision.count(tag) != 2:
        raise ValueError("the seed's load_inline call or CUDA source is not where the revision expects it")
    return KernelSource(main=SourceFile(name=SEED.name, content=revision.encode()))


def bench_alternate(
    server: Server,
    rounds: int,
    results: dict[str, Any],
    key: str = "alternate",
    think: float = 0.0,
    metric_set: str = "",
) -> None:
    """Evaluate (no profile) and profile of the seed, alternating, `rounds` pairs; stored under `key`. `think`:
    seconds between calls (an agent's model answering), none by default; `metric_set`: the profile's set (the
    server's default when empty)."""
    from profsvc_client.client import ProfilerClient, load_source

    source = load_source(SEED)
    evaluates, profiles = [], []
    # The server's own timings of each call (where its seconds went), for the medians per phase.
    evaluate_timings: list[dict[str, float]] = []
    profile_timings: list[dict[str, float]] = []
    with ProfilerClient(server.target, timeout=300) as client:
        client.compile(source)  # the build is not this pattern's subject
        for i in range(rounds):
            time.sleep(think)
            seconds, result = timed(lambda: client.evaluate(source, skip_profile=True))
            evaluates.append(seconds)
            evaluate_timings.append(dict(result.timings))
            log(
                f"{key} {i + 1}/{rounds}: evaluate {seconds:.2f} s correct={result.correctness.ok}"
                f" timings={result.timings}"
            )
            time.sleep(think)
            seconds, result = timed(lambda: client.profile(source, skip_charts=True, metric_set=metric_set))
            profiles.append(seconds)
            profile_timings.append(dict(result.timings))
            log(f"{key} {i + 1}/{rounds}: profile {seconds:.2f} s ok={result.ok} timings={result.timings}")
    results[key] = {
        "evaluate": summary(evaluates),
        "profile": summary(profiles),
        "phases": {"evaluate": phase_medians(evaluate_timings), "profile": phase_medians(profile_timings)},
    }
    results["samples"][key] = {
        "evaluate": evaluates,
        "profile": profiles,
        "evaluate_timings": evaluate_timings,
        "profile_timings": profile_timings,
    }


def agent_iterations(server: Server, key: str, sources: list[tuple[str, Any]], results: dict[str, Any]) -> None:
    """One agent iteration per (label, source): compile, then a full evaluate; stored under `key` with each
    compile's build routes."""
    from profsvc_client.client import ProfilerClient

    iterations, compiles, routes, failed = [], [], [], 0
    with ProfilerClient(server.target, timeout=600) as client:
        for i, (label, source) in enumerate(sources):
            start = time.monotonic()
            compiled = client.compile(source)
            compiles.append(time.monotonic() - start)
            evaluation = client.evaluate(source, skip_charts=True)
            iterations.append(time.monotonic() - start)
            routes.append(",".join(unit.route for unit in compiled.units))
            failed += 0 if evaluation.correctness.ok and evaluation.profile.ok else 1
            log(
                f"{key} {i + 1}/{len(sources)} ({label}): {iterations[-1]:.2f} s, compile {compiles[-1]:.2f} s "
                f"({routes[-1]}), correct={evaluation.correctness.ok} profiled={evaluation.profile.ok} "
                f"ok={compiled.ok}"
            )
    results[key] = {"iteration": summary(iterations), "compile": summary(compiles), "routes": routes, "not_ok": failed}
    results["samples"][key] = {"iteration": iterations, "compile": compiles}


def bench_new_source(server: Server, rounds: int, results: dict[str, Any]) -> None:
    chosen = [(path.name, changed(path, f"{time.time_ns()}-{i}")) for i, path in enumerate(sources(rounds))]
    agent_iterations(server, "new_source", chosen, results)


def bench_revise(server: Server, rounds: int, results: dict[str, Any]) -> None:
    tags = [f"r{i}_{time.time_ns()}" for i in range(rounds)]
    agent_iterations(server, "revise", [(tag, revised(tag)) for tag in tags], results)


def bench_clients(server: Server, clients: int, results: dict[str, Any]) -> None:
    from profsvc_client.client import ProfilerClient

    def one(index: int, path: Path) -> tuple[float, float]:
        source = changed(path, f"client-{index}-{time.time_ns()}")
        with ProfilerClient(server.target, timeout=900) as client:
            evaluate_seconds, _ = timed(lambda: client.evaluate(source, skip_profile=True))
            profile_seconds, _ = timed(lambda: client.profile(source, skip_charts=True))
        return evaluate_seconds, profile_seconds

    busy_before, start = server.gpu_busy_seconds(), time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        answers = list(pool.map(lambda pair: one(*pair), enumerate(sources(clients))))
    wall = time.monotonic() - start
    busy = server.gpu_busy_seconds() - busy_before
    results["clients"] = {
        "clients": clients,
        "evaluate": summary([a[0] for a in answers]),
        "profile": summary([a[1] for a in answers]),
        "wall_s": wall,
        "gpu_busy_share_pct": 100 * busy / wall,
    }


def bench_full_size(server: Server, work: Path, results: dict[str, Any]) -> None:
    """Each problem of benchmarks/full_size (KernelBench's published sizes, inputs of gigabytes): evaluate without
    profile and profile through the server, beside the same evaluation in a fresh process (the baseline)."""
    from profsvc_client.client import ProfilerClient

    rows: dict[str, dict[str, Any]] = {}
    with ProfilerClient(server.target, timeout=900) as client:
        for path in sorted(FULL_SIZE.glob("*.py")):
            rows[path.name] = _full_size_problem(client, path, Path(tempfile.mkdtemp(dir=work)))
            log(f"full size {path.name}: {json.dumps(rows[path.name])}")
    results["full_size"] = rows


def _full_size_problem(client: Any, path: Path, folder: Path) -> dict[str, Any]:
    from profsvc_client.client import load_source

    source = load_source(path)
    row: dict[str, Any] = {"compile_s": timed(lambda: client.compile(source))[0]}
    row["evaluate_s"], evaluation = timed(lambda: client.evaluate(source, skip_profile=True))
    row["evaluate_ok"], row["evaluate_timings"] = evaluation.ok, evaluation.timings
    row["evaluate_error"] = evaluation.correctness.error.message if evaluation.correctness.error else ""
    row["profile_s"], profiled = timed(lambda: client.profile(source, skip_charts=True))
    row["profile_ok"], row["profile_timings"] = profiled.ok, profiled.timings
    shutil.copy(path, folder / path.name)
    row["baseline_s"] = timed(lambda: fresh_evaluation(folder, folder / path.name, folder / "ext"))[0]
    return row


def bench_analyze(
    server: Server, rounds: int, results: dict[str, Any], key: str = "analyze", skip_charts: bool = False
) -> None:
    """The seed's report one at a time, then from 64 clients at once; stored under `key`."""
    from profsvc_client.client import ProfilerClient

    sequential = []
    with ProfilerClient(server.target, timeout=300) as client:
        client.analyze(REPORT, skip_charts=skip_charts)
        for _ in range(3 * rounds):
            seconds, _ = timed(lambda: client.analyze(REPORT, skip_charts=skip_charts))
            sequential.append(seconds)

    def one(_: int) -> float:
        with ProfilerClient(server.target, timeout=900) as client:
            return timed(lambda: client.analyze(REPORT, skip_charts=skip_charts))[0]

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(ANALYZE_CLIENTS) as pool:
        loaded = list(pool.map(one, range(ANALYZE_CLIENTS)))
    wall = time.monotonic() - start
    results[key] = {
        "sequential": summary(sequential),
        "concurrent": summary(loaded),
        "clients": ANALYZE_CLIENTS,
        "reports_per_s": ANALYZE_CLIENTS / wall,
    }
    log(
        f"{key}: p50 {results[key]['sequential'].get('p50', 0):.2f} s; "
        f"{ANALYZE_CLIENTS} clients {results[key]['reports_per_s']:.2f} reports/s"
    )


def fresh_evaluation(folder: Path, target: Path, extensions: Path) -> None:
    """KernelBench's way, in a fresh process: import, build, 5 trials on fresh inputs, 100 timed calls each."""
    env = {**_env(), "TORCH_EXTENSIONS_DIR": str(extensions)}
    subprocess.run([sys.executable, "-c", KERNELBENCH_EVALUATION, str(folder), target.stem], check=True, env=env)


def bench_baseline(work: Path, rounds: int, results: dict[str, Any]) -> None:
    """A fresh process per iteration, KernelBench-style, then plain ncu: what an agent pays without profsvc."""
    ncu = shutil.which("ncu")
    if ncu is None:
        results["errors"]["baseline"] = "no ncu on this host"
        return
    iterations = []
    for i in range(rounds):
        folder = Path(tempfile.mkdtemp(dir=work))
        target = folder / "candidate.py"
        target.write_text(SEED.read_text() + f"\n# iteration {i}\n")
        env = {"TORCH_EXTENSIONS_DIR": str(folder / "ext")}
        start = time.monotonic()
        fresh_evaluation(folder, target, folder / "ext")
        plain = [ncu, "--set", "full", "--nvtx", "--nvtx-include", "profsvc/", "-f", "-o", str(folder / "r")]
        subprocess.run(
            [*plain, sys.executable, str(ROOT / "benchmarks" / "plain_harness.py"), str(target)],
            check=True,
            env={**_env(), **env},
            stdout=subprocess.DEVNULL,
        )
        iterations.append(time.monotonic() - start)
        log(f"baseline {i + 1}/{rounds}: {iterations[-1]:.1f} s")
    results["baseline"] = {"iteration": summary(iterations)}


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def phase_lines(results: dict[str, Any]) -> list[str]:
    """One line per alternating pattern and call kind: the server's timings, median per phase (1 ms or more)."""
    lines = []
    for key in ALTERNATES:
        for call, phases in results.get(key, {}).get("phases", {}).items():
            shown = ", ".join(f"`{name}` {seconds:.3f} s" for name, seconds in phases.items() if seconds >= 0.001)
            lines.append(f"Server timings, {key} {call}, p50 per phase: {shown}.")
    return lines


def wait_lines(results: dict[str, Any]) -> list[str]:
    """One line per alternating pattern and call kind: the calls that waited 0.1 s or more for a warm worker (the
    server's `KIND:wait` timings), which p50s hide."""
    lines = []
    for key in ALTERNATES:
        for call in ("evaluate", "profile"):
            timings = results["samples"].get(key, {}).get(f"{call}_timings", [])
            waits = [max((s for name, s in t.items() if name.endswith(":wait")), default=0.0) for t in timings]
            slow = [w for w in waits if w >= 0.1]
            if timings:
                longest = f" (longest {max(slow):.2f} s)" if slow else ""
                lines.append(
                    f"Waits for a warm worker, {key} {call}: {len(slow)} of {len(timings)} calls waited 0.1 s or "
                    f"more{longest}."
                )
    return lines


def route_lines(results: dict[str, Any]) -> list[str]:
    """One line per new-source pattern that ran: each compile's build route."""
    return [
        f"Build route of each compile, {key}: {', '.join(results[key]['routes'])}."
        for key in ("new_source", "revise")
        if results.get(key, {}).get("routes")
    ]


def table(results: dict[str, Any]) -> str:
    """The Markdown table of the run."""

    def row(pattern: str, kind: str, stats: dict[str, Any] | None, target: str) -> str:
        if not stats or not stats.get("n"):
            return f"| {pattern} | {kind} | not run | | | | {target} |"
        return (
            f"| {pattern} | {kind} | {stats['n']} | {stats['p50']:.2f} s | {stats['p90']:.2f} s | "
            f"{stats['max']:.2f} s | {target} |"
        )

    lines = ["| pattern | call | n | p50 | p90 | max | target |", "| --- | --- | --- | --- | --- | --- | --- |"]
    alternate, new_source = results.get("alternate", {}), results.get("new_source", {})
    clients, analyze = results.get("clients", {}), results.get("analyze", {})
    lines.append(row("alternate", "evaluate (no profile)", alternate.get("evaluate"), "p50 <= 1.0 s, p90 <= 1.5 p50"))
    lines.append(row("alternate", "profile", alternate.get("profile"), "p50 <= 2.0 s, p90 <= 1.5 p50"))
    variants = {
        "alternate_think": f"alternate, {results.get('think_s') or 'think'} s before each call",
        "alternate_set": f"alternate, profile's set `{results.get('metric_set') or 'NAME'}`",
        "alternate_unjailed": "alternate, unjailed",
    }
    for key, pattern in variants.items():
        stats = results.get(key, {})
        lines += [
            row(pattern, kind, stats.get(call), "")
            for call, kind in (("evaluate", "evaluate (no profile)"), ("profile", "profile"))
        ]
    unjailed = results.get("alternate_unjailed", {})
    lines.append(row("new source", "compile + evaluate + profile", new_source.get("iteration"), "p50 <= 8 s"))
    lines.append(row("new source", "its compile", new_source.get("compile"), ""))
    revise = results.get("revise", {})
    lines.append(
        row("revise (seed renamed, kernel changed)", "compile + evaluate + profile", revise.get("iteration"), "")
    )
    lines.append(row("revise", "its compile", revise.get("compile"), ""))
    lines.append(row("baseline", "fresh process + plain ncu", results.get("baseline", {}).get("iteration"), ""))
    lines.append(row("clients", "evaluate", clients.get("evaluate"), ""))
    lines.append(row("clients", "profile", clients.get("profile"), ""))
    before, plain = results.get("analyze_baseline", {}), results.get("analyze_plain", {})
    lines.append(row("analyze", "one at a time, warm", analyze.get("sequential"), "p50 <= 0.3 s"))
    lines.append(row("analyze", f"{analyze.get('clients', 0)} clients", analyze.get("concurrent"), ""))
    lines.append(row("analyze, no charts", "one at a time, warm", plain.get("sequential"), ""))
    lines.append(row("analyze, no charts", f"{plain.get('clients', 0)} clients", plain.get("concurrent"), ""))
    lines.append(row("analyze baseline", "one at a time, warm", before.get("sequential"), ""))
    lines.append(row("analyze baseline", f"{before.get('clients', 0)} clients", before.get("concurrent"), ""))
    if clients:
        lines.append(
            f"\nGPU lane busy {clients['gpu_busy_share_pct']:.0f} % of {clients['wall_s']:.1f} s "
            f"with {clients['clients']} clients (target >= 90 %)."
        )
    for name, run in (
        ("Analyze", analyze),
        ("Analyze without charts", plain),
        ("Analyze baseline (`--readers-per-caller 0`: a warm worker per report)", before),
    ):
        if run:
            target = " (target >= 5)" if run is analyze else ""
            lines.append(f"{name} under {run['clients']} clients: {run['reports_per_s']:.2f} reports/s{target}.")
    for call in ("evaluate", "profile") if alternate and unjailed else ():
        jailed_p50, free_p50 = alternate[call].get("p50"), unjailed[call].get("p50")
        if jailed_p50 and free_p50:
            lines.append(
                f"The jail's cost, {call} p50: {jailed_p50:.2f} s jailed against {free_p50:.2f} s unjailed "
                f"({100 * (jailed_p50 / free_p50 - 1):+.0f} %; target within 10 %)."
            )
    lines += phase_lines(results) + wait_lines(results) + route_lines(results)
    for name, problem in results.get("full_size", {}).items():
        lines.append(
            f"Full size, {name}: evaluate {problem['evaluate_s']:.1f} s (ok={problem['evaluate_ok']}), profile "
            f"{problem['profile_s']:.1f} s (ok={problem['profile_ok']}); the same evaluation in a fresh process "
            f"{problem['baseline_s']:.1f} s."
        )
    return "\n".join(lines)


def on_another_server(
    work: Path, options: tuple[str, ...], step: Callable[[Server], None], results: dict[str, Any], key: str
) -> None:
    """Run `step` on a server of its own started with `options` (a baseline of the same run); errors recorded."""
    server = Server(work, f"served-{key}", warm=True, options=options)
    try:
        if server.wait_ready(("compile",), timeout=240):
            step(server)
        else:
            results["errors"][key] = "the server did not come up"
    except Exception as error:  # recorded, as above
        results["errors"][key] = f"{type(error).__name__}: {error}"
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--skip", action="append", default=[], choices=PATTERNS)
    parser.add_argument("--unjailed", action="store_true", help="serve without the jail")
    parser.add_argument(
        "--jail-cost", action="store_true", help="also run `alternate` on a server without the jail, the same run"
    )
    parser.add_argument(
        "--think",
        type=float,
        default=0.0,
        help="also run `alternate` with this many seconds between calls (an agent's model answering)",
    )
    parser.add_argument(
        "--metric-set", default="", help="also run `alternate` with each profile asking this metric set"
    )
    parser.add_argument(
        "--full-size", action="store_true", help="also evaluate and profile the problems of benchmarks/full_size"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="agent-loop-"))
    results: dict[str, Any] = {
        "samples": {},
        "errors": {},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "jailed": not args.unjailed,
        "think_s": args.think,
        "metric_set": args.metric_set,
    }
    jail = ("--unjailed",) if args.unjailed else ()
    server = Server(work, "served", warm=True, options=jail)
    try:
        if not server.wait_ready(("compile",), timeout=240):
            raise SystemExit("the server did not come up: see " + str(work / "served.log"))
        steps = {
            "alternate": lambda: bench_alternate(server, args.rounds, results),
            "new_source": lambda: bench_new_source(server, max(3, args.rounds // 2), results),
            "revise": lambda: bench_revise(server, max(3, args.rounds // 2), results),
            "clients": lambda: bench_clients(server, args.clients, results),
            "analyze": lambda: bench_analyze(server, args.rounds, results),
            "analyze_plain": lambda: bench_analyze(server, args.rounds, results, "analyze_plain", skip_charts=True),
            "full_size": lambda: bench_full_size(server, work, results),
            "alternate_think": lambda: bench_alternate(server, args.rounds, results, "alternate_think", args.think),
            "alternate_set": lambda: bench_alternate(
                server, args.rounds, results, "alternate_set", metric_set=args.metric_set
            ),
        }
        for name, step in steps.items():
            if (
                name in args.skip
                or (name == "analyze_plain" and "analyze" in args.skip)
                or (name == "full_size" and not args.full_size)
                or (name == "alternate_think" and not args.think)
                or (name == "alternate_set" and not args.metric_set)
            ):
                continue
            try:
                step()
            except Exception as error:  # one pattern's failure is recorded; the others still run
                results["errors"][name] = f"{type(error).__name__}: {error}"
                log(f"{name} failed: {error}")
    finally:
        server.stop()
        shutil.copy(work / "served.log", args.out / "server.log")
    if args.jail_cost and not args.unjailed:
        # The jail's cost: the same pattern on the same host, unjailed, right after.
        alternate = partial(bench_alternate, rounds=args.rounds, results=results, key="alternate_unjailed")
        on_another_server(work, ("--unjailed",), alternate, results, "alternate_unjailed")
    if "analyze" not in args.skip:
        # The same run's baseline: every report read on a warm worker of its own, as before readers stayed.
        analyze = partial(bench_analyze, rounds=args.rounds, results=results, key="analyze_baseline")
        on_another_server(work, ("--readers-per-caller", "0", *jail), analyze, results, "analyze_baseline")
    if "baseline" not in args.skip:
        try:
            bench_baseline(work, max(2, args.rounds // 4), results)
        except Exception as error:  # recorded, as above
            results["errors"]["baseline"] = f"{type(error).__name__}: {error}"
    (args.out / "agent_loop.json").write_text(json.dumps(results, indent=2))
    (args.out / "agent_loop.md").write_text(table(results) + "\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
