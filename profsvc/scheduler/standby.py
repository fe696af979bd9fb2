"""A pool of warm workers: one process per kind always started ahead of the next job.

A worker's start-up is most of a small job's time (Python and torch about 5 s,
ncu's own start about 1.6 s, the report reader and matplotlib about 1 s). The
pool keeps one process of each kind warming or waiting (see
profsvc.worker.standby); a job takes it, and a replacement starts at once,
while the job runs. A job that finds its kind's worker still warming waits for
it (it is always nearer to ready than a fresh start); a job that finds none
(the kind is not kept, or its worker died) starts a fresh process as before.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from profsvc.proc import ProcessResult, StartedProcess
from profsvc.worker.standby import CHANNEL, READY

log = logging.getLogger("profsvc.standby")

# How long a job waits for its kind's worker to finish warming before starting a fresh one instead.
READY_TIMEOUT_S = 120.0
# A kind whose workers fail to come up this many times in a row is no longer kept (each failure costs a job time).
MAX_FAILED_STARTS = 3
_POLL_S = 0.01


@dataclass(frozen=True)
class StandbySpec:
    """How to start one kind of warm worker in a given directory: argv, environment."""

    command: Callable[[Path], Sequence[str]]
    environment: Callable[[Path], Mapping[str, str]]


class StandbyGone(OSError):
    """The warm worker died before it could take its job (nothing of the job ran): start a fresh process."""


class Standby:
    """One warm worker: its process and its directory."""

    def __init__(self, process: StartedProcess, directory: Path) -> None:
        self.process = process
        self.directory = directory

    @property
    def ready(self) -> bool:
        """True once the worker has warmed up and waits for its job."""
        return (self.directory / READY).is_file()

    async def run(
        self, argv: Sequence[str], *, cwd: Path, stdin: str, timeout: float, on_stdout: Callable[[str], None] | None
    ) -> ProcessResult:
        """Hand the worker its job and wait for it to finish (killed at `timeout`)."""
        self.process.on_stdout = on_stdout
        line = json.dumps({"argv": list(argv), "cwd": str(cwd), "stdin": stdin}) + "\n"
        try:
            channel = os.open(self.directory / CHANNEL, os.O_WRONLY | os.O_NONBLOCK)
            try:
                os.write(channel, line.encode())
            finally:
                os.close(channel)
        except OSError as error:
            raise StandbyGone(f"the warm worker in {self.directory} is gone: {error}") from error
        return await self.process.finish(timeout)

    def discard(self) -> None:
        """Kill the worker and remove its directory."""
        self.process.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


def _discard_started(task: asyncio.Task[Standby | None]) -> None:
    """Discard the worker a start task made, once it is done (for a kind no longer kept)."""
    if not task.cancelled() and task.exception() is None and (standby := task.result()) is not None:
        standby.discard()


class StandbyPool:
    """Keeps one warm worker per registered kind."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._specs: dict[str, StandbySpec] = {}
        self._current: dict[str, collections.deque[asyncio.Task[Standby | None]]] = {}
        self._serial = 0
        self._closed = False
        self._failed_starts: dict[str, int] = {}

    def keep(self, kind: str, spec: StandbySpec, depth: int = 1) -> None:
        """Keep `depth` warm workers of this kind from now on (more than one where jobs come faster than warm-ups)."""
        self._specs[kind] = spec
        self._current[kind] = collections.deque()
        for _ in range(depth):
            self._refill(kind)

    def kinds(self) -> list[str]:
        """The kinds kept warm."""
        return list(self._specs)

    def _refill(self, kind: str) -> None:
        if not self._closed and kind in self._specs:
            self._current[kind].append(asyncio.get_running_loop().create_task(self._start(kind)))

    async def _start(self, kind: str) -> Standby | None:
        spec = self._specs.get(kind)
        if spec is None:
            return None  # no longer kept
        self._serial += 1
        directory = self.root / f"{kind}-{os.getpid()}-{self._serial}"
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        os.mkfifo(directory / CHANNEL, 0o600)
        try:
            process = await StartedProcess.start(
                spec.command(directory), cwd=directory, env=spec.environment(directory)
            )
        except OSError as error:
            log.warning("cannot start a warm %s worker: %s", kind, error)
            shutil.rmtree(directory, ignore_errors=True)
            return None
        return Standby(process, directory)

    async def take(self, kind: str) -> Standby | None:
        """The kind's warm worker once ready (a replacement starts now); None: start a fresh process instead."""
        waiting = self._current.get(kind)
        if not waiting:
            return None
        # The oldest is the nearest to ready.
        task = waiting.popleft()
        self._refill(kind)
        standby = await task
        if standby is None:
            self._failed(kind)
            return None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not standby.ready:
            if not standby.process.running or time.monotonic() > deadline:
                result = await standby.process.finish(0)
                # ncu writes its own errors (==ERROR==) to stdout: keep both streams' tails.
                output = "\n".join(t for t in (result.stdout[-1000:].strip(), result.stderr[-1000:].strip()) if t)
                log.warning("a warm %s worker did not come up (exit %d): %s", kind, result.returncode, output)
                standby.discard()
                self._failed(kind)
                return None
            await asyncio.sleep(_POLL_S)
        self._failed_starts[kind] = 0
        return standby

    def _failed(self, kind: str) -> None:
        """Count a worker that did not come up; stop keeping a kind whose workers keep failing."""
        self._failed_starts[kind] = self._failed_starts.get(kind, 0) + 1
        if self._failed_starts[kind] >= MAX_FAILED_STARTS and kind in self._specs:
            log.warning("no longer keeping warm %s workers: %d in a row did not come up", kind, MAX_FAILED_STARTS)
            del self._specs[kind]
            for task in self._current.pop(kind, collections.deque()):
                task.add_done_callback(_discard_started)

    @contextlib.asynccontextmanager
    async def paused(self, kind: str) -> AsyncIterator[None]:
        """Stop the kind's worker for the duration (for jobs that need its GPU to themselves), then warm one again."""
        waiting = self._current.get(kind, collections.deque())
        stopped = len(waiting)
        while waiting:
            standby = await waiting.popleft()
            if standby is not None:
                standby.discard()
                await standby.process.finish(5)
        try:
            yield
        finally:
            for _ in range(stopped):
                self._refill(kind)

    async def close(self) -> None:
        """Stop every warm worker."""
        self._closed = True
        for waiting in self._current.values():
            for task in waiting:
                with contextlib.suppress(Exception):
                    standby = await task
                    if standby is not None:
                        standby.discard()
                        await standby.process.finish(5)
        self._current.clear()
