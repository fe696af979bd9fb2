"""Soak: many mixed requests (good and faulty) from concurrent clients against one `profsvc serve`.

    python benchmarks/soak.py --requests 200 --clients 8 [--cpu-only] [--out FILE]

It starts `profsvc serve` itself, as its own process, so its restarts and
memory can be watched. Reports requests answered, answers by
kind, server restarts, and the server's resident memory after one warm-up
request of each kind and at the end. Needs a GPU for the GPU requests; `--cpu-only` keeps to
requests a machine without one can answer.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from profsvc_client.client import ProfilerClient, load_source  # noqa: E402
from profsvc_contract import errors  # noqa: E402
from tests.faults.problems import FAULTS, GOOD, source  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _requests(cpu_only: bool) -> list[tuple[str, float, Callable[[ProfilerClient], str]]]:
    """(name, weight, call) for each kind of request; a call returns how the server answered."""

    def analyze(client: ProfilerClient) -> str:
        return "ok" if client.analyze(FIXTURES / "seed47_full.ncu-rep").ok else "not_ok"

    def garbage(client: ProfilerClient) -> str:
        client.analyze(b"not a report")
        return "unexpected_ok"

    def lint(client: ProfilerClient) -> str:
        return "ok" if client.static_check(load_source(FIXTURES / "seed47.py")).ok else "findings"

    def capabilities(client: ProfilerClient) -> str:
        return "ok" if client.capabilities().server_version else "empty"

    mix: list[tuple[str, float, Callable[[ProfilerClient], str]]] = [
        ("capabilities", 10, capabilities),
        ("analyze", 10, analyze),
        ("analyze_garbage", 5, garbage),
        ("static_check", 10, lint),
    ]
    if cpu_only:
        return mix

    def good(client: ProfilerClient) -> str:
        result = client.check_correctness(source(*GOOD[:2]), trials=1)
        return "ok" if result.ok else f"good_failed:{result.error.kind or result.message}"

    # GPU jobs run one at a time on the GPU (seconds each): about one request in nine.
    mix.append(("good_correctness", 2, good))
    # The kernel that never ends holds the GPU until the job limit (15 minutes by default): the fault
    # tests cover it with a short limit; the soak keeps to faults that end by themselves.
    for name, model_new, kind in FAULTS:
        if kind == "timeout":
            continue

        def faulty(client: ProfilerClient, name: str = name, model_new: str = model_new) -> str:
            result = client.check_correctness(source(name, model_new), trials=1)
            return result.error.kind or ("ok" if result.ok else "wrong_output")

        mix.append((name, 0.5, faulty))
    return mix


def _start_server() -> tuple[subprocess.Popen[bytes], str]:
    """`profsvc serve` as its own process on a free loopback port; its log goes to the state folder."""
    port = _free_port()
    state = Path(os.environ.get("PROFSVC_STATE_DIR") or tempfile.mkdtemp(prefix="soak-"))
    # A state folder named in the environment need not exist yet: the server makes it, the log is opened first.
    state.mkdir(parents=True, exist_ok=True)
    with (state / "soak-server.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "profsvc_client.cli", "serve", "--port", str(port), "--state-dir", str(state)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    target = f"127.0.0.1:{port}"
    with ProfilerClient(target, timeout=60) as probe:
        for _ in range(300):
            try:
                probe.capabilities()
                break
            except errors.ServerUnavailable:
                time.sleep(0.2)
    return process, target


def _drive(
    plan: list[tuple[str, float, Callable[[ProfilerClient], str]]], target: str, clients: int
) -> tuple[collections.Counter[str], list[str]]:
    """Send the planned requests from `clients` threads; count answers, list requests nobody answered."""
    queue = collections.deque(plan)
    lock = threading.Lock()
    answers: collections.Counter[str] = collections.Counter()
    unanswered: list[str] = []

    def worker() -> None:
        with ProfilerClient(target, timeout=900) as client:
            while True:
                with lock:
                    if not queue:
                        return
                    name, _, call = queue.popleft()
                try:
                    outcome = call(client)
                except errors.ProfsvcError as error:
                    outcome = error.reason.value
                    if isinstance(error, errors.ServerUnavailable):
                        with lock:
                            unanswered.append(name)
                with lock:
                    answers[f"{name}: {outcome}"] += 1

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers, unanswered


def main() -> int:
    """Run the soak and print a JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--cpu-only", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="also write the summary here")
    args = parser.parse_args()
    process, target = _start_server()
    mix = _requests(args.cpu_only)
    # One request of each kind first: imports and caches the server fills once are not growth.
    _drive(list(mix), target, 1)
    rss_before = _rss_bytes(process.pid)
    plan = random.Random(args.seed).choices(mix, weights=[w for _, w, _ in mix], k=args.requests)
    started = time.monotonic()
    answers, unanswered = _drive(plan, target, args.clients)
    alive = process.poll() is None
    summary = {
        "requests": args.requests,
        "clients": args.clients,
        "answered": args.requests - len(unanswered),
        "unanswered": len(unanswered),
        "server_restarts": 0 if alive else 1,
        "server_rss_before_bytes": rss_before,
        "server_rss_after_bytes": _rss_bytes(process.pid) if alive else 0,
        "seconds": round(time.monotonic() - started, 1),
        "answers": dict(sorted(answers.items())),
    }
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text)
    process.terminate()
    process.wait(timeout=30)
    return 0 if not unanswered and alive else 1


if __name__ == "__main__":
    sys.exit(main())
