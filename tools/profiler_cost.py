"""What torch.profiler traces cost a process, and what they leave behind, on a GPU host.

The benchmark's kernel records (profsvc.worker.timing.kernel_records) and the correctness check's launch records
open torch.profiler (CUPTI) traces in the judge's and the candidate's processes. This measures, in fresh
processes (one per TEARDOWN_CUPTI setting: unset, 0, 1): each of three traces around 10 calls of a small
elementwise kernel, and the event time and host launch time of that kernel before the first trace and after
the last, to see whether a trace left CUPTI attached (a slower launch is on every later timed call).

    python tools/profiler_cost.py --out DIR [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

CHILD = r"""
import json, statistics, time, torch
from torch.profiler import ProfilerActivity, profile

x = torch.randn(1 << 20, device="cuda")
for _ in range(20):
    y = x * 2
torch.cuda.synchronize()

def timed_calls(n=200):
    events, launches = [], []
    for _ in range(n):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        begin = time.perf_counter()
        start.record()
        x * 2
        launches.append((time.perf_counter() - begin) * 1e6)
        end.record()
        torch.cuda.synchronize()
        events.append(start.elapsed_time(end) * 1e3)
    return {"events_us": statistics.median(events), "launch_us": statistics.median(launches)}

before = timed_calls()
traces = []
for _ in range(3):
    begin = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            x * 2
        torch.cuda.synchronize()
    kernels = [e for e in prof.profiler.kineto_results.events() if e.device_type() == torch.autograd.DeviceType.CUDA]
    traces.append({"seconds": time.perf_counter() - begin, "records": len(kernels)})
after = timed_calls()
print(json.dumps({"before": before, "traces": traces, "after": after}))
"""
SETTINGS = ("unset", "0", "1")


def run_once(setting: str) -> dict:
    """One fresh process under one TEARDOWN_CUPTI setting."""
    env = dict(os.environ)
    env.pop("TEARDOWN_CUPTI", None)
    if setting != "unset":
        env["TEARDOWN_CUPTI"] = setting
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"TEARDOWN_CUPTI={setting}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _median(runs: list[dict], *path: str | int) -> float:
    """The median over runs of the value at `path` in each."""
    values = []
    for run in runs:
        value: Any = run
        for key in path:
            value = value[key]
        values.append(value)
    return statistics.median(values)


def main() -> int:
    """Run each setting `--runs` times, alternating; write DIR/profiler_cost.json and print medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict]] = {s: [] for s in SETTINGS}
    for _ in range(args.runs):
        for setting in SETTINGS:
            runs[setting].append(run_once(setting))
    (args.out / "profiler_cost.json").write_text(json.dumps(runs, indent=2))
    print("| TEARDOWN_CUPTI | trace 1 | trace 2 | trace 3 | events before / after | launch before / after |")
    print("| --- | --- | --- | --- | --- | --- |")
    for setting, found in runs.items():
        traces = " | ".join(f"{_median(found, 'traces', i, 'seconds'):.3f} s" for i in range(3))
        print(
            f"| {setting} | {traces} | {_median(found, 'before', 'events_us'):.1f} / "
            f"{_median(found, 'after', 'events_us'):.1f} us | {_median(found, 'before', 'launch_us'):.1f} / "
            f"{_median(found, 'after', 'launch_us'):.1f} us |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
