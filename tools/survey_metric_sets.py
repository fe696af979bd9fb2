"""Candidate default metric sets on a GPU host: replay passes, wall time and what the report loses.

    python tools/survey_metric_sets.py --out DIR

Profiles one kernel (column_sweep of examples/archetypes/bank_conflicts.cu, built with profsvc's nvcc
flags) once per candidate collection, then reads each report the way the service does and compares it
with the `--set full` report of the same kernel: catalog figures missing or changed, stall reasons,
source hotspots and ncu's rule results. Writes DIR/survey.json and DIR/reports.tgz.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from profsvc.metrics.analysis import analyze_report  # noqa: E402
from profsvc.metrics.catalog import load_catalog  # noqa: E402

KERNEL = ROOT / "examples" / "archetypes" / "bank_conflicts.cu"
COMMON = ["--config-file", "off", "--clock-control", "none", "--cache-control", "all"]
COMMON += ["--kernel-name", "regex:column_sweep", "--launch-count", "1"]
# Sections whose metrics the report reads or whose ncu rules it ranks, cheapest first.
CORE = ["LaunchStats", "Occupancy", "SourceCounters", "InstructionStats", "WarpStateStats"]
RULE_SECTIONS = ["SpeedOfLight", "SchedulerStats"]
MORE = ["MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis", "SpeedOfLight_RooflineChart"]


def catalog_metrics(first_only: bool) -> list[str]:
    """The catalog's metric names (every fallback, as the default set asks, or only each entry's first choice)."""
    catalog = load_catalog()
    if not first_only:
        return catalog.metric_names()
    names = [f.metric[0] for f in catalog.figures if f.metric]
    names += [options[0] for f in catalog.figures for options in f.inputs.values()]
    names += [b.metric[0] for b in catalog.breakdowns]
    return list(dict.fromkeys(names))


def sections(names: list[str]) -> list[str]:
    """--section arguments."""
    return [arg for name in names for arg in ("--section", name)]


def candidates() -> dict[str, list[str]]:
    """Each candidate's collection arguments."""
    every = catalog_metrics(first_only=False)
    first = catalog_metrics(first_only=True)
    regex = "regex:^(" + "|".join(re.escape(n) for n in every) + ")$"
    return {
        "full": ["--set", "full", "--import-source", "yes"],
        "core+first": [*sections(CORE), "--metrics", ",".join(first)],
        "core+every": [*sections(CORE), "--metrics", ",".join(every)],
        "core+regex": [*sections(CORE), "--metrics", regex],
        "core+rules+first": [*sections(CORE + RULE_SECTIONS), "--metrics", ",".join(first), "--import-source", "yes"],
        "core+rules+more+first": [*sections(CORE + RULE_SECTIONS + MORE), "--metrics", ",".join(first)],
        "first-only": ["--metrics", ",".join(first)],
        "source-only": sections(["SourceCounters"]),
    }


def compare(full: Any, other: Any) -> dict[str, Any]:
    """What `other` (one kernel's result) lacks or reports differently from `full`."""
    ours = {n: v.value for n, v in other.figures.items() if v.value is not None}
    theirs = {n: v.value for n, v in full.figures.items() if v.value is not None}
    return {
        "figures_full": len(theirs),
        "figures": len(ours),
        "missing": sorted(set(theirs) - set(ours)),
        "changed": {n: [theirs[n], ours[n]] for n in sorted(set(theirs) & set(ours)) if theirs[n] != ours[n]},
        "stalls": [len(full.stalls), len(other.stalls)],
        "hotspots": [len(full.hotspots), len(other.hotspots)],
        "ncu_rules_missing": sorted({r.rule_id for r in full.ncu_rules} - {r.rule_id for r in other.ncu_rules}),
    }


def main() -> int:
    """Profile every candidate and write the survey."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="survey-"))
    binary = work / "kernel"
    build = ["nvcc", "-O3", "-lineinfo", "-arch=sm_90", "-o", str(binary), str(KERNEL), "-ldl"]
    subprocess.run(build, check=True, capture_output=True)
    survey: dict[str, Any] = {}
    for name, collection in candidates().items():
        report = work / f"{name}.ncu-rep"
        command = ["ncu", *COMMON, *collection, "--export", str(report), "--force-overwrite", str(binary)]
        start = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - start
        passes = re.findall(r"-\s*(\d+)\s*pass", done.stdout)
        survey[name] = {"rc": done.returncode, "wall_s": round(seconds, 2), "passes": passes}
        if done.returncode != 0 or not report.exists():
            survey[name]["error"] = (done.stdout + done.stderr)[-1500:]
        print(name, survey[name]["rc"], survey[name]["wall_s"], passes, flush=True)
    full = analyze_report(work / "full.ncu-rep").kernels[0]
    for name in survey:
        report = work / f"{name}.ncu-rep"
        if name != "full" and report.exists():
            try:
                survey[name]["vs_full"] = compare(full, analyze_report(report).kernels[0])
            except Exception as error:  # a candidate's report the service cannot read is itself a finding
                survey[name]["vs_full"] = f"{type(error).__name__}: {error}"
    (args.out / "survey.json").write_text(json.dumps(survey, indent=1, default=str))
    with tarfile.open(args.out / "reports.tgz", "w:gz") as tar:
        for report in work.glob("*.ncu-rep"):
            tar.add(report, arcname=report.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
