"""A pool of warm workers: one or more processes per kind always started ahead of the next job.

A worker's start-up is most of a small job's time (Python and torch about 5 s,
ncu's own start about 1.6 s, the report reader and matplotlib about 1 s). The
pool keeps a few processes of each kind warming or waiting (see
profsvc.worker.warm); a job takes the oldest, and a replacement starts at once,
while the job runs. A job that finds its kind's worker still warming waits for
it (it is always nearer to ready than a fresh start); a job that finds none
(the kind is not kept, or its worker died) starts a fresh process as before.

A kind under ncu warms up in two steps (profsvc.worker.warm): its worker
says `loaded`, then profiles a kernel of its own when told to ("primes"). Two
ncu processes' kernels on one GPU wait for each other, so the pool primes only
while it holds the kind's `prime_lock` (the GPU's, which every job on that GPU
holds), and only the oldest worker. A job that takes a worker not primed yet
runs on it at once, unprimed: priming then would cost the job all of the metric
set's passes on the worker's own kernel besides ncu's first-kernel cost (1.9 to
2.4 s on an H200 in an agent's loop), where its own first kernel pays only the
latter (1.1 to 1.6 s there). And a job that comes for the GPU while a worker
primes does not wait for the prime: the worker is killed and replaced
(`stop_priming`), so priming never delays a job that has arrived.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profsvc.jobfiles import remove_tree, remove_tree_soon
from profsvc.proc import Launch, ProcessResult, StartedProcess
from profsvc.scheduler.control import Handler, ServerChannel
from profsvc.telemetry import add_timing
from profsvc.worker.warm import CHANNEL, LOADED, PRIME, READY

log = logging.getLogger("profsvc.standby")

# How long a job waits for its kind's worker to finish warming before starting a fresh one instead.
READY_TIMEOUT_S = 120.0
# How long priming may hold the GPU (one small kernel under ncu: about 1 s measured on the H200).
PRIME_TIMEOUT_S = 30.0
# How long the GPU must have been free before the pool primes: a job that follows another at once (an agent's
# evaluate after its profile) goes first, instead of waiting about a second for the priming.
PRIME_IDLE_S = 0.5
# How long a worker whose prime was stopped may take to end, every process of it, before the job goes on.
STOP_WITHIN_S = 10.0
# A kind whose workers fail to come up this many times in a row is no longer kept (each failure costs a job time).
MAX_FAILED_STARTS = 3
# How long a line to a worker may wait for the worker to read room for it in the FIFO (it reads all the time).
WRITE_TIMEOUT_S = 30.0
_POLL_S = 0.01
# A job's wait for its warm worker at least this long is logged, with how long the worker took to come up.
WAIT_LOGGED_S = 0.1


@dataclass(frozen=True)
class StandbySpec:
    """How to start one kind of warm worker in a given directory: argv, environment."""

    command: Callable[[Path], Sequence[str]]
    environment: Callable[[Path], Mapping[str, str]]
    # For a worker that warms up in two steps: held while it primes (see above); None: one step.
    prime_lock: asyncio.Lock | None = None
    # How to start argv in the worker's directory with these descriptors kept open (a jail); None: as it is.
    launch: Callable[[Sequence[str], Path, Sequence[int]], Launch] | None = None
    # What the worker may ask over its control channel (profsvc.scheduler.control) before its job adds more.
    handlers: Mapping[str, Handler] | None = None


class StandbyGone(OSError):
    """The warm worker died before it could take its job (nothing of the job ran): start a fresh process."""


class Standby:
    """One warm worker: its process and its directory."""

    def __init__(
        self,
        process: StartedProcess,
        directory: Path,
        started: float,
        two_steps: bool = False,
        channel: ServerChannel | None = None,
        requests: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        self.process = process
        # When its start began (time.monotonic()): how long a worker takes to warm up, where a job waits for one.
        self.started = started
        self.directory = directory
        self.primed = not two_steps
        self.channel = channel
        # When it last asked each request of its warm-up (its spec's handlers) and when it was answered.
        self.requests = requests if requests is not None else {}
        # Killed during its prime because a job came for the GPU (StandbyPool.stop_priming).
        self.stopped = False

    @property
    def ready(self) -> bool:
        """True once the worker has warmed up and waits for its job."""
        return (self.directory / READY).is_file()

    @property
    def loaded(self) -> bool:
        """True once a two-step worker waits to be primed (or has been)."""
        return (self.directory / LOADED).is_file()

    async def until_loaded(self, timeout: float) -> bool:
        """Wait until a two-step worker is loaded; False when it exits or the time is up first."""
        return await self._until(lambda: self.loaded, timeout)

    async def until_ready(self, timeout: float) -> bool:
        """Wait until the worker is ready; False when it exits or the time is up first."""
        return await self._until(lambda: self.ready, timeout)

    async def _until(self, condition: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not condition():
            if not self.process.running or time.monotonic() > deadline:
                return False
            await asyncio.sleep(_POLL_S)
        return True

    async def prime(self) -> bool:
        """Once loaded, tell the worker to profile its own kernel and wait until it is ready (False: it failed).

        The caller holds the worker's GPU (its kind's prime_lock).
        """
        self.primed = True
        if not await self.until_loaded(READY_TIMEOUT_S):
            return False
        try:
            await self._write(PRIME)
        except OSError:
            return False
        return await self.until_ready(PRIME_TIMEOUT_S)

    async def _write(self, message: Mapping[str, object]) -> None:
        await write_line(self.directory, message)

    async def run(
        self, argv: Sequence[str], *, cwd: Path, stdin: str, timeout: float, on_stdout: Callable[[str], None] | None
    ) -> ProcessResult:
        """Hand the worker its job and wait for it to finish (killed at `timeout`)."""
        self.process.on_stdout = on_stdout
        try:
            await self._write({"argv": list(argv), "cwd": str(cwd), "stdin": stdin})
        except OSError as error:
            raise StandbyGone(f"the warm worker in {self.directory} is gone: {error}") from error
        return await self.process.finish(timeout)

    def discard(self) -> None:
        """Kill the worker, close its channel and remove its directory."""
        self.process.kill()
        if self.channel is not None:
            self.channel.close()
        remove_tree_soon(self.directory)


def timing_name(kind: str) -> str:
    """A worker kind as a job's timings name it: less its GPU ("ncu-gpu0" -> "ncu"), the same on every GPU."""
    return kind.split("-gpu")[0]


async def write_line(directory: Path, message: Mapping[str, object]) -> None:
    """Write one line to the worker waiting in `directory`, all of it. The FIFO is non-blocking (a worker gone is
    an error, not a hang), so a line longer than its buffer goes in several writes, each once the worker has read
    room for it."""
    line = memoryview((json.dumps(message) + "\n").encode())
    # The worker's folder is its job's: only the FIFO made there is written, never what a link names.
    channel = os.open(directory / CHANNEL, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISFIFO(os.fstat(channel).st_mode):
            raise OSError(f"{directory / CHANNEL} is no longer the worker's FIFO")
        while line:
            try:
                line = line[os.write(channel, line) :]
            except BlockingIOError:
                await _writable(channel, WRITE_TIMEOUT_S)
    finally:
        os.close(channel)


async def _writable(fd: int, timeout: float) -> None:
    """Return once `fd` can be written to; TimeoutError (an OSError) when it cannot within `timeout`."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    loop.add_writer(fd, lambda: ready.done() or ready.set_result(None))
    try:
        await asyncio.wait_for(ready, timeout)
    finally:
        loop.remove_writer(fd)


async def _until_idle(lock: asyncio.Lock, seconds: float) -> None:
    """Return once the lock has been free for `seconds` (polled), with nothing in between to let a job take it."""
    free_since: float | None = None
    while True:
        now = time.monotonic()
        if lock.locked():
            free_since = None
        elif free_since is None:
            free_since = now
        elif now - free_since >= seconds:
            return
        await asyncio.sleep(_POLL_S)


def _discard_started(task: asyncio.Task[Standby | None]) -> None:
    """Discard the worker a start task made, once it is done (for a kind no longer kept)."""
    if not task.cancelled() and task.exception() is None and (standby := task.result()) is not None:
        standby.discard()


async def _started(task: asyncio.Task[Standby | None]) -> Standby | None:
    """The worker a start task made. Shielded: a cancelled waiter (a job whose client went away) does not cancel
    the start, which another waiter (the priming) may await; the worker it would have had is discarded."""
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.add_done_callback(_discard_started)
        raise


class StandbyPool:
    """Keeps one warm worker per registered kind."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._specs: dict[str, StandbySpec] = {}
        self._current: dict[str, collections.deque[asyncio.Task[Standby | None]]] = {}
        self._serial = 0
        self._closed = False
        self._failed_starts: dict[str, int] = {}
        self._priming: dict[str, asyncio.Task[None]] = {}
        self._prime_again: set[str] = set()
        # The worker priming under each GPU lock (stop_priming).
        self._priming_under: dict[asyncio.Lock, Standby] = {}

    def keep(self, kind: str, spec: StandbySpec, depth: int = 1) -> None:
        """Keep `depth` warm workers of this kind from now on (more than one where jobs come faster than warm-ups)."""
        self._specs[kind] = spec
        self._current[kind] = collections.deque()
        for _ in range(depth):
            self._refill(kind)
        self._prime_oldest(kind)

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
        remove_tree(directory)
        directory.mkdir(parents=True)
        os.mkfifo(directory / CHANNEL, 0o600)
        requests: dict[str, tuple[float, float]] = {}
        channel = ServerChannel({op: _noted(op, handler, requests) for op, handler in (spec.handlers or {}).items()})
        argv = list(spec.command(directory))
        env = {**spec.environment(directory), **channel.environment()}
        started = time.monotonic()
        try:
            if spec.launch is not None:
                launch = spec.launch(argv, directory, [channel.child_fd])
            else:
                launch = Launch(argv=tuple(argv), pass_fds=(channel.child_fd,))
            process = await StartedProcess.start(argv, cwd=directory, env=env, launch=launch)
        except OSError as error:
            log.warning("cannot start a warm %s worker: %s", kind, error)
            channel.close()
            remove_tree(directory)
            return None
        channel.handed_over()
        two_steps = spec.prime_lock is not None
        return Standby(process, directory, started, two_steps=two_steps, channel=channel, requests=requests)

    def _prime_oldest(self, kind: str) -> None:
        """Prime the kind's oldest worker in the background, once its GPU is free (two-step kinds only)."""
        spec = self._specs.get(kind)
        if spec is None or spec.prime_lock is None or self._closed:
            return
        running = self._priming.get(kind)
        if running is not None and not running.done():
            # It may be waiting on a worker that is gone by now: it looks again when done.
            self._prime_again.add(kind)
            return
        self._priming[kind] = asyncio.get_running_loop().create_task(self._prime(kind, spec.prime_lock))

    async def _prime(self, kind: str, lock: asyncio.Lock) -> None:
        await self._prime_first(kind, lock)
        while kind in self._prime_again:
            self._prime_again.discard(kind)
            await self._prime_first(kind, lock)

    async def _prime_first(self, kind: str, lock: asyncio.Lock) -> None:
        while (waiting := self._current.get(kind)) and not self._closed:
            task = waiting[0]
            # Shielded: cancelling the waiter (at close) must not cancel the start.
            await asyncio.wait([task])
            standby = None if task.cancelled() or task.exception() is not None else task.result()
            if standby is None or standby.primed:
                return
            # Loading takes seconds: wait for it without holding the GPU.
            if not await standby.until_loaded(READY_TIMEOUT_S):
                if waiting and waiting[0] is task:
                    return  # the oldest died: the job that takes it says so and starts a fresh process
                continue  # it was taken or stopped meanwhile: go on with the next oldest
            await _until_idle(lock, PRIME_IDLE_S)
            async with lock:
                if waiting and waiting[0] is task and not standby.primed:
                    self._priming_under[lock] = standby
                    log.info("priming a warm %s worker", kind)
                    try:
                        primed = await standby.prime()
                    finally:
                        del self._priming_under[lock]
                    if not standby.stopped:
                        if not primed:
                            # Killed, not discarded: the job that takes it logs why it failed, from its output.
                            standby.process.kill()
                        return
                    # A job came for the GPU: a new worker in its place, and the next oldest primes later. The
                    # GPU is the job's once every process of the worker has ended (ncu and its target let go).
                    if task in waiting:
                        waiting.remove(task)
                    standby.discard()
                    await standby.process.finish(0)
                    await standby.process.emptied(STOP_WITHIN_S)
                    self._refill(kind)
            # A job took it meanwhile (and ran on it unprimed) or stopped its prime: go on with the next oldest.

    async def take(self, kind: str) -> Standby | None:
        """The kind's warm worker once ready (a replacement starts now); None: start a fresh process instead."""
        waiting = self._current.get(kind)
        if not waiting:
            return None
        # The oldest is the nearest to ready.
        task = waiting.popleft()
        self._refill(kind)
        start = time.monotonic()
        standby = await _started(task)
        if standby is None:
            self._failed(kind)
            return None
        # In the job's timings, what it waited for that was not its own work.
        name = timing_name(kind)
        try:
            if standby.primed:
                came_up = await standby.until_ready(READY_TIMEOUT_S)
            else:  # the job goes first (see above): the worker takes it in place of the prime
                came_up = await standby.until_loaded(READY_TIMEOUT_S)
            waited = time.monotonic() - start
            add_timing(f"{name}:wait", waited)
        except BaseException:
            # Left running, a primed worker would hold every later profile on its GPU up (ncu's hold).
            standby.discard()
            self._prime_oldest(kind)
            raise
        # The next oldest primes once the taker's job frees the GPU.
        self._prime_oldest(kind)
        if not came_up:
            result = await standby.process.finish(0)  # kills it where it still runs
            # ncu writes its own errors (==ERROR==) to stdout: keep both streams' tails.
            output = "\n".join(t for t in (result.stdout[-1000:].strip(), result.stderr[-1000:].strip()) if t)
            log.warning("a warm %s worker did not come up (exit %d): %s", kind, result.returncode, output)
            standby.discard()
            self._failed(kind)
            return None
        self._failed_starts[kind] = 0
        if waited >= WAIT_LOGGED_S:
            # Where its warm-up went: e.g. how long it waited for its GPU turn (scheduler.gpu_turns).
            asked = "".join(
                f"; it asked {op} at {at - standby.started:.1f} s, answered at {answered - standby.started:.1f} s"
                for op, (at, answered) in standby.requests.items()
            )
            log.info(
                "a job waited %.1f s for a warm %s worker, which came up %.1f s after its start%s",
                waited,
                kind,
                time.monotonic() - standby.started,
                asked,
            )
        return standby

    def _failed(self, kind: str) -> None:
        """Count a worker that did not come up; stop keeping a kind whose workers keep failing."""
        self._failed_starts[kind] = self._failed_starts.get(kind, 0) + 1
        if self._failed_starts[kind] >= MAX_FAILED_STARTS and kind in self._specs:
            log.warning("no longer keeping warm %s workers: %d in a row did not come up", kind, MAX_FAILED_STARTS)
            del self._specs[kind]
            for task in self._current.pop(kind, collections.deque()):
                task.add_done_callback(_discard_started)

    def stop_priming(self, lock: asyncio.Lock) -> None:
        """Called by a job about to wait for the GPU `lock` guards: a worker priming under it is killed, so the
        lock is free as soon as it is gone. (No prime starts after: the pool takes a free lock only once it has
        been free for PRIME_IDLE_S, and a job waiting for it takes it first.)"""
        priming = self._priming_under.get(lock)
        if priming is not None and not priming.stopped:
            log.info("a job came for the GPU while a warm worker primed: the worker is replaced")
            priming.stopped = True
            priming.process.kill()

    async def close(self) -> None:
        """Stop every warm worker."""
        self._closed = True
        for priming in self._priming.values():
            priming.cancel()
        for waiting in self._current.values():
            for task in waiting:
                with contextlib.suppress(Exception):
                    standby = await task
                    if standby is not None:
                        standby.discard()
                        await standby.process.finish(5)
        self._current.clear()


def _noted(op: str, handler: Handler, requests: dict[str, tuple[float, float]]) -> Handler:
    """`handler`, noting in `requests` when a warm worker asked `op` and when it was answered."""

    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        asked = time.monotonic()
        try:
            return await handler(request)
        finally:
            requests[op] = (asked, time.monotonic())

    return answer
