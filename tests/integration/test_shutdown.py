"""Stopping `profsvc serve`: SIGTERM and SIGINT drain the requests in flight, a second signal cuts the grace."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from profsvc_client.client import ProfilerClient
from profsvc_contract import errors
from profsvc_contract.models import KernelSource, SourceFile
from tests.conftest import free_port, wait_healthy, wait_until

pytest.importorskip("torch", reason="the compile job imports the problem with PyTorch (the CPU build will do)")

# A problem whose import holds its compile in flight: it says it runs (`job-started`, in its cell: the jail lets
# it write nowhere else), then waits until the test releases it (`job-release` beside it), so the signal always
# comes while the request is in its worker.
SLOW_PROBLEM = """import os
import time
import torch
import torch.nn as nn

open("job-started", "w").close()
while not os.path.exists("job-release"):
    time.sleep(0.05)


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
        argv = [*argv, "--state-dir", str(state), *options]
        if ignore_sigint:
            # A server started in the background of a non-interactive shell inherits an ignored SIGINT (exec keeps
            # it ignored). A shell does it here, not preexec_fn: a fork of this threaded process may deadlock in
            # preexec_fn before the exec, and the server would never start.
            argv = ["sh", "-c", 'trap "" INT; exec "$0" "$@"', *argv]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        wait_healthy(self.target, timeout=60)

    def compile_in_background(self) -> dict[str, object]:
        """Start a compile that stays in its worker until `release()`; the dict gets its result or error."""
        answer: dict[str, object] = {}
        source = KernelSource(main=SourceFile(name="slow.py", content=SLOW_PROBLEM.encode()))

        def call() -> None:
            with ProfilerClient(self.target, timeout=120) as client:
                try:
                    answer["result"] = client.compile(source)
                except Exception as error:
                    answer["error"] = error

        answer["thread"] = thread = threading.Thread(target=call)
        thread.start()
        wait_until(self._started, "the compile runs in its worker")
        return answer

    def _started(self) -> list[Path]:
        return list(self.state.glob("*/*/job-started"))

    def release(self) -> None:
        """Let the compile in flight finish."""
        for started in self._started():
            (started.parent / "job-release").touch()

    def wait_log(self, line: str) -> None:
        """Wait until the server's log holds `line` (it handled a signal)."""
        wait_until(lambda: line in self.log.read_text(), f"{line!r} in the server's log")

    def exit_code(self, within: float) -> int:
        return self.process.wait(timeout=within)


def _refused(target: str) -> bool:
    """Whether a new call is refused (UNAVAILABLE); False while the server still answers."""
    with ProfilerClient(target, timeout=10) as client:
        try:
            client.capabilities()
        except errors.ServerUnavailable:
            return True
        except errors.InternalError as error:
            # A call that reaches the server as it starts to stop is cancelled by the stop (gRPC CANCELLED, which
            # the client has no narrower error for): neither served nor refused yet.
            if "CANCELLED" not in str(error):
                raise
    return False


def standby_dirs(state: Path) -> list[str]:
    return sorted(p.name for p in (state / "standby").iterdir()) if (state / "standby").is_dir() else []


def test_sigterm_lets_the_request_in_flight_finish_and_stops_the_warm_workers(tmp_path):
    served = Served(tmp_path)
    answer = served.compile_in_background()
    served.process.send_signal(signal.SIGTERM)
    served.wait_log("SIGTERM: finishing the requests in flight")
    served.release()
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
    answer = served.compile_in_background()
    served.process.send_signal(signal.SIGTERM)
    served.wait_log("SIGTERM: finishing the requests in flight")
    # The server refuses new calls from when it stops accepting them, just after it logs the signal.
    wait_until(lambda: _refused(served.target), "a new call refused")
    assert answer["thread"].is_alive(), "the compile in flight is still running (it waits for its release)"
    served.release()
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
    answer = served.compile_in_background()  # never released: only the second signal ends it before the grace
    served.process.send_signal(signal.SIGTERM)
    served.wait_log("SIGTERM: finishing the requests in flight")
    served.process.send_signal(signal.SIGTERM)
    # Well inside the 120 s grace the unreleased compile would otherwise get.
    assert served.exit_code(within=60) == 0
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
