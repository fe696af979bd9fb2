"""Readers that stay (profsvc.scheduler.readers) with real reader processes reading a real report.

What must hold: a caller's reports after its first are read by its own long-lived readers (one process, many
reports), never by another caller's; its first runs elsewhere while its reader starts; a job that outlasts its
limit ends its reader, and the next job gets a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from profsvc.jobenv import job_environment
from profsvc.proc import ProcessResult
from profsvc.scheduler.readers import ReaderPool
from profsvc.scheduler.warm_pool import StandbySpec
from tests.conftest import FIXTURES

REPORT = FIXTURES / "seed47_full.ncu-rep"
# The seed's one kernel (tests/fixtures/seed47.py defines it), as the report names it.
SEED_KERNEL = "vga_linear_kernel"


def _pool(root: Path, per_caller: int = 2, idle_s: float = 120.0, max_readers: int = 8) -> ReaderPool:
    spec = StandbySpec(
        command=lambda d: [sys.executable, "-m", "profsvc.worker.reader", "--standby", str(d), "--server-pid", "0"],
        environment=lambda d: job_environment(d, gpu_index=None, cuda_arch="sm_90"),
    )
    return ReaderPool(
        root,
        spec,
        own=lambda _folder: None,
        own_descriptor=lambda _fd: None,
        per_caller=per_caller,
        idle_s=idle_s,
        max_readers=max_readers,
    )


def _argv(folder: Path) -> list[str]:
    return [sys.executable, "-m", "profsvc.worker.analyze_report", str(folder / "report" / REPORT.name)]


class _Elsewhere:
    """Stands for the warm worker a caller's first job runs on: counts its uses."""

    def __init__(self) -> None:
        self.uses = 0

    @contextlib.asynccontextmanager
    async def __call__(self) -> AsyncIterator[tuple[ProcessResult, Path]]:
        self.uses += 1
        yield ProcessResult(argv=(), returncode=0, stdout="{}", stderr="", seconds=0.0, timed_out=False), Path()


async def _read(pool: ReaderPool, caller: str, elsewhere: _Elsewhere, timeout: float = 60) -> tuple[ProcessResult, str]:
    async with pool.read(caller, {f"report/{REPORT.name}": REPORT}, _argv, timeout, elsewhere) as (result, folder):
        # The job's outputs come back in READER.job-N, out of the reader's folder; '' where it ran elsewhere.
        return result, folder.name.split(".job-")[0]


async def _until_started(pool: ReaderPool, caller: str) -> None:
    for _ in range(2000):
        if pool._readers.get(caller) and caller not in pool._starting:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no reader started for {caller}")


def test_a_callers_reports_share_its_reader_and_no_one_elses(tmp_path):
    async def scenario() -> None:
        pool, elsewhere = _pool(tmp_path / "readers"), _Elsewhere()
        try:
            first, _ = await _read(pool, "alice", elsewhere)
            assert elsewhere.uses == 1 and first.stdout == "{}"  # the first ran elsewhere
            await _until_started(pool, "alice")
            readers = set()
            for _ in range(3):
                result, reader = await _read(pool, "alice", elsewhere)
                assert result.ok, result.stderr
                kernels = json.loads(result.stdout)["kernels"]
                assert [k["name"] for k in kernels] == [SEED_KERNEL]
                readers.add(reader)
            assert elsewhere.uses == 1 and len(readers) == 1  # one process read the three reports
            await _read(pool, "bob", elsewhere)
            assert elsewhere.uses == 2  # bob's first: not on alice's reader
            await _until_started(pool, "bob")
            _, bobs = await _read(pool, "bob", elsewhere)
            assert bobs not in readers
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_a_job_past_its_limit_ends_its_reader_and_the_next_gets_a_new_one(tmp_path):
    async def scenario() -> None:
        pool, elsewhere = _pool(tmp_path / "readers", per_caller=1), _Elsewhere()
        try:
            await _read(pool, "alice", elsewhere)
            await _until_started(pool, "alice")
            late, first_reader = await _read(pool, "alice", elsewhere, timeout=0.0)
            assert not late.ok and late.timed_out
            assert not (tmp_path / "readers" / first_reader).exists()  # killed and removed
            await _read(pool, "alice", elsewhere)  # none left: this one starts the next, and runs elsewhere
            await _until_started(pool, "alice")
            result, second_reader = await _read(pool, "alice", elsewhere)
            assert result.ok and second_reader != first_reader
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_a_reader_left_unused_ends_without_another_report_arriving(tmp_path):
    async def scenario() -> None:
        pool, elsewhere = _pool(tmp_path / "readers", idle_s=0.5), _Elsewhere()
        try:
            await _read(pool, "alice", elsewhere)
            await _until_started(pool, "alice")
            _, reader = await _read(pool, "alice", elsewhere)
            assert (tmp_path / "readers" / reader).is_dir()
            await asyncio.sleep(2.0)  # no report meanwhile
            assert not (tmp_path / "readers" / reader).exists()
            assert pool._readers["alice"] == []
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_a_reader_no_job_ever_took_ends_when_unused(tmp_path):
    async def scenario() -> None:
        pool, elsewhere = _pool(tmp_path / "readers", idle_s=0.5), _Elsewhere()
        try:
            await _read(pool, "alice", elsewhere)  # runs elsewhere; alice's reader starts, and nothing comes
            await _until_started(pool, "alice")
            (reader,) = pool._readers["alice"]
            await asyncio.sleep(2.0)
            assert not reader.directory.exists() and pool._readers["alice"] == []
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_a_full_server_ends_the_reader_unused_longest_for_another_caller(tmp_path):
    async def scenario() -> None:
        pool, elsewhere = _pool(tmp_path / "readers", per_caller=1, max_readers=1), _Elsewhere()
        try:
            await _read(pool, "alice", elsewhere)
            await _until_started(pool, "alice")
            _, alices = await _read(pool, "alice", elsewhere)
            await _read(pool, "bob", elsewhere)  # no room: alice's idle reader ends for bob's
            assert not (tmp_path / "readers" / alices).exists()
            await _until_started(pool, "bob")
            result, bobs = await _read(pool, "bob", elsewhere)
            assert result.ok and bobs != alices
            assert sum(len(readers) for readers in pool._readers.values()) == 1
        finally:
            await pool.close()

    asyncio.run(scenario())


FORGER = """
import os
import sys
from pathlib import Path

from profsvc.worker.warm import READY, Channel, announce, split_standby_args

# A reader a hostile report has taken over: it swaps its job's folder for a link to a folder the server can read
# (here one holding a forged status and output) and waits for the server to follow the link.
directory, server_pid = split_standby_args(sys.argv[1:])
channel = Channel(directory, server_pid)
announce(directory / READY)
while True:
    job = channel.line()
    folder = directory / f"job-{job['id']}"
    folder.rename(directory / f"moved-{job['id']}")
    folder.symlink_to(os.environ["FORGER_LINK"])
"""


def test_a_reader_that_swaps_its_job_folder_for_a_link_gets_nothing_read_through_it(tmp_path):
    secret = tmp_path / "server-side"
    secret.mkdir()
    (secret / "status").write_text("0")
    (secret / "stdout").write_text("SECRET")
    forger = tmp_path / "forger.py"
    forger.write_text(FORGER)
    spec = StandbySpec(
        command=lambda d: [sys.executable, str(forger), "--standby", str(d), "--server-pid", "0"],
        environment=lambda d: {**job_environment(d, gpu_index=None, cuda_arch="sm_90"), "FORGER_LINK": str(secret)},
    )

    async def scenario() -> ProcessResult:
        pool = ReaderPool(tmp_path / "readers", spec, own=lambda _f: None, own_descriptor=lambda _fd: None)
        elsewhere = _Elsewhere()
        try:
            await _read(pool, "mallory", elsewhere)
            await _until_started(pool, "mallory")
            result, _ = await _read(pool, "mallory", elsewhere, timeout=3.0)
            return result
        finally:
            await pool.close()

    result = asyncio.run(scenario())
    assert not result.ok and "SECRET" not in result.stdout  # the forged status and output were not read
    assert (secret / "stdout").read_text() == "SECRET" and sorted(p.name for p in secret.iterdir()) == [
        "status",
        "stdout",
    ]
