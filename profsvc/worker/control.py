"""The worker's end of its control channel to the server: requests answered by the server, outside the jail.

A jailed worker cannot build into the shared cache or see other jobs; what it
needs from outside (a build of a load_inline call, the next step of a
correctness check driven by the judge, a warm worker's turn to start CUDA) it
asks for here: one JSON line out, one JSON line back, in turn. The channel is a Unix socket the server handed over at
start (its descriptor in PROFSVC_CONTROL_FD).
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

CONTROL_FD = "PROFSVC_CONTROL_FD"
# Largest message either side accepts: a build request carries the user's sources and up to 16 MiB of the files
# they include (profsvc.build.request).
MESSAGE_LIMIT = 24 << 20
# A warm worker's request before its CUDA start: answered once no profile runs on its GPU
# (profsvc.scheduler.gpu_turns).
GPU_TURN = "gpu_turn"


class ChannelClosed(ConnectionError):
    """The server closed the channel (the job is over)."""


class ControlChannel:
    """Blocking request/reply over the inherited socket."""

    def __init__(self, fd: int) -> None:
        self._socket = socket.socket(fileno=fd)
        self._socket.setblocking(True)
        self._pending = b""

    @classmethod
    def from_environment(cls) -> ControlChannel | None:
        """The channel the server handed this process, None when run without one."""
        fd = os.environ.get(CONTROL_FD, "")
        return cls(int(fd)) if fd.isdigit() else None

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request and wait for its reply."""
        self._socket.sendall(json.dumps({"op": op, **fields}).encode() + b"\n")
        while b"\n" not in self._pending:
            chunk = self._socket.recv(1 << 20)
            if not chunk:
                raise ChannelClosed("the server closed the control channel")
            self._pending += chunk
            if len(self._pending) > MESSAGE_LIMIT:
                raise ChannelClosed("the server's reply is too large")
        line, self._pending = self._pending.split(b"\n", 1)
        reply = json.loads(line)
        if not isinstance(reply, dict):
            raise ChannelClosed("the server's reply is not an object")
        return reply

    def detach(self) -> None:
        """Let go of the socket without closing it: the job's own channel object uses the descriptor after."""
        self._socket.detach()
