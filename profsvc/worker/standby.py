"""Warm workers: a worker process that pays its start-up before a job arrives, then runs exactly one job.

Started as `python -m profsvc.worker.<module> --standby DIR --server-pid PID`, it
imports what its kind needs (torch, a CUDA context, the report reader), writes
DIR/ready and waits on the FIFO DIR/job for one line of JSON from the server:
{"argv": [...], "cwd": "...", "stdin": "..."}. It then runs that job exactly as
a process started with that argv would (stdin included: the secret seed
arrives that way), and exits. One process per job, as for a cold start: user
code never shares a process with another job.
"""

from __future__ import annotations

import io
import json
import os
import select
import sys
from collections.abc import Callable
from pathlib import Path

READY = "ready"
CHANNEL = "job"
# Set in a warm GPU worker's environment when it is not under ncu: it may start cuBLAS and CUPTI too.
WARM_LIBRARIES = "PROFSVC_WARM_LIBRARIES"
# How often a waiting worker checks that the server that started it is still there.
LIFELINE_S = 1.0


def _server_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def split_standby_args(argv: list[str]) -> tuple[Path, int] | None:
    """(DIR, server pid) when argv is `--standby DIR --server-pid PID`, else None."""
    if len(argv) == 4 and argv[0] == "--standby" and argv[2] == "--server-pid":
        return Path(argv[1]), int(argv[3])
    return None


def wait_for_job(directory: Path, server_pid: int, warm: Callable[[], None]) -> list[str]:
    """Warm up, say so, wait for one job, and return its argv (exits when the server goes away first)."""
    warm()
    # Opened read-write: our own write end keeps reads blocking until the server writes (no EOF race).
    channel = os.open(directory / CHANNEL, os.O_RDWR)
    (directory / READY).write_text(str(os.getpid()))
    data = b""
    while not data.endswith(b"\n"):
        readable, _, _ = select.select([channel], [], [], LIFELINE_S)
        if readable:
            data += os.read(channel, 65536)
        elif not _server_alive(server_pid):
            sys.exit(0)
    os.close(channel)
    job = json.loads(data)
    os.chdir(job["cwd"])
    sys.stdin = io.StringIO(job.get("stdin", ""))
    return [str(a) for a in job["argv"]]


def job_argv(argv: list[str] | None, warm: Callable[[], None]) -> list[str]:
    """A worker's own arguments: its command line's, or, for a warm worker, its job's once it arrives."""
    argv = sys.argv[1:] if argv is None else argv
    standby = split_standby_args(argv)
    return argv if standby is None else wait_for_job(*standby, warm=warm)
