"""What a worker's exit costs after an evaluate job, on a GPU host: Python's teardown against an exit at once.

Builds the problem once (the harness's compile mode), then runs the worker harness in evaluate mode, alternating
two ways to end: as profsvc does (`exit_without_teardown`: os._exit once the status is written) and the usual
`sys.exit` (Python tears down torch and the CUDA context). For each run: the process's wall time and the seconds
from the status file's write to the process's end.

    python tools/exit_cost.py --out DIR [--runs 3] [--problem tests/fixtures/seed47.py]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "client"), str(ROOT / "tools")]

from gpu_overhead import build_problem  # noqa: E402

from profsvc.build.python_problem import harness_argv  # noqa: E402

# The harness run as `python -m` would, with the exit at once left as is or replaced by Python's usual exit.
CHILD = """
import sys
from profsvc.worker import harness
if sys.argv[1] == "teardown":
    harness.exit_without_teardown = sys.exit
sys.exit(harness.main(sys.argv[2:]))
"""


def main() -> int:
    """Alternate the two exits, write DIR/exit_cost.json and print a table of medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--problem", type=Path, default=ROOT / "tests/fixtures/seed47.py")
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    cache, env = build_problem(args.problem, args.out)
    results: dict[str, list[dict[str, float]]] = {"exit at once": [], "teardown": []}
    for run in range(args.runs):
        for name in results:
            status = args.out / f"{name.replace(' ', '-')}-{run}.json"
            harness = harness_argv(sys.executable, args.problem, None, cache, status, "evaluate")[3:]
            start = time.time()
            done = subprocess.run(
                [sys.executable, "-c", CHILD, "teardown" if name == "teardown" else "as-is", *harness],
                env=env,
                cwd=args.out,
                capture_output=True,
                text=True,
                timeout=300,
            )
            end = time.time()
            ok = json.loads(status.read_text()).get("ok") if status.exists() else None
            after_status = end - status.stat().st_mtime if status.exists() else float("nan")
            sample = {"rc": done.returncode, "ok": ok, "wall_s": end - start, "after_status_s": after_status}
            results[name].append(sample)
            print(name, run, json.dumps(sample), flush=True)
    (args.out / "exit_cost.json").write_text(json.dumps(results, indent=1))
    print("| exit | wall (median) | status written to process end (median) | runs |")
    print("| --- | --- | --- | --- |")
    for name, samples in results.items():
        wall = statistics.median(s["wall_s"] for s in samples)
        after = statistics.median(s["after_status_s"] for s in samples)
        print(f"| {name} | {wall:.2f} s | {after:.3f} s | {len(samples)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
