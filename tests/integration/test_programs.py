"""Published problems and Python programs over a real server on loopback: what a server without a GPU can answer.

Validation (which verbs each takes, syntax, arguments), the compile of a program and of a published
problem, and a profile refused for want of a GPU, through the CLI and the Python client as users call them.
tests/gpu/test_programs_gpu.py and tests/gpu/test_published_gpu.py profile them on a GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from profsvc_client.client import load_source
from profsvc_contract import errors
from profsvc_contract.models import KernelSource, SourceFile, SourceKind, Target
from tests.conftest import HAS_GPU, run_cli

no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the answer of a server without a GPU")
PROBLEMS = Path(__file__).parents[1] / "problems"
RELU = PROBLEMS / "level1" / "009_relu.py"
PROGRAM = b"""import sys

import nvtx
import torch

steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 2
x = torch.randn(1 << 20, device="cuda")
for _ in range(steps):
    with nvtx.annotate("step", domain="demo"):
        x = torch.relu(x) * 2
print(float(x.sum()))
"""


def _program(tmp_path: Path, text: bytes = PROGRAM, name: str = "prog.py") -> Path:
    path = tmp_path / name
    path.write_bytes(text)
    return path


def _one_line(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.mark.parametrize("verb", ["check", "time", "evaluate", "lint"])
def test_a_program_is_refused_by_the_verbs_that_judge(served, tmp_path, verb):
    done = run_cli(verb, _program(tmp_path), "--server", served)
    assert done.returncode == 2
    line = _one_line(done)
    assert "prog.py is a Python program" in line and "BAD_SOURCE_KIND" in line


def test_a_programs_syntax_error_names_its_line(served, tmp_path):
    done = run_cli("profile", _program(tmp_path, b"import torch\nfor x in\n"), "--server", served)
    assert done.returncode == 2
    line = _one_line(done)
    assert "prog.py:2:" in line and "SYNTAX_ERROR" in line


def test_a_program_compiles_on_a_server_without_a_gpu(served, tmp_path):
    done = run_cli("compile", _program(tmp_path), "--server", served)
    assert done.returncode == 0, done.stderr


def test_a_programs_arguments_are_bounded_over_the_wire(client):
    source = KernelSource(main=SourceFile(name="prog.py", content=PROGRAM), args=["--steps", "a\0b"])
    with pytest.raises(errors.InvalidRequest, match="NUL"):
        client.profile(source)


@no_gpu_only
def test_a_program_profile_is_refused_without_a_gpu_with_its_arguments(served, tmp_path):
    done = run_cli("profile", _program(tmp_path), "--server", served, "--", "--steps", "3")
    assert done.returncode == 3
    assert "NO_GPU" in _one_line(done)


@no_gpu_only
def test_a_programs_nvtx_filter_in_full_syntax_is_taken_then_refused_only_for_want_of_a_gpu(served, tmp_path):
    program = _program(tmp_path)
    command = ["--nvtx-include", "demo@step/", "--nvtx-include", "regex:de.o@st.p/", "--server", served]
    done = run_cli("profile", program, *command)
    assert done.returncode == 3 and "NO_GPU" in _one_line(done)
    bad = run_cli("profile", program, "--nvtx-include", "demo@/", "--server", served)
    assert bad.returncode == 2 and "names no range" in _one_line(bad)


def test_a_published_problem_compiles_and_cannot_be_checked(served):
    assert run_cli("compile", RELU, "--server", served).returncode == 0
    done = run_cli("check", RELU, "--server", served)
    assert done.returncode == 2
    line = _one_line(done)
    assert "009_relu.py defines no ModelNew" in line and "MISSING_SYMBOL" in line
    told = run_cli("profile", RELU, "--target", "candidate", "--server", served)
    assert told.returncode == 2 and "defines no ModelNew" in _one_line(told)


@no_gpu_only
@pytest.mark.parametrize("verb", ["profile", "time"])
def test_a_published_problem_is_refused_only_for_want_of_a_gpu(served, verb):
    done = run_cli(verb, RELU, "--server", served)
    assert done.returncode == 3 and "NO_GPU" in _one_line(done)


@no_gpu_only
def test_the_client_sends_a_program_as_a_program_and_the_target_as_asked(client, tmp_path):
    source = load_source(_program(tmp_path))
    with pytest.raises(errors.PreconditionFailed) as caught:
        client.profile(source.model_copy(update={"kind": SourceKind.PYTHON_PROGRAM}))
    assert caught.value.reason == errors.Reason.NO_GPU
    published = load_source(RELU).model_copy(update={"target": Target.REFERENCE})
    with pytest.raises(errors.PreconditionFailed):
        client.benchmark(published)
