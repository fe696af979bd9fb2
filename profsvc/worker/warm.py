"""Warm workers: a worker process that pays its start-up before a job arrives, then runs exactly one job.

Started as `python -m profsvc.worker.<module> --standby DIR --server-pid PID`, it
imports what its kind needs (torch, a CUDA context, the report reader), writes
DIR/ready and waits on the FIFO DIR/job for one line of JSON from the server:
{"argv": [...], "cwd": "...", "stdin": "..."}. It then runs that job exactly as
a process started with that argv would (stdin included: the secret seed
arrives that way), and exits. One process per job, as for a cold start: user
code never shares a process with another job.

A worker under ncu warms up in two steps. ncu's first profiled kernel in a
process costs more than the next (0.65 s one at a time, tools/gpu_overhead.py;
more in an agent's loop, below), so the worker profiles one kernel of its own
before its job; but kernels profiled by
two ncu processes on one GPU wait for each other, so it does that only when the
server says the GPU is free: it writes DIR/loaded, waits for the line
{"prime": true}, profiles its kernel, and only then writes DIR/ready. A job
that arrives first (its line instead of the prime's) runs at once, unprimed:
priming costs all of the metric set's passes on a kernel of its own plus that
first-kernel cost (1.9 to 2.4 s on an H200 in an agent's loop), where the job's
own first kernel then pays only the latter (1.1 to 1.6 s there).
"""

from __future__ import annotations

import io
import json
import os
import select
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

READY = "ready"
LOADED = "loaded"
CHANNEL = "job"
PRIME = {"prime": True}
# Set in a warm GPU worker's environment when it is not under ncu: it may start cuBLAS and CUPTI too.
WARM_LIBRARIES = "PROFSVC_WARM_LIBRARIES"
# Set in a warm worker's environment when it runs under ncu: it warms up in two steps (see above).
WARM_PROFILER = "PROFSVC_WARM_PROFILER"
# How often a waiting worker checks that the server that started it is still there.
LIFELINE_S = 1.0


def pid_alive(pid: int) -> bool:
    """True while a process with this pid exists (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process
    return True


def split_standby_args(argv: list[str]) -> tuple[Path, int] | None:
    """(DIR, server pid) when argv is `--standby DIR --server-pid PID`, else None."""
    if len(argv) == 4 and argv[0] == "--standby" and argv[2] == "--server-pid":
        return Path(argv[1]), int(argv[3])
    return None


class Channel:
    """The FIFO the server writes to, read one line at a time (a line may arrive in pieces)."""

    def __init__(self, directory: Path, server_pid: int) -> None:
        # Opened read-write: our own write end keeps reads blocking until the server writes (no EOF race).
        self.fd = os.open(directory / CHANNEL, os.O_RDWR)
        self.directory = directory
        self.server_pid = server_pid
        self.pending = b""

    def line(self) -> dict[str, Any]:
        """The server's next message (exits when the server goes away first, or discards this worker)."""
        while b"\n" not in self.pending:
            readable, _, _ = select.select([self.fd], [], [], LIFELINE_S)
            if readable:
                self.pending += os.read(self.fd, 65536)
            elif not pid_alive(self.server_pid) or not self.directory.is_dir():
                # A discarded worker's directory is gone: exit even where the kill missed this process.
                sys.exit(0)
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)


def announce(marker: Path, content: str | None = None) -> None:
    """Create `marker` holding `content` (by default this pid), all at once: whoever sees the file sees it."""
    partial = marker.with_name(marker.name + ".partial")
    partial.write_text(str(os.getpid()) if content is None else content)
    partial.replace(marker)


def wait_for_job(
    directory: Path, server_pid: int, warm: Callable[[], None], prime: Callable[[], None] | None = None
) -> list[str]:
    """Warm up, say so, wait for one job, and return its argv (exits when the server goes away first).

    With `prime` (a worker under ncu): after `warm`, say `loaded` and run `prime` once the server says so,
    unless the job comes first.
    """
    warm()
    channel = Channel(directory, server_pid)
    job: dict[str, Any] | None = None
    if prime is not None:
        announce(directory / LOADED)
        job = channel.line()
        if job == PRIME:
            prime()
            job = None
    if job is None:
        announce(directory / READY)
        job = channel.line()
    os.close(channel.fd)
    os.chdir(job["cwd"])
    sys.stdin = io.StringIO(job.get("stdin", ""))
    return [str(a) for a in job["argv"]]


def job_argv(argv: list[str] | None, warm: Callable[[], None], prime: Callable[[], None] | None = None) -> list[str]:
    """A worker's own arguments: its command line's, or, for a warm worker, its job's once it arrives.

    `prime` runs only in a worker whose environment sets WARM_PROFILER (see above).
    """
    argv = sys.argv[1:] if argv is None else argv
    standby = split_standby_args(argv)
    if standby is None:
        return argv
    two_steps = prime if os.environ.get(WARM_PROFILER) == "1" else None
    return wait_for_job(*standby, warm=warm, prime=two_steps)
