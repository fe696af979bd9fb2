"""Where a profile's time goes under ncu, per collection variant, on a GPU host.

Builds the seed problem once (the harness's compile mode), then runs the worker harness under ncu, exactly as a
profile job does (profsvc's ncu command, its NVTX range), once per variant and repetition. For each run: ncu's wall,
the passes it printed, and the harness's own phases (measured_call holds every replay pass). Then whether ncu
applies its rules to the report written with them off when it re-reads it (`--import` with `--export`), and in
how long: what ncu's rules would cost off the GPU.

    python tools/gpu_overhead.py --out DIR [--runs 2] [--problem tests/fixtures/seed47.py]
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "client")]

from profsvc.build.python_problem import harness_argv  # noqa: E402
from profsvc.metrics.nvtx import MEASURED_INCLUDE  # noqa: E402
from profsvc.metrics.reader import load_reader  # noqa: E402
from profsvc.ncu.command import NcuOptions, ncu_command  # noqa: E402
from profsvc.ncu.metric_sets import default_set  # noqa: E402

PASSES = re.compile(r"-\s*(\d+)\s*pass")
RULES_OFF = "default-rules-off"


def _without_section(args: tuple[str, ...], section: str) -> tuple[str, ...]:
    out: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == "--section" and i + 1 < len(args) and args[i + 1] == section:
            skip = True
            continue
        out.append(arg)
    return tuple(out)


def variants() -> dict[str, tuple[tuple[str, ...], dict[str, str]]]:
    """Each variant: its collection arguments and the environment it adds."""
    args = default_set().collection_args()
    return {
        "default": (args, {}),
        # ncu's Python rules not run while it profiles.
        RULES_OFF: ((*args, "--apply-rules", "no"), {}),
        "default-no-sw-prepass": (args, {"NV_COMPUTE_PROFILER_DISABLE_SW_PRE_PASS": "1"}),
        "default-no-import-source": (tuple(a for a in args if a not in ("--import-source", "yes")), {}),
        "default-no-source-counters": (_without_section(args, "SourceCounters"), {}),
        "timing-only": (("--metrics", "gpu__time_duration.sum"), {}),
        "basic": (("--set", "basic"), {}),
    }


def build_problem(problem: Path, out: Path) -> tuple[Path, dict[str, str]]:
    """Build the problem's extensions once (the harness's compile mode) into OUT/cache; print the outcome.

    Returns the cache and the environment the harness runs in (this repository importable).
    """
    cache = out / "cache"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "client"), os.environ.get("PYTHONPATH", "")]),
    }
    start = time.monotonic()
    build = harness_argv(sys.executable, problem, None, cache, out / "compile.json", "compile")
    subprocess.run(build, env=env, cwd=out, check=False, capture_output=True)
    ok = json.loads((out / "compile.json").read_text()).get("ok")
    print(f"build: {time.monotonic() - start:.1f} s, ok {ok}", flush=True)
    return cache, env


def harness_arguments(parser: argparse.ArgumentParser, runs: int) -> None:
    """The options of a tool that runs the harness under ncu: --out, --runs, --problem."""
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--problem", type=Path, default=ROOT / "tests/fixtures/seed47.py")


def prepared(args: argparse.Namespace) -> tuple[str, Path, dict[str, str]]:
    """OUT made (args.out resolved), ncu's path (exits where there is none), and the problem built: ncu, its
    cache and the harness's environment."""
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    ncu = shutil.which("ncu")
    if ncu is None:
        raise SystemExit("ncu not found: run this on a GPU host")
    cache, env = build_problem(args.problem, args.out)
    return ncu, cache, env


def rule_results(report: Path) -> int:
    """How many rule results the report's kernels hold (ncu_report)."""
    context = load_reader().load_report(str(report))
    count = 0
    for r in range(context.num_ranges()):
        profiled = context.range_by_idx(r)
        count += sum(len(profiled.action_by_idx(a).rule_results_as_dicts()) for a in range(profiled.num_actions()))
    return count


def rules_on_import(ncu: str, report: Path) -> dict[str, float]:
    """A report profiled with the rules off, re-read by ncu with them on: its rule results before and after."""
    again = report.with_name("rules-on-import.ncu-rep")
    start = time.monotonic()
    done = subprocess.run(
        [ncu, "--import", str(report), "--apply-rules", "yes", "--export", str(again), "--force-overwrite"],
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - start
    after = rule_results(again) if done.returncode == 0 and again.is_file() else -1
    return {"seconds": seconds, "rc": done.returncode, "before": rule_results(report), "after": after}


def main() -> int:
    """Run every variant, write DIR/overhead.json and print a table of medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--problem", type=Path, default=ROOT / "tests/fixtures/seed47.py")
    args = parser.parse_args()
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    ncu = shutil.which("ncu")
    assert ncu, "ncu not found"
    cache, env = build_problem(args.problem, args.out)
    results: dict[str, list[dict[str, object]]] = {}
    for name, (collection, extra_env) in variants().items():
        for run in range(args.runs):
            status = args.out / f"{name}-{run}.json"
            report = args.out / f"{name}-{run}.ncu-rep"
            options = NcuOptions(collection_args=collection, export_path=report, nvtx_include=[MEASURED_INCLUDE])
            target = harness_argv(sys.executable, args.problem, None, cache, status, "profile")
            start = time.monotonic()
            done = subprocess.run(
                ncu_command(ncu, options, target),
                env={**env, **extra_env},
                cwd=args.out,
                capture_output=True,
                text=True,
            )
            wall = time.monotonic() - start
            phases = json.loads(status.read_text()).get("phases", {}) if status.exists() else {}
            passes = [int(p) for p in PASSES.findall(done.stdout)]
            sample = {"rc": done.returncode, "wall_s": wall, "passes": passes, "phases": phases}
            results.setdefault(name, []).append(sample)
            print(name, run, json.dumps(sample), flush=True)
            if done.returncode:
                (args.out / f"{name}-{run}.log").write_text(done.stdout + done.stderr)
    imported = rules_on_import(ncu, args.out / f"{RULES_OFF}-0.ncu-rep")
    (args.out / "overhead.json").write_text(json.dumps({"runs": results, "rules_on_import": imported}, indent=1))
    print("| variant | passes | ncu wall | measured call | rest of ncu |")
    print("| --- | --- | --- | --- | --- |")
    for name, samples in results.items():
        wall = statistics.median(s["wall_s"] for s in samples)
        call = statistics.median(s["phases"].get("measured_call", 0.0) for s in samples)
        print(f"| {name} | {samples[0]['passes']} | {wall:.2f} s | {call:.2f} s | {wall - call:.2f} s |")
    print(f"rules applied on import: {json.dumps(imported)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
