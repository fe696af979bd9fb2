"""Real servers to attack on loopback, and the raw gRPC calls a hostile client makes.

`served` starts `profsvc serve` as its own process, as an operator does: its memory and its log are its own, so
a test can read its peak resident memory and check its log. `ThreadServer` runs the same server code on an
event loop in a background thread, for a configuration the command line does not offer (warm workers with a
raised limit, short connection ages).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from profsvc.config import ServerConfig
from profsvc.server.app import RunningServer, start_server
from tests.conftest import free_port, wait_healthy

# What a hostile client sends: bytes as they are, no serializer of ours in the way.
RAW_CHANNEL_OPTIONS = [("grpc.max_send_message_length", 1 << 30), ("grpc.max_receive_message_length", 1 << 30)]


@dataclass
class Served:
    """A `profsvc serve` process."""

    target: str
    pid: int
    state: Path
    log: Path
    token: str | None

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()

    def peak_memory_bytes(self) -> int:
        """The process's peak resident memory so far (VmHWM)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM in /proc/PID/status")

    def log_text(self) -> str:
        return self.log.read_text()


@contextlib.contextmanager
def served(
    folder: Path, *flags: str | Path, token: str | None = None, token_file: Path | None = None, warm: bool = False
) -> Iterator[Served]:
    """`profsvc serve` on a free loopback port, with `flags`, without warm workers unless `warm`; stopped
    (SIGTERM) after."""
    state, log = folder / "state", folder / "server.log"
    if token is not None and token_file is None:
        token_file = folder / "token"
        token_file.write_text(token + "\n")
    command = [sys.executable, "-m", "profsvc_client.cli", "serve", "--port", str(free_port())]
    command += ["--state-dir", str(state), *([] if warm else ["--no-warm-workers"]), *map(str, flags)]
    if token_file is not None:
        command += ["--token-file", str(token_file)]
    with log.open("ab") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
    server = Served(f"127.0.0.1:{command[command.index('--port') + 1]}", process.pid, state, log, token)
    try:
        wait_healthy(server.target, metadata=server.metadata)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=60)


class ThreadServer:
    """The server exactly as `config` says (warm workers included), on a loopback port in a background thread."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config.model_copy(update={"host": "127.0.0.1", "port": 0})
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="security-server", daemon=True)
        self._running: RunningServer | None = None

    def __enter__(self) -> str:
        self._thread.start()
        self._running = asyncio.run_coroutine_threadsafe(start_server(self.config), self._loop).result()
        return f"127.0.0.1:{self._running.port}"

    def __exit__(self, *exc: object) -> None:
        if self._running is not None:
            asyncio.run_coroutine_threadsafe(self._running.close(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)


def raw_call(
    target: str,
    method: str,
    payload: bytes | list[bytes],
    *,
    metadata: tuple[tuple[str, str], ...] = (),
    streaming: tuple[bool, bool] = (False, False),
    timeout: float = 120,
) -> grpc.RpcError | list[bytes]:
    """Call `method` with raw bytes (a list for a client stream); the error it ends with, or the raw responses."""
    request_streaming, response_streaming = streaming
    with grpc.insecure_channel(target, options=RAW_CHANNEL_OPTIONS) as channel:
        kind = {
            (False, False): channel.unary_unary,
            (False, True): channel.unary_stream,
            (True, False): channel.stream_unary,
            (True, True): channel.stream_stream,
        }[streaming]
        call = kind(method)
        request = iter(payload) if request_streaming else payload
        try:
            answer = call(request, metadata=metadata, timeout=timeout)
            return list(answer) if response_streaming else [answer]
        except grpc.RpcError as error:
            return error
