"""Time the static check on every file of its corpus: best-of-N milliseconds per file.

    python benchmarks/bench_staticcheck.py [--repeat N]

The table is parsed once before timing (as the server does, once per process), then each
file of tests/staticcheck_corpus/ is checked N times and its fastest run kept. Exits 1
when any file's best time is over the budget of 50 ms.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from profsvc.staticcheck import check_source, load_rules

BUDGET_MS = 50.0
CORPUS = Path(__file__).resolve().parents[1] / "tests" / "staticcheck_corpus"


def main() -> int:
    """Print one line per file and a verdict; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="checks per file; the fastest counts (default 5)")
    args = parser.parse_args()
    load_rules()
    slowest = 0.0
    for path in sorted(CORPUS.glob("*/*.py")):
        text = path.read_text()
        timings = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            check_source(text)
            timings.append(time.perf_counter() - start)
        best_ms = min(timings) * 1e3
        slowest = max(slowest, best_ms)
        print(f"{path.parent.name}/{path.name:<56} {best_ms:7.2f} ms best of {args.repeat}")
    verdict = "PASS" if slowest <= BUDGET_MS else "FAIL"
    print(f"{verdict}: slowest file {slowest:.2f} ms (budget {BUDGET_MS:.0f} ms)")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
