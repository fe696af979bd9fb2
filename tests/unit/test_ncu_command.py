"""The exact ncu command line, and parsing of ncu's progress output (no GPU needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profsvc.ncu.command import NcuOptions, marks_nvtx_ranges, ncu_command
from profsvc.ncu.runner import NcuProgress, ProgressParser
from profsvc_contract.models import ClockControl

# ncu 2025.3's `--clock-control {base,none,reset}` (Nsight Compute CLI guide; `boost` and `force-boost` came with
# 2025.4): the values it takes, written down apart from profsvc's own list.
NCU_CLOCK_CONTROL = {"base", "none", "reset"}


def test_python_problem_command():
    options = NcuOptions(
        collection_args=("--set", "full", "--import-source", "yes"),
        export_path=Path("/j/report.ncu-rep"),
        nvtx_include=("profsvc/",),
        launch_count=64,
    )
    argv = ncu_command("/usr/bin/ncu", options, ["python", "-m", "profsvc.worker.harness"])
    assert argv == [
        "/usr/bin/ncu", "--config-file", "off", "--clock-control", "none", "--cache-control", "all",
        "--replay-mode", "kernel", "--target-processes", "all",
        "--nvtx", "--nvtx-include", "profsvc/",
        "--launch-count", "64",
        "--set", "full", "--import-source", "yes",
        "--export", "/j/report.ncu-rep", "--force-overwrite",
        "python", "-m", "profsvc.worker.harness",
    ]  # fmt: skip


def _clock_control(argv: list[str]) -> str:
    assert argv.count("--clock-control") == 1
    return argv[argv.index("--clock-control") + 1]


def test_clocks_are_left_alone_unless_asked():
    argv = ncu_command("ncu", NcuOptions(collection_args=(), export_path=Path("r")), ["./program"])
    assert _clock_control(argv) == "none"


@pytest.mark.parametrize("choice", ClockControl.choices())
def test_every_clock_control_a_request_may_name_reaches_ncu_as_a_value_it_takes(choice):
    options = NcuOptions(collection_args=(), export_path=Path("r"), clock_control=ClockControl(choice))
    argv = ncu_command("ncu", options, ["./program"])
    assert _clock_control(argv) == choice
    assert choice in NCU_CLOCK_CONTROL
    # An option of ncu's, before the profiled program's own arguments.
    assert argv.index("--clock-control") < argv.index("./program")


def test_kernel_filter_flags():
    options = NcuOptions(collection_args=(), export_path=Path("r"), name_regex="gemm.*", launch_skip=2, launch_count=1)
    argv = ncu_command("ncu", options, ["./program"])
    assert argv[argv.index("--kernel-name") + 1] == "regex:gemm.*"
    assert argv[argv.index("--launch-skip") + 1] == "2"
    assert "--nvtx" not in argv


def test_nvtx_use_is_detected_in_cuda_sources():
    assert marks_nvtx_ranges('nvtxRangePushA("x");')
    assert marks_nvtx_ranges('nvtx3::scoped_range r{"x"};')
    assert not marks_nvtx_ranges("int main() { return 0; }")


def test_progress_and_pass_counts_from_streamed_output():
    events: list[NcuProgress] = []
    parser = ProgressParser(events.append)
    for chunk in [
        "==PROF== Connected to process 846 (/usr/bin/python3.12)\n",
        '==PROF== Profiling "vga_linear_kernel" - 0: 0%',
        "....50%",
        "....100% - 38 passes\n",
        '==PROF== Profiling "relu2_k" - 1: 0%....50%....100% - 37 passes\n',
        "==PROF== Disconnected from process 846\n",
    ]:
        parser.feed(chunk)
    assert parser.passes == [38, 37]
    assert [e.percent for e in events if e.kernel_index == 1] == [0, 50, 100]
    assert events[-1] == NcuProgress(kernel_index=2, kernel_name="relu2_k", percent=100, passes=37)


def test_a_primed_workers_own_kernel_is_left_out_of_passes_and_progress():
    # The worker's own kernel (ncu's 0) may reach the parser or not, depending on when the job's listener came.
    events: list[NcuProgress] = []
    parser = ProgressParser(events.append, skip_kernels=1)
    for chunk in [
        '==PROF== Profiling "spin_kernel" - 0: 0%....50%....100% - 27 passes\n',
        '==PROF== Profiling "vga_linear_kernel" - 1: 0%....100% - 27 passes\n',
        '==PROF== Profiling "relu2_k" - 2: 0%',
    ]:
        parser.feed(chunk)
    parser.feed("....100% - 26 passes\n")
    assert parser.passes == [27, 26]
    assert {e.kernel_name for e in events} == {"vga_linear_kernel", "relu2_k"}
    assert events[0].kernel_index == 1 and events[-1] == NcuProgress(
        kernel_index=2, kernel_name="relu2_k", percent=100, passes=26
    )
