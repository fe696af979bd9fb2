"""The server's end of a worker's control channel (profsvc.scheduler.control): what a job may send on it."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import pytest

from profsvc.scheduler.control import COUNT_ABOVE_BYTES, MAX_VALUES, ServerChannel, count_values


def _ask(lines: list[bytes]) -> tuple[list[dict[str, Any]], float]:
    """Each raw line sent on a channel whose `echo` request answers with what it got; the replies, and the
    longest the event loop went without running another task meanwhile."""

    async def echo(message: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "size": len(json.dumps(message))}

    async def body() -> tuple[list[dict[str, Any]], float]:
        channel = ServerChannel({"echo": echo})
        worker = socket.socket(fileno=socket.dup(channel.child_fd))
        channel.handed_over()
        longest, done = 0.0, asyncio.Event()

        async def ticks() -> None:
            nonlocal longest
            last = time.monotonic()
            while not done.is_set():
                await asyncio.sleep(0.01)
                longest, last = max(longest, time.monotonic() - last), time.monotonic()

        ticking = asyncio.create_task(ticks())
        replies = []
        reader, writer = await asyncio.open_unix_connection(sock=worker, limit=1 << 20)
        for line in lines:
            writer.write(line + b"\n")
            await writer.drain()
            replies.append(json.loads(await reader.readline()))
        done.set()
        await ticking
        writer.close()
        channel.close()
        return replies, longest

    return asyncio.run(body())


# Lines of the most values a line may carry, each costly to parse: keys, numbers, empty lists.
FLOODS = {
    "keys": b'{"op": "echo", "x": {' + b",".join(b'"k%d":0' % i for i in range(2_000_000)) + b"}}",
    "numbers": b'{"op": "echo", "x": [' + b"0," * 10_000_000 + b"0]}",
    "lists": b'{"op": "echo", "x": [' + b"[]," * 6_000_000 + b"[]]}",
}


@pytest.mark.parametrize("flood", sorted(FLOODS))
def test_a_line_of_millions_of_values_is_refused_and_the_server_runs_on_meanwhile(flood):
    deep = b'{"op": "echo", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    (refused, too_deep, answered), longest = _ask([FLOODS[flood], deep, b'{"op": "echo"}'])
    assert not refused["ok"] and refused["error"] == f"the request holds over {MAX_VALUES} values"
    assert not too_deep["ok"] and "not JSON" in too_deep["error"]
    assert answered == {"ok": True, "size": len('{"op": "echo"}')}
    # Parsing the flood on the event loop would hold it for seconds; counted apart, other tasks run on.
    assert longest < 0.5, longest


def test_a_build_sized_request_of_sources_is_answered():
    sources = "__global__ void k(float* x) { x[threadIdx.x] = 0; }\n" * 320_000  # 16 MiB of code
    (answered,), _ = _ask([json.dumps({"op": "echo", "cuda_sources": sources}).encode()])
    assert answered["ok"] and answered["size"] > 16 << 20


def test_values_are_counted_keys_included_and_garbage_is_none():
    line = json.dumps({"a": [1, 2, {"b": "c"}], "d": None}).encode()
    # Values: the object, a, [..], 1, 2, {..}, b, "c", d, None.
    assert asyncio.run(count_values(line)) == 10
    assert asyncio.run(count_values(b"{not json")) is None
    assert COUNT_ABOVE_BYTES < len(FLOODS["keys"])
