"""Reading a report: a fresh analyze worker against a warm one (reader, tables and chart renderer loaded).

    python benchmarks/bench_analyze.py [--runs 5] [REPORT]

Runs on any machine (no GPU): the report reader and the chart renderer are what it times.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REPORT = ROOT / "tests" / "fixtures" / "seed47_full.ncu-rep"


def main() -> int:
    """Print the medians of both ways and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?", type=Path, default=DEFAULT_REPORT)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    charts = Path(tempfile.mkdtemp())
    job = [str(args.report), "--charts", str(charts)]
    fresh = []
    for _ in range(args.runs):
        start = time.monotonic()
        command = [sys.executable, "-m", "profsvc.worker.analyze_report", *job]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        fresh.append(time.monotonic() - start)
    from profsvc.worker import analyze_report

    start = time.monotonic()
    analyze_report._warm()
    warm_up = time.monotonic() - start
    warm = []
    for _ in range(args.runs):
        start = time.monotonic()
        with contextlib.redirect_stdout(io.StringIO()):
            analyze_report.main(job)
        warm.append(time.monotonic() - start)
    fresh_median, warm_median = statistics.median(fresh), statistics.median(warm)
    print("| analyze of | fresh worker | warm worker (job only) | ratio | warm-up paid ahead |")
    print("| --- | --- | --- | --- | --- |")
    print(
        f"| {args.report.name} | {fresh_median:.2f} s | {warm_median:.2f} s | "
        f"{fresh_median / warm_median:.1f}x | {warm_up:.2f} s |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
