"""Files and folders a job could have written, as the server reads and removes them (profsvc.jobfiles)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from profsvc.build.python_problem import STATUS_LIMIT, HarnessStatus
from profsvc.config import ServerConfig
from profsvc.host import HostInfo
from profsvc.jobfiles import read_regular, remove_tree, remove_tree_soon, trash_of
from profsvc.scheduler.scheduler import Scheduler
from profsvc.telemetry import Telemetry

GOOD = {"ok": True, "stage": "compiling"}


def _read(path: Path) -> HarnessStatus:
    return HarnessStatus.read(path, returncode=0, timed_out=False, output="")


def _timed_read(path: Path) -> tuple[HarnessStatus | None, float]:
    """The read in a thread, so a read that blocks fails the test instead of hanging it."""
    outcome: list[HarnessStatus] = []
    start = time.monotonic()
    reader = threading.Thread(target=lambda: outcome.append(_read(path)), daemon=True)
    reader.start()
    reader.join(5)
    return (outcome[0] if outcome else None), time.monotonic() - start


def test_the_status_the_worker_wrote_is_read(tmp_path):
    (tmp_path / "status.json").write_text(json.dumps(GOOD))
    assert _read(tmp_path / "status.json").ok


def test_a_status_replaced_by_a_link_to_a_read_that_never_ends_is_refused_at_once(tmp_path):
    # Stands for /proc/kmsg: a FIFO no one writes blocks its reader for good.
    os.mkfifo(tmp_path / "never")
    (tmp_path / "status.json").symlink_to(tmp_path / "never")
    status, seconds = _timed_read(tmp_path / "status.json")
    assert status is not None, "the read blocked"
    assert not status.ok and status.kind == "worker_exit" and seconds < 5


def test_a_status_that_is_a_fifo_itself_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "status.json")
    status, _ = _timed_read(tmp_path / "status.json")
    assert status is not None and not status.ok


@pytest.mark.parametrize("how", ["symlink", "hard link"])
def test_a_status_that_names_another_file_is_not_read(tmp_path, how):
    secret = tmp_path / "secret"
    secret.write_text(json.dumps({**GOOD, "message": "the server's token"}))
    link = tmp_path / "status.json"
    link.symlink_to(secret) if how == "symlink" else os.link(secret, link)
    status = _read(link)
    assert not status.ok and "token" not in status.message + status.detail


def test_a_status_larger_than_the_limit_is_not_read(tmp_path):
    status_file = tmp_path / "status.json"
    status_file.write_text(json.dumps({**GOOD, "message": "A" * STATUS_LIMIT}))
    assert not _read(status_file).ok
    assert read_regular(status_file, STATUS_LIMIT) is None


def test_no_status_file_is_the_worker_dying_before_it_wrote_one(tmp_path):
    status = HarnessStatus.read(tmp_path / "status.json", returncode=-9, timed_out=False, output="")
    assert not status.ok and "died" in status.message
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "status.json", 10)


def _nest(root: Path, depth: int) -> None:
    """A folder nested `depth` deep below root, as a job makes one (one level at a time: deeper than a path may be
    long), with a file at the bottom."""
    root.mkdir(parents=True)
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    payload = os.open("payload", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(payload, b"x" * 4096)
    os.close(payload)
    os.close(fd)


def test_a_folder_nested_deeper_than_pythons_recursion_is_removed(tmp_path):
    job = tmp_path / "cell"
    _nest(job, 3000)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("the server's")
    (job / "link").symlink_to(outside)
    remove_tree(job)
    assert not job.exists()
    assert (outside / "keep").read_text() == "the server's"  # a link in the folder is removed, not followed


def test_a_link_in_place_of_the_folder_is_removed_and_its_target_left_as_it_was(tmp_path):
    victim = tmp_path / "victim"
    (victim / "inner").mkdir(parents=True)
    (victim / "inner" / "keep").write_text("the server's")
    for folder in (victim, victim / "inner"):
        folder.chmod(0o500)
    link = tmp_path / "job-1"
    link.symlink_to(victim)
    remove_tree(link)
    assert not os.path.lexists(link)
    assert (victim / "inner" / "keep").read_text() == "the server's"
    assert [stat.S_IMODE(f.stat().st_mode) for f in (victim, victim / "inner")] == [0o500, 0o500]


def test_a_folder_its_owner_made_unreadable_is_removed(tmp_path):
    job = tmp_path / "cell"
    locked = job / "locked"
    locked.mkdir(parents=True)
    (locked / "file").write_text("x")
    locked.chmod(0)
    remove_tree(job)
    assert not job.exists()


def test_a_folder_removed_soon_is_gone_from_its_place_at_once_and_from_the_trash_later(tmp_path):
    root = tmp_path / "cells"
    job = root / "cell-1"
    for index in range(2000):
        (job / str(index % 20)).mkdir(parents=True, exist_ok=True)
        (job / str(index % 20) / str(index)).write_text("x")

    async def body() -> None:
        remove_tree_soon(job)
        assert not job.exists()
        for _ in range(500):
            if not any(trash_of(root).iterdir()):
                return
            await asyncio.sleep(0.02)
        raise AssertionError("the trash was not emptied")

    asyncio.run(body())


def test_a_server_starts_on_a_state_folder_a_job_left_nested_deep(tmp_path):
    # A warm worker's folder (its job ran there) left by a server stopped before it could remove it.
    state = tmp_path / "state"
    _nest(state / "standby" / "compile-999999999-1", 3000)
    _nest(trash_of(state / "cells") / "cell-1-1", 3000)
    # A fresh process's cell and a reader's folder, of a server that is gone and of this one (still in use).
    for folder in ("cells/cell-999999999-4", "readers/reader-999999999-2", f"cells/cell-{os.getpid()}-7"):
        (state / folder).mkdir(parents=True)
    scheduler = Scheduler(ServerConfig(state_dir=state, warm_workers=False), HostInfo(), None, Telemetry())
    asyncio.run(scheduler.start())
    assert not list((state / "standby").iterdir()) and not list((state / "readers").iterdir())
    assert [p.name for p in (state / "cells").iterdir()] == [f"cell-{os.getpid()}-7"]
    assert not trash_of(state / "cells").exists()
