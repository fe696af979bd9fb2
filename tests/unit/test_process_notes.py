"""Why the server ended a job process, in a line its result carries: the memory limit read from the job's cgroup
(the kernel's own files, in their v2 and v1 layouts), and how a result finds that line."""

from __future__ import annotations

from pathlib import Path

import pytest

from profsvc.jail.cgroup import JobCgroup
from profsvc.proc import server_note

# /sys/fs/cgroup/<job>/memory.events after the kernel's OOM killer took a process (cgroup v2).
V2_EVENTS = "low 0\nhigh 0\nmax 1843\noom 1\noom_kill 1\noom_group_kill 0\n"
# memory.oom_control of a v1 memory cgroup after the same.
V1_CONTROL = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"


def _v2(folder: Path, events: str, limit: str) -> JobCgroup:
    folder.mkdir()
    (folder / "memory.events").write_text(events)
    (folder / "memory.max").write_text(limit)
    return JobCgroup((folder,), v2=True)


@pytest.mark.parametrize(
    ("limit", "shown"), [("268435456\n", "(256 MiB)"), (f"{32 << 30}\n", "(32.0 GiB)"), ("1610612736\n", "(1.5 GiB)")]
)
def test_a_job_the_kernel_killed_at_its_memory_limit_is_told_the_limit(tmp_path, limit, shown):
    note = _v2(tmp_path / "job", V2_EVENTS, limit).why_killed()
    assert note.startswith("profsvc: the job ran out of memory on the host") and shown in note, note


def test_no_kill_no_note_and_a_kill_below_the_limit_is_the_hosts(tmp_path):
    assert _v2(tmp_path / "calm", V2_EVENTS.replace("oom_kill 1", "oom_kill 0"), "268435456\n").why_killed() == ""
    # Killed by the host's (or a parent's) OOM killer without ever meeting its own limit: `oom` stays 0.
    host = _v2(tmp_path / "host", V2_EVENTS.replace("oom 1", "oom 0"), f"{32 << 30}\n").why_killed()
    unlimited = _v2(tmp_path / "unlimited", V2_EVENTS, "max\n").why_killed()
    for note in (host, unlimited):
        assert note == "profsvc: the host ran out of memory and the kernel killed one of the job's processes", note
    assert JobCgroup((tmp_path / "gone",), v2=True).why_killed() == ""


def test_cgroup_v1_reads_its_own_files(tmp_path):
    memory, pids = tmp_path / "memory", tmp_path / "pids"
    memory.mkdir()
    pids.mkdir()
    (memory / "memory.oom_control").write_text(V1_CONTROL)
    (memory / "memory.limit_in_bytes").write_text(f"{1 << 30}\n")
    (memory / "memory.failcnt").write_text("57\n")  # times usage met the limit
    assert "(1.0 GiB)" in JobCgroup((memory, pids), v2=False).why_killed()
    (memory / "memory.failcnt").write_text("0\n")
    assert "the host ran out of memory" in JobCgroup((memory, pids), v2=False).why_killed()


def test_a_result_finds_the_servers_note_only_as_the_last_line():
    assert server_note("a traceback\nprofsvc: the job was stopped\n") == "the job was stopped"
    assert server_note("profsvc: early\nthe job's own last line\n") == ""
    assert server_note("") == ""
