"""Where a warm profile's time goes under an agent's call patterns, on a GPU host: the measured call beside others.

Starts `profsvc serve` (warm workers, as deployed; `--no-ncu-warmup` passes that option on) and profiles the seed
through the Python client, `--rounds` times per pattern, on that one server:

- `profile_only`: profiles back to back; a replacement warm ncu worker starts beside each;
- `alternate`: an evaluate (no profile) before each profile, back to back, as an agent checks then profiles;
  the evaluate's warm workers are replaced beside the profile too;
- `settled`: as `alternate`, but the profile waits until every warm worker is up (ready, or loaded where it primes)
  and then one more second: nothing starts beside it.

For each profile: the client's wall time and the server's timings (the measured call, the exit, ncu's run). The
measured call of a worker that did not prime pays ncu's first profiled kernel in its process; what `settled` saves
against `alternate` is what the warm workers starting beside it cost.

    python tools/measured_call.py --out DIR [--rounds 5] [--pattern NAME ...] [--no-ncu-warmup]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "client"), str(ROOT / "benchmarks")]

from bench_fastpath import Server  # noqa: E402

from profsvc_client.client import ProfilerClient, load_source  # noqa: E402

SEED = ROOT / "tests" / "fixtures" / "seed47.py"
PATTERNS = ("profile_only", "alternate", "settled")
TIMINGS = ("total", "profile:measured_call", "profile:exit", "ncu:run", "profile:load", "ncu:wait", "gpu_wait")
# How long `settled` waits at most for the warm workers (a discarded worker's folder may linger past it).
SETTLE_LIMIT_S = 10.0


def settle(server: Server) -> float:
    """Wait until every warm worker of the server is up, then a second more; the seconds waited."""
    start = time.monotonic()
    time.sleep(1.0)
    deadline = time.monotonic() + SETTLE_LIMIT_S
    while time.monotonic() < deadline:
        folders = [d for d in (server.state / "standby").iterdir() if d.is_dir()]
        if folders and all((d / "ready").is_file() or (d / "loaded").is_file() for d in folders):
            break
        time.sleep(0.2)
    time.sleep(1.0)
    return time.monotonic() - start


def run_pattern(server: Server, pattern: str, rounds: int) -> list[dict[str, float]]:
    """`rounds` profiles of the seed in `pattern`: each one's wall time and server timings (-1: not given)."""
    source = load_source(SEED)
    rows = []
    with ProfilerClient(server.target, timeout=300) as client:
        client.compile(source)
        for i in range(rounds):
            if pattern != "profile_only":
                client.evaluate(source, skip_profile=True)
            if pattern == "settled":
                print(f"settled in {settle(server):.1f} s", flush=True)
            start = time.monotonic()
            result = client.profile(source, skip_charts=True)
            row = {"wall": time.monotonic() - start, **{k: result.timings.get(k, -1.0) for k in TIMINGS}}
            rows.append(row)
            print(pattern, i, json.dumps({k: round(v, 3) for k, v in row.items()}), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pattern", action="append", choices=PATTERNS, help="patterns to run (default: all)")
    parser.add_argument("--no-ncu-warmup", action="store_true", help="serve with --no-ncu-warmup (no priming)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    options = ("--no-ncu-warmup",) if args.no_ncu_warmup else ()
    server = Server(args.out, "server", warm=True, options=options)
    results: dict[str, Any] = {}
    try:
        if not server.wait_ready(()):
            sys.exit("the server did not answer (see server.log)")
        with ProfilerClient(server.target, timeout=30) as client:
            if not client.capabilities().profiling_available:
                sys.exit("the server cannot profile here: a GPU host with ncu is needed")
        if not server.wait_ready(("ncu-gpu0", "judge-gpu0", "run-gpu0"), timeout=300):
            sys.exit("the server's warm workers did not come up (see server.log)")
        for pattern in args.pattern or PATTERNS:
            rows = run_pattern(server, pattern, args.rounds)
            medians = {k: round(statistics.median(r[k] for r in rows), 3) for k in rows[0]}
            print("median", pattern, json.dumps(medians), flush=True)
            results[pattern] = {"profiles": rows, "medians": medians}
    finally:
        server.stop()
    (args.out / "measured_call.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
