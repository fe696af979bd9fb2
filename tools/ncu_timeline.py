"""ncu's timeline around a profile's measured call, alone and with loads beside it, on a GPU host.

Builds the problem once (the harness's compile mode), then runs the worker harness in profile mode under
profsvc's ncu command, a fresh process each time, and timestamps ncu's output as it arrives: when ncu starts
profiling the measured call's kernel, its first and last pass, and when it says the report is written, each in
seconds from the harness's status write (the measured call's end); whether the report changed after that line.

Variants, each run `--runs` times in turn:

- `default`: profsvc's collection; `rules-off`: the same with ncu's rules not applied;
  `nvtx-early`: NVTX's first range opened when the process starts, not in the measured call;
- with processes running beside the profile (started a second before it, killed after), as warm workers
  starting beside it run: `cpu` 8 busy loops; `import` 4 loops importing torch; `context` 2 loops creating and
  destroying a CUDA context; `warm` 3 loops of a GPU worker's warm-up (torch, a context, cuBLAS, CUPTI);
  `ncu-warm` a loop of a warm ncu worker's warm-up (its process under ncu, nothing profiled);
- where a profile's seconds go, each one change to the collection: `basic` ncu's basic set; `no-source` the
  default set without SourceCounters and the imported source (no PC sampling, no per-instruction source
  counters); `one-pass` only LaunchStats (ncu's fixed cost of a profiled kernel; ncu prints no pass count for
  it); `no-catalog` the default set's sections without the catalog's metrics; `cache-off` `--cache-control none`
  (no flush per pass).

    python tools/ncu_timeline.py --out DIR [--runs 3] [--variant NAME ...] [--problem tests/fixtures/seed47.py]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
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
from profsvc.ncu.command import NcuOptions, ncu_command  # noqa: E402
from profsvc.ncu.metric_sets import default_set  # noqa: E402
from profsvc.worker.warm import WARM_LIBRARIES  # noqa: E402

# The harness as `python -m` runs it, after a range of profsvc's domain (which no include names) opens NVTX.
NVTX_EARLY = """
import sys, nvtx
from profsvc.metrics.nvtx import PROFSVC_DOMAIN
nvtx.push_range("early", domain=PROFSVC_DOMAIN)
nvtx.pop_range(domain=PROFSVC_DOMAIN)
from profsvc.worker import harness
harness.main(sys.argv[1:])
"""
CONTEXT_LOOP = """
import ctypes
cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuInit(0)
device = ctypes.c_int()
cuda.cuDeviceGet(ctypes.byref(device), 0)
while True:
    context = ctypes.c_void_p()
    cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device)
    cuda.cuCtxDestroy_v2(context)
"""
WARM_UP = "from profsvc.worker.harness import warm_gpu; warm_gpu()"
VARIANTS = (
    "default",
    "rules-off",
    "nvtx-early",
    "cpu",
    "import",
    "context",
    "warm",
    "ncu-warm",
    "basic",
    "no-source",
    "one-pass",
    "no-catalog",
    "cache-off",
)
PASSES = re.compile(r"(\d+) passes?")
MARKS = {"profiling": "==PROF== Profiling", "first_pass": "0%", "last_pass": "100%", "report": "==PROF== Report:"}


def beside(variant: str, ncu: str) -> list[list[str]]:
    """The processes a variant runs beside the profile."""
    python = sys.executable

    def loop(command: str) -> list[str]:
        return ["bash", "-c", f"while true; do {command}; done"]

    if variant == "cpu":
        return [[python, "-c", "while True: pass"]] * 8
    if variant == "import":
        return [loop(f"{python} -c 'import torch, torch.utils.cpp_extension'")] * 4
    if variant == "context":
        return [[python, "-c", CONTEXT_LOOP]] * 2
    if variant == "warm":
        return [loop(f"{python} -c '{WARM_UP}'")] * 3
    if variant == "ncu-warm":
        # A warm ncu worker's start: ncu, then torch and a context in its target; the include matches nothing.
        under_ncu = f"{ncu} --config-file off --target-processes all --nvtx --nvtx-include none/"
        return [loop(f"env -u {WARM_LIBRARIES} {under_ncu} {python} -c '{WARM_UP}'")]
    return []


def collection(variant: str) -> tuple[str, ...]:
    """The collection arguments a variant gives ncu."""
    if variant == "basic":
        return ("--set", "basic")
    if variant == "one-pass":
        return ("--section", "LaunchStats")
    args = default_set().collection_args()
    if variant == "rules-off":
        return (*args, "--apply-rules", "no")
    # The default set's arguments are option-value pairs: a variant leaves some out.
    left_out = {
        "no-source": lambda pair: pair == ("--section", "SourceCounters") or pair[0] == "--import-source",
        "no-catalog": lambda pair: pair[0] == "--metrics",
    }.get(variant, lambda _: False)
    pairs = zip(args[::2], args[1::2], strict=True)
    return tuple(a for pair in pairs if not left_out(pair) for a in pair)


def command(ncu: str, variant: str, options: NcuOptions, target: list[str]) -> list[str]:
    """profsvc's ncu command for the variant (`cache-off`: no cache flush before each pass)."""
    argv = ncu_command(ncu, options, target)
    if variant == "cache-off":
        argv[argv.index("--cache-control") + 1] = "none"
    return argv


def marks(chunks: list[tuple[float, str]], written_at: float) -> dict[str, float]:
    """Seconds from the status write to the first output chunk holding each mark (the last one for passes)."""
    found: dict[str, float] = {}
    for at, text in chunks:
        for name, mark in MARKS.items():
            if mark in text and (name not in found or name == "last_pass"):
                found[name] = round(at - written_at, 3)
    return found


def run_once(ncu: str, variant: str, argv: list[str], env: dict[str, str], cwd: Path, report: Path) -> dict[str, Any]:
    """One profile under ncu, its output timestamped as it comes, with the variant's processes beside it."""
    loads = [
        subprocess.Popen(
            command,
            env={**env, "CUDA_VISIBLE_DEVICES": "0", WARM_LIBRARIES: "1"},
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for command in beside(variant, ncu)
    ]
    if loads:
        time.sleep(1.0)
    chunks: list[tuple[float, str]] = []
    digest_at_report = ""
    start = time.monotonic()
    process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    while data := os.read(process.stdout.fileno(), 65536):
        chunks.append((time.monotonic(), data.decode(errors="replace")))
        if MARKS["report"] in chunks[-1][1] and report.is_file():
            digest_at_report = hashlib.sha256(report.read_bytes()).hexdigest()
    returncode = process.wait()
    end = time.monotonic()
    for load in loads:
        os.killpg(load.pid, signal.SIGKILL)
        load.wait()
    return {"rc": returncode, "wall_s": end - start, "end": end, "chunks": chunks, "digest": digest_at_report}


def main() -> int:
    """Run the variants, write DIR/ncu_timeline.json and print a table of medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness_arguments(parser, runs=3)
    parser.add_argument("--variant", action="append", choices=VARIANTS, help="variants to run (default: all)")
    args = parser.parse_args()
    ncu, cache, env = prepared(args)
    results: dict[str, list[dict[str, Any]]] = {}
    for run in range(args.runs):
        for variant in args.variant or VARIANTS:
            stem = f"{variant}-{run}"
            status, report = args.out / f"{stem}.json", args.out / f"{stem}.ncu-rep"
            options = NcuOptions(
                collection_args=collection(variant),
                export_path=report,
                nvtx_include=[MEASURED_INCLUDE],
            )
            target = harness_argv(sys.executable, args.problem, None, cache, status, "profile")
            if variant == "nvtx-early":
                target = [sys.executable, "-c", NVTX_EARLY, *target[3:]]
            ran = run_once(ncu, variant, command(ncu, variant, options, target), env, args.out, report)
            written = json.loads(status.read_text()) if status.exists() else {}
            written_at = written.get("written_at", float("nan"))
            final = hashlib.sha256(report.read_bytes()).hexdigest() if report.is_file() else ""
            sample = {
                "rc": ran["rc"],
                "wall_s": round(ran["wall_s"], 3),
                "measured_call_s": round(written.get("phases", {}).get("measured_call", float("nan")), 3),
                # None where ncu printed no count (a collection of one pass).
                "passes": int(found[-1]) if (found := PASSES.findall("".join(c for _, c in ran["chunks"]))) else None,
                "marks_from_status_s": marks(ran["chunks"], written_at),
                "end_from_status_s": round(ran["end"] - written_at, 3),
                "report_final_at_its_line": bool(final) and final == ran["digest"],
            }
            results.setdefault(variant, []).append(sample)
            print(stem, json.dumps(sample), flush=True)
            # Written after every run: a run cut short keeps what it measured.
            (args.out / "ncu_timeline.json").write_text(json.dumps(results, indent=1))
    header = ("variant", "passes", "measured call", "ncu takes the kernel", "first pass", "last pass", "report line")
    print("| " + " | ".join(header) + " | ncu ends |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for variant, samples in results.items():

        def median(key: str, samples: list[dict[str, Any]] = samples) -> str:
            values = [s["marks_from_status_s"][key] for s in samples if key in s["marks_from_status_s"]]
            return f"{statistics.median(values):+.3f} s" if values else "-"

        call = statistics.median(s["measured_call_s"] for s in samples)
        end = statistics.median(s["end_from_status_s"] for s in samples)
        cells = " | ".join(median(k) for k in MARKS)
        counts = [s["passes"] for s in samples if s["passes"] is not None]
        passes = f"{statistics.median(counts):g}" if counts else "-"
        print(f"| {variant} | {passes} | {call:.3f} s | {cells} | {end:+.3f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
