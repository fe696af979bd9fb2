"""Readers that stay: each caller's reports read by long-lived reader processes of that caller's own.

A warm analyze worker reads one report and exits, so every report pays a reader's
start (about a second of CPU: imports, tables, matplotlib, ncu_report's
disassembler) even when it is paid ahead. Under many clients on a small host that
start is the bottleneck. A reader here (profsvc.worker.reader) reads report after
report in its jail; it serves one caller identity only (profsvc.server.auth: one
per token), so a report that subverted the native reader could see nothing but
its own caller's later reports. A caller has at most `per_caller` readers, the
server `max_readers` in all (the one unused longest makes room; with none unused,
a caller without a reader of its own reads on warm workers); a reader is
replaced after `max_jobs` reports, ended after `idle_s` unused, and
killed when a job outlasts its limit or it dies mid-job (the job then fails as a
crashed reader's would).

The caller is the `CALLER` context variable, set by the servicer for each call;
work with no caller (the embedded service, a cluster worker) reads on warm
workers as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from profsvc.jobfiles import open_regular_at, remove_tree, remove_tree_soon
from profsvc.proc import ProcessResult, StartedProcess
from profsvc.scheduler.warm_pool import StandbySpec, write_line
from profsvc.worker.reader import STATUS, STDERR, STDOUT, job_folder
from profsvc.worker.warm import CHANNEL, READY

log = logging.getLogger("profsvc.readers")

CALLER: contextvars.ContextVar[str | None] = contextvars.ContextVar("profsvc_caller", default=None)
# How long a new reader may take to warm up (about a second measured on two cores; more under load).
START_TIMEOUT_S = 60.0
# A job's output read back at most this large (an analysis of the largest fixture is about 0.1 MB).
OUTPUT_LIMIT = 64 * 1024 * 1024
# Files taken back from a job's folder: its stdout, stderr and status, the charts, and a few to spare.
MAX_OUTPUTS = 16
_POLL_S = 0.005


@dataclass
class _Reader:
    process: StartedProcess
    directory: Path
    jobs: int = 0
    last_used: float = field(default_factory=time.monotonic)
    busy: bool = False

    def ready(self) -> bool:
        return (self.directory / READY).is_file()

    def discard(self) -> None:
        self.process.kill()
        remove_tree_soon(self.directory)


def _read_regular(folder: int, name: str) -> bytes | None:
    """A regular file of the open folder `folder`, up to the limit; None for anything else (a link the reader put
    there is not followed)."""
    try:
        file = open_regular_at(folder, name)
    except OSError:
        return None
    if file is None:
        return None
    with file:
        return file.read(OUTPUT_LIMIT)


def _place(folder: int, files: Mapping[str, Path]) -> None:
    """Copy the job's inputs into the open folder: each name's folders made and each file created there, never
    through a link (the reader may have made one in the meantime)."""
    for name, source in files.items():
        *parents, leaf = name.split("/")
        fd = os.dup(folder)
        try:
            for part in parents:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = inner
            target = os.open(leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fd)
            with open(source, "rb") as read, os.fdopen(target, "wb") as write:
                shutil.copyfileobj(read, write)
        finally:
            os.close(fd)


def _collect(folder: int, into: Path) -> None:
    """Copy the regular files the reader left in the open folder into `into`, a folder out of every jail's view,
    where the server reads them (a bounded number, each up to the limit)."""
    for name in sorted(os.listdir(folder))[:MAX_OUTPUTS]:
        content = _read_regular(folder, name)
        if content is not None:
            (into / name).write_bytes(content)


class ReaderPool:
    """Long-lived report readers per caller (see the module's text)."""

    def __init__(
        self,
        root: Path,
        spec: StandbySpec,
        *,
        own: Callable[[Path], None],
        own_descriptor: Callable[[int], None],
        per_caller: int = 2,
        max_readers: int = 8,
        max_jobs: int = 500,
        idle_s: float = 120.0,
    ) -> None:
        self.root = root
        self.spec = spec
        self.own = own
        self.own_descriptor = own_descriptor
        self.per_caller = per_caller
        self.max_readers = max(max_readers, per_caller)
        self.max_jobs = max_jobs
        self.idle_s = idle_s
        self._readers: dict[str, list[_Reader]] = {}
        self._free: dict[str, asyncio.Condition] = {}
        # Callers whose next reader is starting (one at a time each).
        self._starting: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._idle_checks: set[asyncio.TimerHandle] = set()
        self._serial = itertools.count()
        self._jobs = itertools.count()
        self.root.mkdir(parents=True, exist_ok=True)

    async def _start(self, caller: str) -> _Reader:
        directory = self.root / f"reader-{os.getpid()}-{next(self._serial)}"
        remove_tree(directory)
        directory.mkdir(parents=True)
        os.mkfifo(directory / CHANNEL, 0o600)
        self.own(directory)
        argv = list(self.spec.command(directory))
        launch = self.spec.launch(argv, directory, []) if self.spec.launch is not None else None
        process = await StartedProcess.start(argv, cwd=directory, env=self.spec.environment(directory), launch=launch)
        reader = _Reader(process, directory)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not reader.ready():
            if not process.running or time.monotonic() > deadline:
                reader.discard()
                result = await process.finish(0)
                raise OSError(f"a report reader for {caller} did not start: {result.stderr.strip()[-500:]}")
            await asyncio.sleep(_POLL_S)
        self._idle(reader)  # from now, not from its start
        return reader

    def _idle(self, reader: _Reader) -> None:
        """The reader waits for a job from now; it is checked again once it may have waited long enough."""
        reader.last_used = time.monotonic()
        self._idle_checks.add(asyncio.get_running_loop().call_later(self.idle_s + 1, self._end_idle))

    async def _take(self, caller: str) -> _Reader | None:
        """A free reader of the caller's. All busy: one more is started (up to `per_caller`, one at a time) and
        the job waits for whichever is free first; None for the caller's first job, which runs on a warm worker
        instead of waiting for the start."""
        readers = self._readers.setdefault(caller, [])
        free = self._free.setdefault(caller, asyncio.Condition())
        async with free:
            while True:
                for dead in [r for r in readers if not r.process.running]:
                    dead.discard()
                    readers.remove(dead)
                idle = next((r for r in readers if not r.busy), None)
                if idle is not None:
                    idle.busy = True
                    return idle
                # One start at a time: a job waits for a starting reader rather than start another beside it.
                if caller not in self._starting and len(readers) < self.per_caller and self._room():
                    self._starting.add(caller)
                    task = asyncio.create_task(self._add(caller))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                    if not readers:
                        return None
                elif not readers and caller not in self._starting:
                    return None  # no room for a reader of its own: a warm worker reads it
                await free.wait()

    def _room(self) -> bool:
        """Whether one more reader may start: under `max_readers` in all, after ending the reader unused longest
        where that is what it takes."""
        count = sum(len(r) for r in self._readers.values()) + len(self._starting)
        if count < self.max_readers:
            return True
        idle = [(r.last_used, caller, r) for caller, rs in self._readers.items() for r in rs if not r.busy]
        if not idle:
            return False
        _, caller, oldest = min(idle, key=lambda entry: entry[0])
        oldest.discard()
        self._readers[caller].remove(oldest)
        return True

    async def _add(self, caller: str) -> None:
        """Start a reader for the caller and offer it to the caller's waiting jobs."""
        start = time.monotonic()
        try:
            reader = await self._start(caller)
        except OSError as error:
            log.warning("%s", error)
            reader = None
        else:
            log.info("a report reader for %s started in %.1f s", caller, time.monotonic() - start)
        finally:
            self._starting.discard(caller)
        free = self._free[caller]
        async with free:
            if reader is not None:
                self._readers[caller].append(reader)
            free.notify_all()

    async def _give_back(self, caller: str, reader: _Reader, healthy: bool) -> None:
        reader.busy = False
        self._idle(reader)
        if not healthy or reader.jobs >= self.max_jobs:
            reader.discard()
            with contextlib.suppress(ValueError):
                self._readers[caller].remove(reader)
        async with self._free[caller]:
            self._free[caller].notify()

    @contextlib.asynccontextmanager
    async def read(
        self,
        caller: str,
        files: Mapping[str, Path],
        make_argv: Callable[[Path], list[str]],
        timeout: float,
        elsewhere: Callable[[], contextlib.AbstractAsyncContextManager[tuple[ProcessResult, Path]]],
    ) -> AsyncIterator[tuple[ProcessResult, Path]]:
        """Run the analyze worker's `make_argv(folder)` on one of the caller's readers, `files` copied into the
        job's folder first; yields how it ended and a folder with the files the job left (out of the reader's
        reach), which lives until the block ends. While the caller's first reader starts, the job runs
        `elsewhere` (a warm analyze worker)."""
        reader = await self._take(caller)
        if reader is None:
            async with elsewhere() as outcome:
                yield outcome
            return
        job_id = next(self._jobs)
        folder = job_folder(reader.directory, job_id)
        # Taken back out of the reader's reach, where the server reads the outputs.
        outputs = self.root / f"{reader.directory.name}.job-{job_id}"
        healthy = False
        opened: int | None = None
        try:
            # The reader may rename and replace anything in its own folder: the job's folder is used through a
            # descriptor of the one made here, never by its path again.
            folder.mkdir()
            opened = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            if os.fstat(opened).st_uid != os.geteuid():
                raise OSError(f"{folder} was replaced before its files were placed")
            _place(opened, files)
            self.own_descriptor(opened)
            argv = make_argv(folder)
            reader.jobs += 1
            start = time.monotonic()
            try:
                await write_line(reader.directory, {"id": job_id, "argv": argv[3:]})
            except OSError:  # the reader is gone: the job fails as a crashed reader's would
                status = None
            else:
                status = await self._status(reader, opened, start + timeout)
            healthy = status is not None
            outputs.mkdir()
            _collect(opened, outputs)
            stdout, stderr = (outputs / STDOUT, outputs / STDERR)
            yield (
                ProcessResult(
                    argv=tuple(argv),
                    returncode=status if status is not None else -9,
                    stdout=stdout.read_text(errors="replace") if stdout.is_file() else "",
                    stderr=(stderr.read_text(errors="replace") if stderr.is_file() else "")
                    or ("" if healthy else "the report reader died or outlasted its limit"),
                    seconds=time.monotonic() - start,
                    timed_out=status is None and reader.process.running,
                ),
                outputs,
            )
        finally:
            if opened is not None:
                os.close(opened)
            # In the reader's own folder, which the reader could change meanwhile: moved (a link, not its target).
            remove_tree_soon(folder, trash_for=self.root)
            shutil.rmtree(outputs, ignore_errors=True)
            await self._give_back(caller, reader, healthy)

    @staticmethod
    async def _status(reader: _Reader, folder: int, deadline: float) -> int | None:
        """The job's exit status once written into the open folder; None when the reader died or the deadline
        passed."""
        while time.monotonic() < deadline and reader.process.running:
            text = _read_regular(folder, STATUS)
            if text:
                try:
                    return int(text)
                except ValueError:
                    return None
            await asyncio.sleep(_POLL_S)
        return None

    def _end_idle(self) -> None:
        """End readers unused for `idle_s`: their memory (about 0.3 GB each) is better spent elsewhere."""
        now = time.monotonic()
        self._idle_checks = {h for h in self._idle_checks if h.when() > asyncio.get_running_loop().time()}
        for readers in self._readers.values():
            for reader in [r for r in readers if not r.busy and now - r.last_used > self.idle_s]:
                reader.discard()
                readers.remove(reader)

    async def close(self) -> None:
        for check in self._idle_checks:
            check.cancel()
        for task in list(self._tasks):
            task.cancel()
        for readers in self._readers.values():
            for reader in readers:
                reader.discard()
                await reader.process.finish(0)
        self._readers.clear()
