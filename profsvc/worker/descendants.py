"""What the user's code started in a worker ends with the worker's job.

A worker adopts the orphans of its descendants (Linux's child subreaper), so a daemon the user's code forks
(fork, setsid, fork) stays in the worker's tree, and it kills that tree once its status is written. Inside
the jail the PID namespace ends such processes with the job, but only once the job's first process exits:
under ncu that is ncu, which waits for every process of its target (`--target-processes all`), so a daemon
would hold the job and its GPU to the job's time limit. A host run --unjailed has no namespace at all.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from contextlib import suppress
from pathlib import Path

# <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36
# Rounds of kill-and-reap: a process killed in one round may have left children that come to this one.
KILL_ROUNDS = 50


def adopt_orphans() -> bool:
    """Make this process the subreaper of its descendants; False where the kernel refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _processes() -> dict[int, tuple[int, str]]:
    """Every visible process: pid -> (parent pid, state letter)."""
    found: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # The command name may hold spaces and parentheses: the fields follow its last ')'.
        fields = stat.rsplit(")", 1)[1].split()
        found[int(entry)] = (int(fields[1]), fields[0])
    return found


def descendants(root: int) -> list[int]:
    """The live (not zombie) processes below `root`, parents before their children."""
    processes = _processes()
    below: list[int] = []
    frontier = [root]
    while frontier:
        parent = frontier.pop(0)
        children = [pid for pid, (ppid, _) in processes.items() if ppid == parent]
        below += [pid for pid in children if processes[pid][1] != "Z"]
        frontier += children
    return below


def _reap() -> None:
    """Collect every child that has ended (this process adopts them, so their exit is its to wait for)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_descendants() -> int:
    """Kill every process below this one and reap them; how many were killed."""
    killed: set[int] = set()
    for _ in range(KILL_ROUNDS):
        alive = descendants(os.getpid())
        if not alive:
            break
        for pid in alive:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        time.sleep(0.001)  # SIGKILL lands at once, the exit a moment later
        _reap()
    _reap()
    return len(killed)
