"""A module that uses the GPU at import compiles on a server's CPU-only compile step.

The compile step imports the module without a GPU (it must not hold one); a module that makes a CUDA stream or a
tensor on the device at import failed there with "no CUDA-capable device". Its import now happens in the GPU job;
an error of the module's own still fails the compile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBLEM = """
import torch

{line}

class Model(torch.nn.Module):
    def forward(self, x):
        return x

ModelNew = Model

def get_inputs():
    return [torch.ones(4)]

def get_init_inputs():
    return []
"""


def _compile(tmp_path: Path, line: str) -> dict:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("on a machine with a GPU the module imports without error")
    from profsvc.build.python_problem import harness_argv

    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM.format(line=line))
    status = tmp_path / "status.json"
    argv = harness_argv(sys.executable, problem, None, tmp_path / "cache", status, "compile")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "client")])}
    subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    return json.loads(status.read_text())


def test_a_stream_made_at_import_compiles_and_says_its_import_waits_for_the_gpu(tmp_path):
    status = _compile(tmp_path, "_COPY_STREAM = torch.cuda.Stream()")
    assert status["ok"], status
    (warning,) = status["warnings"]
    assert "needs CUDA at import, which this compile step lacks" in warning and "problem.py" in warning


def test_an_error_of_the_modules_own_at_import_still_fails_the_compile(tmp_path):
    status = _compile(tmp_path, "_SIZE = undefined_name + 1")
    assert not status["ok"]
    assert status["kind"] == "import_error" and "undefined_name" in status["message"]
