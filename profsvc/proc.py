"""Run a child process in its own process group, with a time limit and bounded output.

Every process profsvc starts (nvcc, ncu, worker interpreters) goes through
`run_process`, so a timeout or a cancelled request always kills the whole
process group: nothing a job started outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Keep at most this much of a child's stdout/stderr (the tail matters most).
OUTPUT_LIMIT = 256 * 1024


@dataclass(frozen=True)
class ProcessResult:
    """How a child process ended."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool

    @property
    def ok(self) -> bool:
        """True when the process exited with status 0 in time."""
        return self.returncode == 0 and not self.timed_out


def _tail(data: bytes) -> str:
    return data[-OUTPUT_LIMIT:].decode("utf-8", errors="replace")


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _pump(stream: asyncio.StreamReader, sink: bytearray, on_chunk: Callable[[str], None] | None) -> None:
    while chunk := await stream.read(4096):
        sink.extend(chunk)
        if len(sink) > 2 * OUTPUT_LIMIT:
            del sink[: len(sink) - OUTPUT_LIMIT]
        if on_chunk is not None:
            on_chunk(chunk.decode("utf-8", errors="replace"))


async def run_process(
    argv: Sequence[str],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    on_stdout: Callable[[str], None] | None = None,
    stdin_data: bytes | None = None,
) -> ProcessResult:
    """Run argv to completion (or kill its process group at `timeout` or on cancellation)."""
    start = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=str(cwd) if cwd else None,
        env=dict(env) if env is not None else None,
        stdin=asyncio.subprocess.PIPE if stdin_data is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    out, err = bytearray(), bytearray()
    assert process.stdout is not None and process.stderr is not None
    pumps = asyncio.gather(_pump(process.stdout, out, on_stdout), _pump(process.stderr, err, None))
    timed_out = False
    try:
        if stdin_data is not None and process.stdin is not None:
            process.stdin.write(stdin_data)
            await process.stdin.drain()
            process.stdin.close()
        try:
            await asyncio.wait_for(asyncio.shield(pumps), timeout)
            await process.wait()
        except TimeoutError:
            timed_out = True
    finally:
        # Always, also on cancellation: whatever the child left in its group goes too.
        _kill_group(process.pid)
        await process.wait()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(pumps, 5)
    return ProcessResult(
        argv=tuple(argv),
        returncode=process.returncode if process.returncode is not None else -9,
        stdout=_tail(bytes(out)),
        stderr=_tail(bytes(err)),
        seconds=time.monotonic() - start,
        timed_out=timed_out,
    )
