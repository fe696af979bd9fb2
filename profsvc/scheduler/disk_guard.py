"""Keeps jobs from filling the server's disk: the running job that wrote the most is stopped once the state
folder's file system has less free space than its reserve.

A job writes in its cell, on the server's disk, and nothing but free space bounds that (a quota needs the host's
file system to keep one). Free space is read once a second (statvfs, cheap); only when it is under the reserve
are the running cells measured (coreutils' du, off the event loop: a cell may hold a million files or nest
thousands deep) and the largest one's process tree killed. Its result says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from profsvc.proc import ProcessResult, StartedProcess

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

    def __init__(self, root: Path, reserve: int) -> None:
        self.root = root
        self.reserve = reserve
        self._running: dict[Path, StartedProcess] = {}
        self._stopped: dict[Path, str] = {}

    @contextlib.contextmanager
    def running(self, cell: Path, process: StartedProcess) -> Iterator[None]:
        """While the block runs, the job process writing in `cell` may be stopped for the disk's sake."""
        self._running[cell] = process
        try:
            yield
        finally:
            self._running.pop(cell, None)

    def explained(self, cell: Path, result: ProcessResult) -> ProcessResult:
        """The result of the process that ran in `cell`, with why it was stopped where the guard stopped it."""
        why = self._stopped.pop(cell, "")
        return dataclasses.replace(result, stderr=f"{result.stderr}\n{why}") if why else result

    async def watch(self) -> None:
        """Check once a second, for as long as the server runs."""
        while True:
            await asyncio.sleep(CHECK_EVERY_S)
            if self._running and shutil.disk_usage(self.root).free < self.reserve:
                await self._stop_the_largest()

    async def _stop_the_largest(self) -> None:
        cells = list(self._running)
        sizes = await asyncio.to_thread(lambda: [cell_bytes(cell) for cell in cells])
        size, cell = max(zip(sizes, cells, strict=True))
        process = self._running.get(cell)
        if process is None:  # it ended meanwhile
            return
        free = shutil.disk_usage(self.root).free
        why = (
            f"profsvc: the job was stopped: it had written {size / 2**30:.1f} GiB, the most of the running jobs, "
            f"and the server's disk had {free / 2**30:.1f} GiB free, under its reserve of "
            f"{self.reserve / 2**30:.1f} GiB"
        )
        log.warning("%s (%s)", why, cell)
        self._stopped[cell] = why
        process.kill()
