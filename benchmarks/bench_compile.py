"""The Compile RPC of a Python problem through `profsvc serve`: fresh worker, warm worker, repeat of a source.

    python benchmarks/bench_compile.py [--runs 5] [PROBLEM.py]

Runs on any machine (on one without CUDA torch, the problem's lazy extension is not built at compile time, so
this times the worker and the server, not nvcc). Each figure is a median of --runs calls, each call with a
source the server has not compiled before (a comment line makes each distinct), except the repeats.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fastpath import SEED, Server

from profsvc_client.client import ProfilerClient, load_source
from profsvc_contract.models import SourceFile


def _timed_compiles(server: Server, problem: Path, runs: int, *, distinct: bool, pause: float) -> list[float]:
    samples = []
    with ProfilerClient(server.target, timeout=300) as client:
        if not distinct:
            client.compile(load_source(problem))  # the first compile of the repeated source is not a repeat
        for i in range(runs):
            source = load_source(problem)
            if distinct:
                text = source.main.content + f"\n# run {time.monotonic_ns()} {i}\n".encode()
                source.main = SourceFile(name=source.main.name, content=text)
            time.sleep(pause)  # lets the pool warm the next worker, as an agent's thinking time would
            start = time.monotonic()
            result = client.compile(source)
            samples.append(time.monotonic() - start)
            if not result.ok:
                raise RuntimeError(f"compile failed: {result.diagnostics}")
    return samples


def main() -> int:
    """Print the table of medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", nargs="?", type=Path, default=SEED)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-compile-"))
    rows = {}
    for name, warm in (("fresh worker (--no-warm-workers)", False), ("warm worker", True)):
        server = Server(work, "warm" if warm else "cold", warm=warm)
        try:
            server.wait_ready(("compile",) if warm else ())
            rows[name] = _timed_compiles(server, args.problem, args.runs, distinct=True, pause=8.0 if warm else 0.0)
            if warm:
                rows["repeat of a source compiled before"] = _timed_compiles(
                    server, args.problem, args.runs, distinct=False, pause=0.0
                )
        finally:
            server.stop()
    baseline = statistics.median(rows["fresh worker (--no-warm-workers)"])
    print("| Compile RPC | median | ratio to a fresh worker | samples (s) |")
    print("| --- | --- | --- | --- |")
    for name, samples in rows.items():
        median = statistics.median(samples)
        print(f"| {name} | {median:.3f} s | {baseline / median:.0f}x | {', '.join(f'{s:.3f}' for s in samples)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
