"""Stopping `profsvc serve`: SIGTERM and SIGINT drain the requests in flight, a second signal cuts the grace."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from profsvc_client import errors
from profsvc_client.client import ProfilerClient
from profsvc_client.models import KernelSource, SourceFile
from tests.conftest import free_port, wait_healthy

pytest.importorskip("torch", reason="the compile job imports the problem with PyTorch (the CPU build will do)")

# A problem whose import takes a while: its compile is the request in flight when the signal comes.
SLOW_PROBLEM = """import time
import torch
import torch.nn as nn
time.sleep({seconds})


class Model(nn.Module):
    def forward(self, x):
        return x * 2


ModelNew = Model


def get_inputs():
    return [torch.randn(16)]


def get_init_inputs():
    return []
"""


class Served:
    """`profsvc serve` as a user starts it, its log in a file."""

    def __init__(self, state: Path, *options: str, ignore_sigint: bool = False) -> None:
        self.state = state
        self.log = state / "server.log"
        self.target = f"127.0.0.1:{free_port()}"
        argv = [sys.executable, "-m", "profsvc_client.cli", "serve", "--port", self.target.rsplit(":", 1)[1]]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [*argv, "--state-dir", str(state), *options],
                stdout=log,
                stderr=subprocess.STDOUT,
                # A server started in the background of a non-interactive shell inherits an ignored SIGINT.
                preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_sigint else None,
            )
        wait_healthy(self.target, timeout=60)

    def compile_in_background(self, seconds: float) -> dict[str, object]:
        """Start a compile whose import sleeps `seconds`; the dict gets its result or error."""
        answer: dict[str, object] = {}
        source = KernelSource(main=SourceFile(name="slow.py", content=SLOW_PROBLEM.format(seconds=seconds).encode()))

        def call() -> None:
            with ProfilerClient(self.target, timeout=120) as client:
                try:
                    answer["result"] = client.compile(source)
                except Exception as error:
                    answer["error"] = error

        answer["thread"] = thread = threading.Thread(target=call)
        thread.start()
        time.sleep(2.5)  # the request is in its worker
        return answer

    def exit_code(self, within: float) -> int:
        return self.process.wait(timeout=within)


def standby_dirs(state: Path) -> list[str]:
    return sorted(p.name for p in (state / "standby").iterdir()) if (state / "standby").is_dir() else []


def test_sigterm_lets_the_request_in_flight_finish_and_stops_the_warm_workers(tmp_path):
    served = Served(tmp_path)
    answer = served.compile_in_background(seconds=5)
    served.process.send_signal(signal.SIGTERM)
    answer["thread"].join(timeout=60)
    assert "error" not in answer, answer.get("error")
    assert answer["result"].ok, answer["result"].diagnostics
    assert served.exit_code(within=30) == 0
    log = served.log.read_text()
    assert "SIGTERM: finishing the requests in flight (up to 30 s)" in log and "profsvc stopped" in log
    assert "Traceback" not in log
    assert standby_dirs(tmp_path) == []


def test_new_requests_are_refused_while_draining(tmp_path):
    served = Served(tmp_path)
    answer = served.compile_in_background(seconds=6)
    served.process.send_signal(signal.SIGTERM)
    time.sleep(1)
    with ProfilerClient(served.target, timeout=10) as client, pytest.raises(errors.ServerUnavailable):
        client.capabilities()
    answer["thread"].join(timeout=60)
    assert answer["result"].ok
    assert served.exit_code(within=30) == 0


def test_sigint_stops_a_server_that_started_with_sigint_ignored(tmp_path):
    served = Served(tmp_path, ignore_sigint=True)
    served.process.send_signal(signal.SIGINT)
    assert served.exit_code(within=30) == 0
    assert "SIGINT: finishing the requests in flight" in served.log.read_text()
    assert standby_dirs(tmp_path) == []


def test_a_second_signal_cuts_the_grace_short(tmp_path):
    served = Served(tmp_path, "--shutdown-grace", "120")
    answer = served.compile_in_background(seconds=60)
    start = time.monotonic()
    served.process.send_signal(signal.SIGTERM)
    time.sleep(1)
    served.process.send_signal(signal.SIGTERM)
    assert served.exit_code(within=30) == 0
    assert time.monotonic() - start < 30
    answer["thread"].join(timeout=30)
    assert "second signal: cancelling the requests in flight" in served.log.read_text()
    assert "result" not in answer  # cancelled: the client has an error, not a result
    assert standby_dirs(tmp_path) == []


def test_a_killed_servers_worker_directories_are_removed_at_the_next_start(tmp_path):
    stale = tmp_path / "standby" / "compile-999999999-1"
    stale.mkdir(parents=True)
    served = Served(tmp_path)
    assert not stale.exists()
    served.process.send_signal(signal.SIGTERM)
    assert served.exit_code(within=30) == 0
