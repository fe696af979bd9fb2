"""Does priming a warm ncu worker move the seed's PC samples? Profiles the seed through `profsvc serve` with
and without `--no-ncu-warmup`, in alternating blocks, and prints each run's hottest lines.

    python tools/hotspot_ab.py --out DIR [--runs 3] [--blocks 2]

Each row: mode, whether ncu was given the warm-up range (the worker was primed), wall seconds, the stall
samples and the three hottest lines of seed47.py with their share. DIR/hotspots.json holds every row.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_fastpath import SEED, Server  # noqa: E402

from profsvc.metrics.nvtx import PROFILER_WARMUP_RANGE  # noqa: E402
from profsvc_client.client import ProfilerClient, load_source  # noqa: E402

MODES = {"primed": (), "unprimed": ("--no-ncu-warmup",)}


def profile_runs(server: Server, mode: str, runs: int) -> list[dict[str, Any]]:
    """`runs` warm profiles of the seed through `server`, one row each."""
    rows = []
    with ProfilerClient(server.target, timeout=120) as client:
        for _ in range(runs):
            server.wait_ready(("ncu",), timeout=60)
            time.sleep(1.0)  # past the pool's idle grace, so a primed worker is primed before the job
            start = time.monotonic()
            result = client.profile(load_source(SEED))
            seconds = time.monotonic() - start
            row: dict[str, Any] = {"mode": mode, "ok": result.ok, "seconds": round(seconds, 2)}
            row["primed"] = PROFILER_WARMUP_RANGE in result.ncu.command
            if result.ok and result.kernels:
                kernel = result.kernels[0]
                row["hotspot_samples"] = sum(h.samples for h in kernel.hotspots)
                row["hot"] = [[h.line, h.samples, h.sample_share_pct, h.top_stall] for h in kernel.hotspots[:3]]
                row["hints"] = [h.rule_id for h in kernel.hints[:2]]
            else:
                row["error"] = str(result.error)
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def main() -> int:
    """Alternate blocks of primed and unprimed profiles; print and save every row."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3, help="profiles per block")
    parser.add_argument("--blocks", type=int, default=2, help="blocks per mode")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hotspot-ab-"))
    rows: list[dict[str, Any]] = []
    for block in range(args.blocks):
        for mode, options in MODES.items():
            # One state directory for every server: the extension is built once.
            server = Server(work, "state", warm=True, options=options)
            try:
                server.wait_ready(("ncu",))
                rows += profile_runs(server, mode, args.runs)
            finally:
                server.stop()
            (work / "state.log").rename(args.out / f"server-{mode}-{block}.log")
    (args.out / "hotspots.json").write_text(json.dumps(rows, indent=1))
    for mode in MODES:
        lines = [r["hot"][0][0] for r in rows if r["mode"] == mode and r.get("hot")]
        print(f"{mode}: hottest line per run {lines}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
