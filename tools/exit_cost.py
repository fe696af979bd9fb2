"""What a profile's exit costs under ncu, on a GPU host: Python's teardown against two lighter exits.

Builds the problem once (the harness's compile mode), then runs the worker harness in profile mode under
profsvc's ncu command (the default metric set, the measured call's NVTX range), as a fresh profile job runs, and
alternates three ways to end once its status is written:

- `teardown`: Python's usual exit (ncu finishes its report as its target ends);
- `libc exit`: the C library's exit, which runs the atexit handlers of the libraries loaded (ncu's injection,
  CUDA's) but not Python's teardown of its modules (torch's among them);
- `exit at once`: os._exit, as every worker ends (nothing runs).

For each run: ncu's wall time, the seconds from the status file's write to ncu's end, the passes ncu printed and
the metrics of each kernel the report holds (one kernel: the measured call's), so an exit that cuts the report
short shows.

    python tools/exit_cost.py --out DIR [--runs 3] [--problem tests/fixtures/seed47.py]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "client"), str(ROOT / "tools")]

from gpu_overhead import harness_arguments, prepared  # noqa: E402

from profsvc.build.python_problem import harness_argv  # noqa: E402
from profsvc.metrics.nvtx import MEASURED_INCLUDE  # noqa: E402
from profsvc.metrics.reader import load_reader  # noqa: E402
from profsvc.ncu.command import NcuOptions, ncu_command  # noqa: E402
from profsvc.ncu.metric_sets import default_set  # noqa: E402

# The harness run as `python -m` would; once its status is written, it ends the way argv[1] names.
CHILD = """
import ctypes, sys
from profsvc.worker import harness
exit_at_once = harness.exit_without_teardown

def end(code):
    sys.stdout.flush(); sys.stderr.flush()
    if sys.argv[1] == "libc-exit":
        ctypes.CDLL(None).exit(code)
    if sys.argv[1] == "exit-at-once":
        exit_at_once(code)
    sys.exit(code)

harness.exit_without_teardown = end
harness.main(sys.argv[2:])
"""
EXITS = ("teardown", "libc exit", "exit at once")
PASSES = re.compile(r"-\s*(\d+)\s*pass")


def metrics_per_kernel(report: Path) -> list[int]:
    """The metrics each profiled kernel of the report holds (NVIDIA's reader), so that a report cut short shows;
    empty when there is none to read."""
    if not report.is_file():
        return []
    context = load_reader().load_report(str(report))
    ranges = [context.range_by_idx(r) for r in range(context.num_ranges())]
    return [len(r.action_by_idx(a).metric_names()) for r in ranges for a in range(r.num_actions())]


def main() -> int:
    """Alternate the three exits, write DIR/exit_cost.json and print a table of medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness_arguments(parser, runs=3)
    args = parser.parse_args()
    ncu, cache, env = prepared(args)
    collection = default_set()
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in EXITS}
    for run in range(args.runs):
        for name in EXITS:
            stem = f"{name.replace(' ', '-')}-{run}"
            status, report = args.out / f"{stem}.json", args.out / f"{stem}.ncu-rep"
            harness = harness_argv(sys.executable, args.problem, None, cache, status, "profile")[3:]
            options = NcuOptions(
                collection_args=collection.collection_args(), export_path=report, nvtx_include=[MEASURED_INCLUDE]
            )
            target = [sys.executable, "-c", CHILD, name.replace(" ", "-"), *harness]
            start = time.monotonic()
            done = subprocess.run(
                ncu_command(ncu, options, target), env=env, cwd=args.out, capture_output=True, text=True, timeout=300
            )
            end = time.monotonic()
            written = json.loads(status.read_text()) if status.exists() else {}
            sample = {
                "rc": done.returncode,
                "ok": written.get("ok"),
                "wall_s": end - start,
                # The harness's own reading of the host's monotonic clock as it wrote its status (as the server
                # times `profile:exit`).
                "after_status_s": end - written["written_at"] if "written_at" in written else float("nan"),
                "passes": [int(p) for p in PASSES.findall(done.stdout)],
                "metrics_per_kernel": metrics_per_kernel(report),
            }
            results[name].append(sample)
            print(name, run, json.dumps(sample), flush=True)
            if done.returncode:
                (args.out / f"{stem}.log").write_text(done.stdout + done.stderr)
    (args.out / "exit_cost.json").write_text(json.dumps(results, indent=1))
    print("| exit | ncu wall (median) | status written to ncu's end (median) | metrics per kernel | runs |")
    print("| --- | --- | --- | --- | --- |")
    for name, samples in results.items():
        wall = statistics.median(s["wall_s"] for s in samples)
        after = statistics.median(s["after_status_s"] for s in samples)
        metrics = sorted({tuple(s["metrics_per_kernel"]) for s in samples})
        print(f"| {name} | {wall:.2f} s | {after:.3f} s | {metrics} | {len(samples)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
