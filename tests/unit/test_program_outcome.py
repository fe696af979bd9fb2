"""A Python program that profiles nothing: the launcher's real status and output, told in one line naming why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from profsvc.build.python_problem import HarnessStatus
from profsvc.ncu.command import NcuOptions
from profsvc.ncu.runner import NcuOutcome
from profsvc.scheduler.program_outcome import program_failure, program_tail

# What ncu prints when its filter let no kernel through (Nsight Compute CLI guide).
NO_KERNELS = "==WARNING== No kernels were profiled.\n"
OPTIONS = NcuOptions(collection_args=(), export_path=Path("r.ncu-rep"), nvtx_include=("regex:.+/", "regex:.+@.+/"))


def _launch(tmp_path: Path, text: str, *args: str) -> tuple[HarnessStatus, NcuOutcome]:
    """Run the program through profsvc's launcher (no ncu: nothing to profile on this machine) and read back
    its status and output as the scheduler does."""
    program = tmp_path / "prog.py"
    program.write_text(text)
    status_path = tmp_path / "status.json"
    launcher = [sys.executable, "-m", "profsvc.worker.program", "--status", str(status_path)]
    command = [*launcher, "--cache", str(tmp_path / "cache"), "--", str(program), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    # ncu passes the program's output through, its own lines among it.
    stdout = "==PROF== Connected to process 4242 (/usr/bin/python3.12)\n" + done.stdout + NO_KERNELS
    outcome = NcuOutcome(
        command=[], returncode=done.returncode, seconds=0.1, timed_out=False, no_kernels=True,
        output_tail=stdout + "\n" + done.stderr,
    )  # fmt: skip
    status = HarnessStatus.read(status_path, returncode=done.returncode, timed_out=False, output=done.stderr)
    return status, outcome


def test_a_program_that_exits_non_zero_says_its_status_and_last_output(tmp_path):
    status, outcome = _launch(tmp_path, 'import sys\nprint("loading")\nsys.exit("no data in /data/train")\n')
    error = program_failure("prog.py", outcome, status, OPTIONS, default_selection=True)
    assert error is not None and error.kind == "program_exit"
    assert error.message == "prog.py exited with status 1 (last output: 'no data in /data/train')"
    assert error.detail.endswith("the program's last lines of output:\nloading\nno data in /data/train")
    assert "==" not in error.detail  # ncu's own lines are not the program's


def test_a_program_that_raises_is_located_in_its_file(tmp_path):
    status, outcome = _launch(tmp_path, "def main():\n    raise ValueError('bad shape')\n\nmain()\n")
    error = program_failure("prog.py", outcome, status, OPTIONS, default_selection=True)
    assert error is not None and error.kind == "runtime_error"
    assert error.message.startswith("ValueError: bad shape (prog.py line 2, in main)")
    assert error.message.endswith("(last output: 'ValueError: bad shape')")
    assert "\n" not in error.message


def test_a_program_that_never_opens_its_range_says_so(tmp_path):
    text = (
        "import sys\nimport nvtx\n\n"
        "if '--profile' in sys.argv:\n"
        "    with nvtx.annotate('step', domain='train'):\n"
        "        pass\n"
        "print('done without --profile')\n"
    )
    status, outcome = _launch(tmp_path, text)
    assert (status.ok, status.nvtx_range_count) == (True, 0)
    error = program_failure("prog.py", outcome, status, OPTIONS, default_selection=True)
    assert error is not None and error.kind == "nvtx_range_not_reached"
    assert error.message == (
        "prog.py ran to its end without opening an NVTX range, so nothing was profiled"
        " (selected: any NVTX range it marks) (last output: 'done without --profile')"
    )


def test_a_program_that_opens_its_ranges_but_launches_nothing_that_matches(tmp_path):
    text = (
        "import nvtx\n\n"
        "@nvtx.annotate('step', domain='train')\n"
        "def step():\n"
        "    return 1\n\n"
        "for _ in range(3):\n"
        "    step()\n"
        "with nvtx.annotate('eval'):\n"
        "    step()\n"
        "nvtx.push_range('tail')\n"
        "nvtx.pop_range()\n"
    )
    status, outcome = _launch(tmp_path, text, "--profile")
    # Counted through the program's own calls: three decorated calls and one nested in `eval`, `eval`, `tail`.
    assert (status.nvtx_range_count, status.nvtx_ranges) == (6, ["train@step", "eval", "tail"])
    options = NcuOptions(collection_args=(), export_path=Path("r"), nvtx_include=("train@step/",), name_regex="gemm")
    error = program_failure("prog.py", outcome, status, options, default_selection=False)
    assert error is not None and error.kind == "no_kernels_profiled"
    assert error.message == (
        "prog.py opened NVTX ranges (train@step, eval, tail) but launched no kernel that matches --kernel 'gemm'"
        " inside the selected ones (NVTX ranges train@step/); nothing was profiled"
    )
    assert error.detail == "the program printed nothing"


def test_a_program_without_ranges_that_launches_nothing_that_matches(tmp_path):
    status, outcome = _launch(tmp_path, "print('ran')\n")
    options = NcuOptions(collection_args=(), export_path=Path("r"), name_regex="softmax")
    error = program_failure("prog.py", outcome, status, options, default_selection=True)
    assert error is not None and error.kind == "no_kernels_profiled"
    assert error.message == (
        "prog.py launched no kernel that matches --kernel 'softmax'; nothing was profiled (last output: 'ran')"
    )


def test_a_cuda_programs_exit_status_comes_from_ncu_and_ncus_own_failure_stays_ncus():
    outcome = NcuOutcome(command=[], returncode=3, seconds=0.1, timed_out=False, output_tail="cannot open input\n")
    error = program_failure("saxpy.cu", outcome, None, OPTIONS, default_selection=True)
    assert error is not None and error.message == "saxpy.cu exited with status 3 (last output: 'cannot open input')"
    failed = NcuOutcome(
        command=[], returncode=1, seconds=0.1, timed_out=False, errors=["ERR_NVGPUCTRPERM"],
        output_tail="==ERROR== ERR_NVGPUCTRPERM\n",
    )  # fmt: skip
    assert program_failure("saxpy.cu", failed, None, OPTIONS, default_selection=True) is None


@pytest.mark.parametrize(
    ("output", "tail"),
    [
        ('==PROF== Connected\nstep 1\n==PROF== Profiling "k" - 0: 0%....100% - 9 passes\nstep 2\n', "step 1\nstep 2"),
        ("==PROF== Disconnected\n", ""),
        # As ncu 2025.3 ends a run whose --kernel-name matched nothing (seen on an H200).
        (
            "rows 4096\n==WARNING== No kernels were profiled.\nAvailable Kernels:\n"
            "1. sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma\n"
            "2. softmax_warp_forward\n",
            "rows 4096",
        ),
        ("1. step one\n2. step two\n", "1. step one\n2. step two"),
    ],
)
def test_the_programs_tail_leaves_ncus_lines_out(output, tail):
    assert program_tail(output) == tail
