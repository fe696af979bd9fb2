"""The server's end of a worker's control channel (see profsvc.worker.control).

Each jailed worker gets one end of a Unix socket pair at start; the server
serves requests on the other end for the worker's whole life: `build` for its
load_inline calls, `gpu_turn` before a warm worker's CUDA start
(scheduler.gpu_turns), and what the job attaches while it runs (the judge and the
candidate of a correctness check talk through it). A request the server does
not know, or a malformed line, is answered with an error, never trusted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import sys
import time
from asyncio.subprocess import DEVNULL, PIPE
from collections.abc import Awaitable, Callable
from typing import Any

from profsvc.worker.control import CONTROL_FD, MESSAGE_LIMIT

log = logging.getLogger("profsvc.control")

# JSON's cost is in its values (16 MiB of `[],` or of `"k":0,` take about 2 s to parse, one string of that size
# about 0.03 s), and Python's parser holds the interpreter while it runs. A line longer than this is first parsed
# by a process of its own, which counts its values; the server parses it only where they are few. A build
# request's sources and files are a few thousand values.
COUNT_ABOVE_BYTES = 1 << 20
MAX_VALUES = 200_000
# A line whose parse took longer than this is answered only after as long again: one job's channel cannot keep
# the event loop busy more than half the time.
PARSE_PAUSE_S = 0.01
# Run as `python -I -S -c COUNT`, the line on stdin: prints how many values it holds; fails where it is not JSON.
COUNT = """
import json, sys
stack, count = [json.loads(sys.stdin.buffer.read())], 0
while stack:
    item = stack.pop()
    count += 1
    if isinstance(item, dict):
        count += len(item)
        stack.extend(item.values())
    elif isinstance(item, list):
        stack.extend(item)
print(count)
"""


async def count_values(line: bytes) -> int | None:
    """How many values (keys included) the JSON line holds, counted in a process of its own; None where it is
    not JSON (or nests too deep for the parser)."""
    counter = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", "-c", COUNT, stdin=PIPE, stdout=PIPE, stderr=DEVNULL
    )
    try:
        out, _ = await counter.communicate(line)
    finally:
        with contextlib.suppress(ProcessLookupError):
            counter.kill()
    return int(out) if counter.returncode == 0 and out.strip().isdigit() else None


Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class ServerChannel:
    """One worker's channel, seen from the server: a socket pair's far end to hand over, handlers to answer."""

    def __init__(self, handlers: dict[str, Handler] | None = None) -> None:
        self._ours, self._theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.handlers: dict[str, Handler] = dict(handlers or {})
        self._task: asyncio.Task[None] | None = None

    @property
    def child_fd(self) -> int:
        """The descriptor the worker inherits (close it here once the worker started: see handed_over)."""
        return self._theirs.fileno()

    def environment(self) -> dict[str, str]:
        """The variable that tells the worker its descriptor."""
        return {CONTROL_FD: str(self.child_fd)}

    def handed_over(self) -> None:
        """The worker has its copy: close ours of its end and start answering."""
        self._theirs.close()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._serve())

    def attach(self, op: str, handler: Handler) -> None:
        """Answer `op` with `handler` from now on (a job's own requests)."""
        self.handlers[op] = handler

    async def _serve(self) -> None:
        reader, writer = await asyncio.open_unix_connection(sock=self._ours, limit=MESSAGE_LIMIT)
        try:
            while line := await reader.readline():
                reply = await self._answer(line)
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass  # the worker went away or sent more than a line may hold: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, line: bytes) -> dict[str, Any]:
        if len(line) > COUNT_ABOVE_BYTES:
            values = await count_values(line)
            if values is None:
                return {"ok": False, "error": "the request is not JSON"}
            if values > MAX_VALUES:
                return {"ok": False, "error": f"the request holds over {MAX_VALUES} values"}
        start = time.monotonic()
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return {"ok": False, "error": "the request is not JSON"}
        finally:
            parsed = time.monotonic() - start
            if parsed > PARSE_PAUSE_S:
                await asyncio.sleep(parsed)
        if not isinstance(message, dict) or not isinstance(message.get("op"), str):
            return {"ok": False, "error": "the request names no op"}
        handler = self.handlers.get(message["op"])
        if handler is None:
            return {"ok": False, "error": f"unknown request {message['op']!r}"}
        try:
            return await handler(message)
        except Exception as error:  # a handler's failure is the request's answer, not the server's crash
            log.exception("control request %s failed", message["op"])
            return {"ok": False, "error": f"the server could not answer: {type(error).__name__}"}

    def close(self) -> None:
        """Stop answering and close both ends."""
        if self._task is not None:
            self._task.cancel()
        for end in (self._ours, self._theirs):
            with contextlib.suppress(OSError):
                end.close()
