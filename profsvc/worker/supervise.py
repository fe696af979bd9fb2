"""The first process of every job process: runs it as a child and ends whatever it leaves behind.

`python -S supervise.py -- ARGV...`. It adopts every orphan below it (Linux's child subreaper) and reaps them
as they end, forwards SIGTERM, SIGINT and SIGHUP to the worker, and once the worker has exited, by any route
(its status written, a fault, the user's own `os._exit`), kills every process still below it and exits as
the worker did. Under ncu it is ncu's target, and ncu waits for every process of its target: a daemon the
user's code forked would otherwise hold the job and its GPU to the job's time limit. Inside the jail the PID
namespace ends such processes only after ncu exits; a host run --unjailed has no namespace at all. The kill
comes from outside the worker, after it: a pool the user's code left open still shuts down as Python does it.
It imports only the standard library, so it starts in milliseconds.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from contextlib import suppress

# <linux/prctl.h>
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
# Python ignores these at its start and exec keeps that: the worker gets them back as any program starts.
RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# The highest: the kernel's OOM killer takes a job's processes before any other.
OOM_SCORE_ADJ = 1000
# How long the processes left below may take to die (SIGKILL lands at once; a process in the kernel's
# uninterruptible sleep ends when it leaves it).
END_WITHIN_S = 5.0


def _prctl(option: int, value: int) -> bool:
    return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0


def _children() -> list[int]:
    """This process's children, ended or not: an unreaped child keeps its pid, so a kill cannot hit another."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue  # gone meanwhile
        # The command name may hold spaces and parentheses: the fields follow its last ')'.
        if int(stat.rsplit(")", 1)[1].split()[1]) == me:
            found.append(int(entry))
    return found


def _reap() -> bool:
    """Collect every child that has ended; whether any child is left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def end_children(within_s: float = END_WITHIN_S) -> int:
    """Kill every process below this one, a generation at a time (the children of a killed process come here),
    and reap them; how many were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + within_s
    while _reap() and time.monotonic() < deadline:
        for pid in _children():
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        time.sleep(0.001)
    return len(killed)


def _wait_for(worker: int) -> int:
    """The worker's wait status; the other children reaped as they end meanwhile."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == worker:
            return status


def _exit_as(status: int) -> None:
    """End this process as the worker ended: its exit status, or its signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with suppress(OSError, ValueError):  # SIGKILL's action cannot be set, nor needs to be
            signal.signal(sig, signal.SIG_DFL)
        _prctl(PR_SET_DUMPABLE, 0)  # the worker dumped its core where the host keeps them: not a second one
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status))


def main(argv: list[str]) -> None:
    """Entry point (see the module's text)."""
    command = argv[argv.index("--") + 1 :] if "--" in argv else argv
    if not command:
        sys.exit("usage: supervise.py -- ARGV...")
    _prctl(PR_SET_CHILD_SUBREAPER, 1)  # refused (an old kernel): orphans go up as before
    # First for the kernel's OOM killer, with all below: a job that outgrows the host's memory goes before the
    # server. Any process may raise its own score.
    with suppress(OSError):
        with open("/proc/self/oom_score_adj", "w") as score:
            score.write(str(OOM_SCORE_ADJ))
    parent = os.getpid()
    worker = os.fork()
    if worker == 0:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # this process killed outright: the worker goes with it
        if os.getppid() != parent:
            os._exit(1)
        for sig in RESTORED:
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as error:
            os.write(2, f"cannot run {command[0]}: {error}\n".encode())
            os._exit(127)

    def forward(number: int, _frame: object) -> None:
        with suppress(ProcessLookupError):
            os.kill(worker, number)

    for sig in FORWARDED:
        signal.signal(sig, forward)
    status = _wait_for(worker)
    for sig in FORWARDED:  # the worker's pid is no longer its own
        signal.signal(sig, signal.SIG_IGN)
    end_children()
    _exit_as(status)


if __name__ == "__main__":
    main(sys.argv[1:])
