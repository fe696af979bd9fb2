"""The server's end of a worker's control channel (profsvc.scheduler.control): what a job may send on it."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

from profsvc.scheduler.control import MAX_BRACKETS, ServerChannel


def _ask(lines: list[bytes]) -> list[dict[str, Any]]:
    """Each raw line sent on a channel whose `echo` request answers with what it got; the replies."""

    async def echo(message: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "size": len(json.dumps(message))}

    async def body() -> list[dict[str, Any]]:
        channel = ServerChannel({"echo": echo})
        worker = socket.socket(fileno=socket.dup(channel.child_fd))
        channel.handed_over()
        replies = []
        reader, writer = await asyncio.open_unix_connection(sock=worker, limit=1 << 20)
        for line in lines:
            writer.write(line + b"\n")
            await writer.drain()
            replies.append(json.loads(await reader.readline()))
        writer.close()
        channel.close()
        return replies

    return asyncio.run(body())


def test_a_line_of_more_lists_than_the_limit_is_refused_unparsed_and_the_channel_answers_on():
    flood = b'{"op": "echo", "x": [' + b"[]," * MAX_BRACKETS + b"[]]}"
    deep = b'{"op": "echo", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    refused, too_deep, answered = _ask([flood, deep, b'{"op": "echo"}'])
    assert not refused["ok"] and "lists and objects" in refused["error"]
    assert not too_deep["ok"] and "not JSON" in too_deep["error"]
    assert answered == {"ok": True, "size": len('{"op": "echo"}')}


def test_a_build_sized_request_of_sources_is_answered():
    sources = "__global__ void k(float* x) { x[threadIdx.x] = 0; }\n" * 320_000  # 16 MiB of code
    (answered,) = _ask([json.dumps({"op": "echo", "cuda_sources": sources}).encode()])
    assert answered["ok"] and answered["size"] > 16 << 20
