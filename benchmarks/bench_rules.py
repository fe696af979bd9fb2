"""Time rule evaluation for one kernel on the committed reports: median microseconds per kernel.

    python benchmarks/bench_rules.py [--iterations N]

Reads each report once (that is not timed), then evaluates the whole rule table,
ncu merge and ranking included, N times per kernel. Exits 1 when any median is
over the budget of 1000 us per kernel.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from profsvc.metrics.analysis import analyze_report
from profsvc.metrics.catalog import load_catalog
from profsvc.rules import evaluate_rules, load_rules

BUDGET_US = 1000.0
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def main() -> int:
    """Print one line per kernel and a verdict; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300, help="evaluations per kernel (default 300)")
    args = parser.parse_args()
    catalog, rules = load_catalog(), load_rules()
    reports = sorted(FIXTURES.glob("*.ncu-rep")) + sorted(FIXTURES.glob("archetypes/*.ncu-rep"))
    worst = 0.0
    for report in reports:
        for kernel in analyze_report(report).kernels:
            evaluate_rules(kernel, catalog, rules)  # warm-up: first-use costs are paid at start, not per kernel
            timings = []
            for _ in range(args.iterations):
                start = time.perf_counter()
                evaluate_rules(kernel, catalog, rules)
                timings.append(time.perf_counter() - start)
            median_us = statistics.median(timings) * 1e6
            worst = max(worst, median_us)
            print(f"{report.name:<32} {kernel.name:<24} {median_us:8.1f} us median over {args.iterations}")
    verdict = "PASS" if worst <= BUDGET_US else "FAIL"
    print(f"{verdict}: slowest median {worst:.1f} us per kernel (budget {BUDGET_US:.0f} us)")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
