"""Run a child process in its own process group, with a time limit and bounded output.

Every process profsvc starts (nvcc, ncu, worker interpreters) is a
`StartedProcess` (`run_process` starts and finishes one), so a timeout or a
cancelled request always kills the whole process group: nothing a job started
outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

# Keep at most this much of a child's stdout/stderr (the tail matters most).
OUTPUT_LIMIT = 256 * 1024
# How a line the server adds to a process's stderr begins: why it ended the process (the job's result says so).
SERVER_NOTE = "profsvc: "
# How often a finishing process is checked for its exit.
_EXIT_POLL_S = 0.005


class ProcessTree(Protocol):
    """What holds every process a child starts, wherever it moves (a jail's cgroup)."""

    def kill(self) -> None:
        """Kill every process in it."""

    def remove(self) -> None:
        """Release it once its processes are gone."""

    def pids(self) -> list[int]:
        """The processes in it now."""

    def why_killed(self) -> str:
        """A line saying why the host killed a process of it ('' where it did not)."""


@dataclass(frozen=True)
class Launch:
    """How to start one command: its argv, the descriptors handed to it, the tree that holds it (if any).

    `owned_fds` (among `pass_fds`) belong to the launch: closed here once the child has its copies.
    """

    argv: tuple[str, ...]
    pass_fds: tuple[int, ...] = ()
    tree: ProcessTree | None = None
    owned_fds: tuple[int, ...] = ()

    def close(self) -> None:
        """Close the descriptors that only the child needs."""
        for fd in self.owned_fds:
            with contextlib.suppress(OSError):
                os.close(fd)


@dataclass(frozen=True)
class ProcessResult:
    """How a child process ended."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    # The host's monotonic clock when its exit was seen (0: not seen, as when it was killed at its time limit): the
    # same clock in every process here.
    ended: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the process exited with status 0 in time."""
        return self.returncode == 0 and not self.timed_out

    @property
    def output(self) -> str:
        """What it printed: its stdout, then its stderr (where a traceback goes, so it comes last). Both, always:
        a library's warning on stderr must not hide the line a dying process printed on stdout."""
        return "\n".join(text.rstrip("\n") for text in (self.stdout, self.stderr) if text.strip())

    def noted(self, note: str) -> ProcessResult:
        """This result with the server's note (a SERVER_NOTE line) as its stderr's last line, where server_note
        finds it; unchanged where the note is empty."""
        return replace(self, stderr=f"{self.stderr}\n{note}") if note else self


def server_note(output: str) -> str:
    """The server's note on why a process ended, where its output ends with one ('' where not)."""
    lines = output.strip().splitlines()
    return lines[-1].removeprefix(SERVER_NOTE) if lines and lines[-1].startswith(SERVER_NOTE) else ""


def _tail(data: bytes) -> str:
    return data[-OUTPUT_LIMIT:].decode("utf-8", errors="replace")


def _processes() -> list[tuple[int, int, int]]:
    """(pid, parent pid, session) of every process (Linux /proc; none where it cannot be read)."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                # Fields after the command name: state, ppid, pgrp, session.
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
                found.append((int(entry.name), int(fields[1]), int(fields[3])))
    return found


def _doomed(pid: int) -> list[int]:
    """The processes the child's end takes with it: its session's, and every process below it. A job's supervisor
    (profsvc/worker/supervise.py) keeps what the job's code started below it, a daemon in a session of its own too;
    listed before the kill, since once the supervisor is gone they move up to init."""
    processes = _processes()
    doomed = {member for member, _, session in processes if session == pid}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        children = [member for member, ppid, _ in processes if ppid == parent and member not in doomed]
        doomed.update(children)
        frontier += children
    doomed.discard(pid)
    return sorted(doomed)


def _kill_group(pid: int) -> None:
    """Kill the child's process group, and whatever of its session or below it is elsewhere (a profiler's target
    process may move to a group of its own; a job's daemon to a session of its own)."""
    doomed = _doomed(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for member in doomed:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member, signal.SIGKILL)


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
    launch: Launch | None = None,
) -> ProcessResult:
    """Run argv (or a prepared launch) to completion (or kill its process group at `timeout` or on cancellation)."""
    started = await StartedProcess.start(
        argv, cwd=cwd, env=env, stdin_data=stdin_data, on_stdout=on_stdout, launch=launch
    )
    return await started.finish(timeout)


class StartedProcess:
    """A child started in its own process group whose output is collected from the start.

    `run_process` starts one and finishes it at once; a warm worker is started ahead
    of its job, handed the job later, then finished the same way (time limit, group
    kill, bounded output).
    """

    def __init__(
        self, process: asyncio.subprocess.Process, argv: Sequence[str], tree: ProcessTree | None = None
    ) -> None:
        self.process = process
        self.argv = tuple(argv)
        self.tree = tree
        self.on_stdout: Callable[[str], None] | None = None
        self._out, self._err = bytearray(), bytearray()
        # Set once finish() has killed what was left: the pid may belong to another process by then.
        self._finished = False
        assert process.stdout is not None and process.stderr is not None
        self._pumps = asyncio.gather(
            _pump(process.stdout, self._out, self._forward), _pump(process.stderr, self._err, None)
        )
        # A pump cancelled at shutdown is not an error worth a log line.
        self._pumps.add_done_callback(lambda done: done.cancelled() or done.exception())

    def _forward(self, chunk: str) -> None:
        if self.on_stdout is not None:
            self.on_stdout(chunk)

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        stdin_data: bytes | None = None,
        on_stdout: Callable[[str], None] | None = None,
        launch: Launch | None = None,
    ) -> StartedProcess:
        """Start argv with its output collected; stdin gets `stdin_data` then closes (closed at once without).

        With `launch` (a jailed command), its argv, descriptors and process tree are used instead of argv's.
        """
        launch = launch or Launch(argv=tuple(argv))
        try:
            process = await cls._exec(launch.argv, cwd, env, stdin_data, launch.pass_fds)
        except BaseException:
            if launch.tree is not None:
                launch.tree.remove()
            raise
        finally:
            launch.close()
        started = cls(process, launch.argv, launch.tree)
        started.on_stdout = on_stdout
        if stdin_data is not None and process.stdin is not None:
            try:
                process.stdin.write(stdin_data)
                await process.stdin.drain()
                process.stdin.close()
            except BaseException:
                await started.finish(0)
                raise
        return started

    @staticmethod
    async def _exec(
        argv: Sequence[str],
        cwd: str | Path | None,
        env: Mapping[str, str] | None,
        stdin_data: bytes | None,
        pass_fds: Sequence[int],
    ) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd) if cwd else None,
            env=dict(env) if env is not None else None,
            stdin=asyncio.subprocess.PIPE if stdin_data is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )

    @property
    def running(self) -> bool:
        """True while the process has not exited."""
        return self.process.returncode is None

    def kill(self) -> None:
        """Kill the whole process group and tree (nothing once finished)."""
        if not self._finished:
            _kill_group(self.process.pid)
            if self.tree is not None:
                self.tree.kill()

    async def _exited(self) -> None:
        """Wait for the exit itself: asyncio's Process.wait() also waits until every holder of its pipes has
        closed them, which a child it left behind may not do for long."""
        while self.process.returncode is None:
            await asyncio.sleep(_EXIT_POLL_S)

    async def emptied(self, within: float) -> bool:
        """Once finished: wait until no process of its tree is left (a killed process may take a moment to end,
        and a GPU process to let go of its GPU); whether none is."""
        deadline = time.monotonic() + within
        while self.tree is not None and self.tree.pids():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(_EXIT_POLL_S)
        if self.tree is not None:
            self.tree.remove()
        return True

    async def finish(self, timeout: float | None) -> ProcessResult:
        """Wait for the exit (killing the group at `timeout` or on cancellation), kill what it left running in
        its group, and say how it ended."""
        start = time.monotonic()
        timed_out, ended = False, 0.0
        try:
            try:
                await asyncio.wait_for(self._exited(), timeout)
                ended = time.monotonic()
            except TimeoutError:
                timed_out = True
        finally:
            self.kill()
            await self._exited()
            self._finished = True
            why = ""
            if self.tree is not None:
                why = self.tree.why_killed()  # read before the tree goes
                self.tree.remove()
            # What is still in the pipes arrives once the group is gone.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._pumps), 5)
        return ProcessResult(
            argv=self.argv,
            returncode=self.process.returncode if self.process.returncode is not None else -9,
            stdout=_tail(bytes(self._out)),
            stderr=_tail(bytes(self._err)),
            seconds=time.monotonic() - start,
            timed_out=timed_out,
            ended=ended,
        ).noted(why)
