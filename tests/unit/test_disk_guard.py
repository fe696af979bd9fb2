"""The disk guard (profsvc.scheduler.disk_guard): a job that fills the server's disk is stopped, and says so."""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys

from profsvc.scheduler.disk_guard import DiskGuard, cell_bytes
from tests.conftest import unjailed_cells

WRITER = (
    "import os, sys, time\n"
    "with open('data', 'wb') as f:\n"
    "    f.write(os.urandom(int(sys.argv[1])))\n"
    "open('written', 'w').close()\n"
    "time.sleep(float(sys.argv[2]))\n"
)


def test_du_counts_what_a_cell_holds(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * (1 << 20))
    assert 1 << 20 <= cell_bytes(tmp_path) < 2 << 20
    assert cell_bytes(tmp_path / "gone") == 0


def test_under_the_reserve_the_job_that_wrote_the_most_is_stopped_and_told_why(tmp_path):
    # A reserve above the disk's free space stands for a disk that filled up; a job under `least` is not why.
    cells = unjailed_cells(tmp_path, DiskGuard(tmp_path, shutil.disk_usage(tmp_path).free + (1 << 40), 4 << 20))

    async def job(size: int, seconds: float) -> tuple[str, float]:
        argv = lambda cell: [sys.executable, "-c", WRITER, str(size), str(seconds)]  # noqa: E731
        async with cells.run("", argv, files={}, gpu=None, timeout=120) as (result, _):
            return result.stderr, result.seconds

    async def body() -> tuple[tuple[str, float], tuple[str, float]]:
        jobs = asyncio.gather(job(8 << 20, 60), job(1 << 10, 4))
        while len(list(cells.root.glob("*/written"))) < 2:  # both have written before the disk is looked at
            await asyncio.sleep(0.05)
        guard = asyncio.create_task(cells.disk.watch())
        try:
            return await jobs
        finally:
            guard.cancel()

    (large, large_s), (small, small_s) = asyncio.run(body())
    assert "the job was stopped: it had written" in large and "the most of the running jobs" in large
    assert large_s < 30
    # The one that wrote little ran to its end.
    assert "stopped" not in small and small_s >= 4


def test_a_start_on_a_disk_under_the_reserve_says_so(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="profsvc.disk"):
        DiskGuard(tmp_path, shutil.disk_usage(tmp_path).free + (1 << 40)).warn_if_low()
        DiskGuard(tmp_path, 1).warn_if_low()
    (said,) = [r.getMessage() for r in caplog.records]
    assert "under its reserve" in said and "--disk-reserve" in said
