"""Keeps jobs from filling the server's disk: the running job that wrote the most is stopped once the state
folder's file system has less free space than its reserve.

A job writes in its cell, on the server's disk, and nothing but free space bounds that (a quota needs the host's
file system to keep one). Free space is read once a second (statvfs, cheap); only when it is under the reserve
are the running cells measured (coreutils' du, off the event loop: a cell may hold a million files or nest
thousands deep), and the largest one's process tree killed if it holds a quarter of the reserve or more: a job
that wrote little is not why the disk is full (kept workspaces, the build cache and other users of the disk are
not the guard's to remove). Its result says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from profsvc.proc import SERVER_NOTE, ProcessResult, StartedProcess

log = logging.getLogger("profsvc.disk")

CHECK_EVERY_S = 1.0


def cell_bytes(cell: Path) -> int:
    """Bytes a cell's files take on disk (0 where it cannot be measured)."""
    done = subprocess.run(
        ["du", "-s", "-B1", "--one-file-system", "--", str(cell)], capture_output=True, text=True, check=False
    )
    with contextlib.suppress(ValueError, IndexError):
        return int(done.stdout.split()[0])
    return 0


class DiskGuard:
    """Watches the free space of `root`'s file system while jobs run in cells under it (see the module's text)."""

    def __init__(self, root: Path, reserve: int, least: int | None = None) -> None:
        self.root = root
        self.reserve = reserve
        # The least a cell must hold to be stopped (a quarter of the reserve).
        self.least = reserve // 4 if least is None else least
        self._running: dict[Path, StartedProcess] = {}
        self._stopped: dict[Path, str] = {}

    def warn_if_low(self) -> None:
        """Say at start where the disk already has less free space than the reserve (large jobs will be stopped)."""
        free = shutil.disk_usage(self.root).free
        if free < self.reserve:
            log.warning(
                "the state folder's disk has %.1f GiB free, under its reserve of %.1f GiB: a running job that "
                "writes a quarter of the reserve or more will be stopped (--disk-reserve)",
                free / 2**30,
                self.reserve / 2**30,
            )

    @contextlib.contextmanager
    def running(self, cell: Path, process: StartedProcess) -> Iterator[None]:
        """While the block runs, the job process writing in `cell` may be stopped for the disk's sake (call
        `explained` inside the block)."""
        self._running[cell] = process
        try:
            yield
        finally:
            self._running.pop(cell, None)
            self._stopped.pop(cell, None)

    def explained(self, cell: Path, result: ProcessResult) -> ProcessResult:
        """The result of the process that ran in `cell`, with why it was stopped where the guard stopped it."""
        return result.noted(self._stopped.pop(cell, ""))

    async def watch(self) -> None:
        """Check once a second, for as long as the server runs."""
        while True:
            await asyncio.sleep(CHECK_EVERY_S)
            try:
                if self._running and shutil.disk_usage(self.root).free < self.reserve:
                    await self._stop_the_largest()
            except OSError as error:  # the next check may fare better; the guard goes on
                log.warning("cannot check the state folder's disk: %s", error)

    async def _stop_the_largest(self) -> None:
        cells = list(self._running)
        sizes = await asyncio.to_thread(lambda: [cell_bytes(cell) for cell in cells])
        size, cell = max(zip(sizes, cells, strict=True))
        process = self._running.get(cell)
        if process is None or size < self.least:  # it ended meanwhile, or it is not why the disk is full
            return
        free = shutil.disk_usage(self.root).free
        why = (
            f"{SERVER_NOTE}the job was stopped: it had written {size / 2**30:.1f} GiB, the most of the running jobs, "
            f"and the server's disk had {free / 2**30:.1f} GiB free, under its reserve of "
            f"{self.reserve / 2**30:.1f} GiB"
        )
        log.warning("%s (%s)", why, cell)
        self._stopped[cell] = why
        process.kill()
