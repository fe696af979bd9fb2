"""A worker's exit after its status is timed: the status says when it was written, the server when the process
ended, on the one monotonic clock every process of the host shares."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profsvc.build.python_problem import HarnessStatus, harness_argv
from profsvc.config import ServerConfig
from profsvc.host import HostInfo
from profsvc.proc import StartedProcess
from profsvc.scheduler.scheduler import Scheduler
from profsvc.telemetry import Telemetry, collect_timings

ROOT = Path(__file__).resolve().parents[2]
# Writes its status, then takes EXIT_S more before it ends (as a worker's teardown would).
EXIT_S = 0.4
CHILD = f"""
import json, sys, time
with open(sys.argv[1], "w") as status:
    json.dump({{"ok": True, "stage": "running", "written_at": time.monotonic()}}, status)
time.sleep({EXIT_S})
"""


def test_the_exit_after_the_status_is_timed_across_processes(tmp_path):
    status_file = tmp_path / "status.json"

    async def run() -> float:
        process = await StartedProcess.start([sys.executable, "-c", CHILD, str(status_file)])
        result = await process.finish(60)
        status = HarnessStatus.read(status_file, returncode=result.returncode, timed_out=False, output="")
        seconds = status.seconds_to_exit(result.ended, result.seconds)
        assert seconds is not None
        return seconds

    # The child's sleep after its write, and at most the end of a small process and the server seeing it.
    assert EXIT_S <= asyncio.run(run()) < EXIT_S + 1.0


def test_an_exit_time_needs_both_ends_and_a_write_while_the_process_ran():
    status = HarnessStatus(ok=True, stage="running", written_at=100.0)
    assert status.seconds_to_exit(100.25, ran=2.0) == 0.25
    assert status.seconds_to_exit(0.0, ran=2.0) is None  # the end not seen
    assert status.seconds_to_exit(99.0, ran=2.0) is None  # written after the end: not the worker's own
    assert status.seconds_to_exit(103.0, ran=2.0) is None  # written before the process had its job
    assert HarnessStatus(ok=True, stage="running").seconds_to_exit(100.0, ran=2.0) is None  # not said


def test_the_exit_goes_into_the_jobs_timings_beside_its_phases(tmp_path):
    scheduler = Scheduler(ServerConfig(state_dir=tmp_path / "state"), HostInfo(gpus=[]), None, Telemetry())
    status = HarnessStatus(ok=True, stage="running", phases={"setup": 0.5}, written_at=100.0)
    with collect_timings() as timings:
        scheduler.record_phases("evaluate", status, ended=100.25, ran=1.0)
        scheduler.record_phases("profile", status, ended=0.0, ran=1.0)  # its end not seen: no exit
    recorded = {name: seconds for name, seconds in timings.items() if name != "total"}
    assert recorded == {"evaluate:setup": 0.5, "evaluate:exit": 0.25, "profile:setup": 0.5}


def test_a_process_killed_at_its_limit_has_no_end_seen():
    async def run() -> tuple[bool, float]:
        process = await StartedProcess.start([sys.executable, "-c", "import time; time.sleep(30)"])
        result = await process.finish(0.5)
        return result.timed_out, result.ended

    assert asyncio.run(run()) == (True, 0.0)


@pytest.mark.parametrize("written_at", ["1.0", True, [1.0]])
def test_a_malformed_write_time_is_not_said_and_the_status_stands(tmp_path, written_at):
    status_file = tmp_path / "status.json"
    status_file.write_text(json.dumps({"ok": True, "stage": "running", "written_at": written_at}))
    status = HarnessStatus.read(status_file, returncode=0, timed_out=False, output="")
    assert status.ok and status.written_at == 0.0


@pytest.mark.parametrize("module", ["harness", "judge"])
def test_the_workers_say_when_they_wrote_their_status(tmp_path, module):
    # Neither job can run here (the harness's problem does not exist, the judge has no channel to a candidate):
    # each still writes a status, the clock reading with it.
    status_file = tmp_path / "status.json"
    if module == "harness":
        argv = harness_argv(sys.executable, tmp_path / "absent.py", None, tmp_path / "cache", status_file, "compile")
    else:
        argv = [sys.executable, "-m", "profsvc.worker.judge", "--reference", str(tmp_path / "absent.py")]
        argv += ["--cache", str(tmp_path / "cache"), "--status", str(status_file), "--mode", "evaluate"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "client")])}
    before = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    after = time.monotonic()
    status = json.loads(status_file.read_text())
    assert not status["ok"], done.stderr
    assert before < status["written_at"] < after
