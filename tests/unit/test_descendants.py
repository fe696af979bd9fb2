"""A worker's own processes: a daemon its user code forks stays below it and ends with it.

Each case runs in a fresh Python process (a subreaper adopts every orphan below it: not something to make of
the test runner), which forks a daemon the way the jail's attack suite does (fork, setsid, fork, exec) and
reports what it saw as JSON.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = """
import json, os, sys, time
from profsvc.worker.descendants import adopt_orphans, descendants, end_descendants

adopted = adopt_orphans() if sys.argv[1] == "adopt" else False
middle = os.fork()
if middle == 0:
    os.setsid()
    if os.fork() == 0:
        quiet = os.open(os.devnull, os.O_RDWR)  # a daemon lets go of its caller's output
        for fd in (0, 1, 2):
            os.dup2(quiet, fd)
        os.execvp("sleep", ["sleep", sys.argv[2]])
    os._exit(0)
os.waitpid(middle, 0)
daemon = None
for _ in range(200):  # the daemon's exec, seen in /proc
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and sys.argv[2] in open(f"/proc/{pid}/cmdline").read():
                daemon = int(pid)
        except OSError:
            pass
    if daemon:
        break
    time.sleep(0.01)
below = descendants(os.getpid())
killed = end_descendants()
print(json.dumps({"adopted": adopted, "daemon": daemon, "below": below, "killed": killed}))
"""


def _sleepers(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _scenario(mode: str) -> tuple[dict, str]:
    marker = f"{uuid.uuid4().int % 10**6}.25"  # a sleep's seconds no other process has
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCENARIO, mode, marker], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), marker


def test_a_forked_daemon_stays_below_the_worker_and_ends_with_it():
    seen, marker = _scenario("adopt")
    assert seen["adopted"] and seen["daemon"], seen
    assert seen["below"] == [seen["daemon"]] and seen["killed"] == 1, seen
    assert not _sleepers(marker)


def test_without_adopting_the_daemon_escapes_the_worker():
    # The reason for the subreaper: the same daemon is not the worker's to end otherwise.
    seen, marker = _scenario("keep")
    try:
        assert seen["daemon"] and seen["below"] == [] and seen["killed"] == 0, seen
        assert _sleepers(marker) == [seen["daemon"]]
    finally:
        for pid in _sleepers(marker):
            os.kill(pid, signal.SIGKILL)
