"""A job's clock: the judge's phases timed into its status (profsvc.worker.judge), and nothing imported on it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

from profsvc.build.python_problem import HARNESS_PHASES
from profsvc.worker.control import ControlChannel
from profsvc.worker.exchange import load
from profsvc.worker.judge import CandidateProcess
from profsvc.worker.warm import WARM_PROFILER

ANSWER_AFTER_S = 0.3


def _server(end: socket.socket, cell: Path, seen: list[object]) -> None:
    """The server's side of one request: read the tensors the judge named, answer after a while."""
    request = json.loads(end.makefile("rb").readline())
    seen.extend(load(cell / name, torch) for name in request["files"])
    time.sleep(ANSWER_AFTER_S)
    end.sendall(json.dumps({"result": {"ok": True}, "files": []}).encode() + b"\n")


def test_the_judge_times_what_it_writes_for_the_candidate_and_its_wait_for_the_answer(tmp_path: Path):
    ours, theirs = socket.socketpair()
    seen: list[object] = []
    server = threading.Thread(target=_server, args=(theirs, tmp_path, seen))
    server.start()
    status: dict = {}
    candidate = CandidateProcess(ControlChannel(ours.detach()), tmp_path, torch, status)
    weights = torch.arange(1 << 22, dtype=torch.float32)
    candidate.init([weights], seed=1, precision="fp32")
    server.join()
    assert torch.equal(seen[0][0], weights)  # type: ignore[index]
    # The wait holds the server's pause; the exchange, 16 MiB written, is its own part and not in the wait.
    phases = status["phases"]
    assert phases["candidate_wait"] >= ANSWER_AFTER_S
    assert 0 < phases["exchange"] < phases["candidate_wait"]
    assert set(phases) <= set(HARNESS_PHASES)


def test_the_judges_own_work_imports_nothing_on_the_jobs_clock():
    # A warm judge (and a candidate's warm process) has imported its module before its job; whatever the job then
    # imports is on its clock: the contract's models, imported when the candidate's timing was first read, and
    # numpy's generator and masked arrays, at the first summary (0.15 s and 0.03 s on a 2-core machine).
    probe = (
        "import sys, torch\n"
        "from profsvc.worker import candidate, judge\n"
        "before = set(sys.modules)\n"
        "from profsvc.worker.correctness import compare_all, flatten\n"
        "from profsvc.worker.precision import tolerances\n"
        "from profsvc.worker.stats import ratio_interval, summarize\n"
        "times = [10.0, 11.0, 12.0]\n"
        "timing = {'events': summarize(times), 'wall': summarize(times), 'kernels': summarize(times),\n"
        "          'launches_per_call': 1, 'launch_records': [], 'peak_memory_bytes': 0,\n"
        "          '_events_us': times, '_wall_us': times, '_kernel_sum_us': 9.0}\n"
        "assert judge._timing(timing)['launches_per_call'] == 1\n"
        "assert ratio_interval(times, times)[0] > 0\n"
        "out = flatten(torch.ones(4), torch)\n"
        "assert compare_all(out, out, torch, tolerances('fp32'))['ok']\n"
        "print(sorted(set(sys.modules) - before))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_warm_worker_under_ncu_imports_the_measured_calls_range_before_its_job():
    probe = (
        "import sys\n"
        "from profsvc.worker.harness import warm_gpu\n"
        "assert 'nvtx' not in sys.modules\n"
        "warm_gpu()\n"
        "print('nvtx' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    for profiler, expected in (("1", "True"), ("", "False")):
        done = subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, WARM_PROFILER: profiler},
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == expected
