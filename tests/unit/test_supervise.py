"""The supervisor every job process starts under: whatever the job's code left behind ends with the job.

Each case runs `python -S profsvc/worker/supervise.py -- python -c CODE` as the server does, with a worker that
forks a daemon the way the jail's attack suite does (fork, setsid, fork, exec `sleep`), and looks for that
daemon afterwards by its unique sleep time. Expected exits come from POSIX: a process's exit status, or minus
the signal that ended it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from profsvc.scheduler.cells import SUPERVISOR, supervised
from tests.conftest import processes_with

DAEMON = """
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        quiet = os.open(os.devnull, os.O_RDWR)  # a daemon lets go of its caller's output
        for fd in (0, 1, 2):
            os.dup2(quiet, fd)
        os.execvp("sleep", ["sleep", SECONDS])
    os._exit(0)
os.wait()
"""


def _marker() -> str:
    return f"{uuid.uuid4().int % 10**6}.75"  # a sleep's seconds no other process has


@pytest.fixture
def marker():
    seconds = _marker()
    yield seconds
    for pid in processes_with(seconds):
        os.kill(pid, signal.SIGKILL)


def _run(code: str, marker: str, **kwargs) -> subprocess.CompletedProcess:
    worker = f"SECONDS = {marker!r}\n" + code
    return subprocess.run(supervised(sys.executable, [sys.executable, "-c", worker]), timeout=60, **kwargs)


def test_the_supervisor_is_a_file_the_server_starts_without_the_package():
    assert SUPERVISOR.is_file() and SUPERVISOR.name == "supervise.py"
    done = subprocess.run([sys.executable, "-S", "-I", str(SUPERVISOR), "--", "true"], timeout=30)
    assert done.returncode == 0


def test_a_daemon_the_worker_forked_ends_with_it_and_the_exit_is_the_workers(marker):
    done = _run(DAEMON + "sys.exit(3)\n", marker, capture_output=True)
    assert done.returncode == 3, done.stderr
    assert not processes_with(marker)


def test_without_the_supervisor_the_daemon_outlives_the_worker(marker):
    # The reason for it: the same worker run directly leaves its daemon behind.
    worker = f"SECONDS = {marker!r}\n" + DAEMON
    subprocess.run([sys.executable, "-c", worker], timeout=60, check=True)
    assert len(processes_with(marker)) == 1


def test_a_worker_that_ends_by_os_exit_or_a_signal_still_leaves_nothing(marker):
    done = _run(DAEMON + "os._exit(7)\n", marker)
    assert done.returncode == 7 and not processes_with(marker)
    for sig in (signal.SIGSEGV, signal.SIGKILL):  # a fault; the memory limit's kill
        done = _run(DAEMON + f"os.kill(os.getpid(), {int(sig)})\n", marker, capture_output=True, text=True)
        assert done.returncode == -sig and not done.stderr and not processes_with(marker), (sig, done.stderr)


def test_the_worker_starts_with_the_signals_python_ignores_restored():
    # Python ignores SIGPIPE and SIGXFSZ and exec keeps that: `yes | head` would say "Broken pipe".
    done = subprocess.run(
        supervised(sys.executable, ["sh", "-c", "grep SigIgn /proc/$$/status; yes | head -1"]),
        capture_output=True,
        text=True,
        timeout=30,
    )
    ignored = int(done.stdout.split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1)) and not ignored & (1 << (signal.SIGXFSZ - 1)), done.stdout
    assert done.stdout.split()[2] == "y" and "Broken pipe" not in done.stderr, done


def test_a_pool_left_open_shuts_down_as_python_does_it(marker):
    # Killing the pool's workers from inside the worker would leave its queue lock held and Python's exit waiting.
    code = "import multiprocessing as mp\npool = mp.Pool(2)\nassert pool.map(abs, [-1, -2]) == [1, 2]\n"
    start = time.monotonic()
    done = _run(DAEMON + code, marker, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 30 and not processes_with(marker)


def test_stdin_and_the_output_pass_through():
    done = subprocess.run(
        supervised(sys.executable, [sys.executable, "-c", "print(input()[::-1])"]),
        input="deed-123",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0 and done.stdout == "321-deed\n"


def test_a_termination_reaches_the_worker():
    process = subprocess.Popen(
        supervised(sys.executable, [sys.executable, "-c", "import time\nprint('up', flush=True)\ntime.sleep(60)"]),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline() == "up\n"
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == -signal.SIGTERM


def test_a_command_that_cannot_run_says_so():
    done = subprocess.run(
        supervised(sys.executable, ["/nonexistent/program"]), capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 127 and "cannot run /nonexistent/program" in done.stderr


def test_a_job_goes_first_for_the_kernels_oom_killer_with_all_it_starts():
    # proc(5): oom_score_adj ranges -1000 to 1000; 1000 makes a process the first the OOM killer chooses.
    reads = "import subprocess\nprint(subprocess.run(['cat', '/proc/self/oom_score_adj'], capture_output=True).stdout)"
    done = subprocess.run(
        supervised(sys.executable, [sys.executable, "-c", reads]), capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0 and done.stdout.strip() == "b'1000\\n'", done.stdout
