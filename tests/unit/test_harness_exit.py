"""The worker harness ends a job without Python's teardown, keeping what the job printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import atexit, ctypes, sys
from profsvc.worker.harness import exit_without_teardown
atexit.register(lambda: print("teardown ran", flush=True))
sys.stdout.write("from python, no newline")
ctypes.CDLL(None).printf(b" and from C's stdio")
exit_without_teardown(3)
"""


def test_exit_without_teardown_keeps_the_output_and_skips_the_teardown():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # it unbuffers C's stdio as well
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "client")])
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "from python, no newline and from C's stdio"


PROBLEM = """
import atexit
import torch
atexit.register(lambda: print("teardown ran", flush=True))

class Model(torch.nn.Module):
    def forward(self, x):
        return x

ModelNew = Model

def get_inputs():
    return [torch.ones(4)]

def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("mode", ["compile", "profile"])
def test_no_job_exits_through_pythons_teardown(tmp_path, mode):
    # The problem's own atexit handler shows whether Python's teardown ran. On this machine the profile job
    # fails (no GPU); under ncu its report keeps every metric all the same (tools/exit_cost.py).
    pytest.importorskip("torch")
    from profsvc.build.python_problem import harness_argv

    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM)
    status = tmp_path / "status.json"
    argv = harness_argv(sys.executable, problem, None, tmp_path / "cache", status, mode)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "client")])}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert json.loads(status.read_text())["ok"] is (mode == "compile")
    assert "teardown ran" not in done.stdout
