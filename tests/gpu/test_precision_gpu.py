"""Precision modes and clock control on a GPU: a problem evaluated in fp16 and bf16, profiled with base clocks.

The problem (examples/scale_gain.py): its model has a weight and a buffer; the candidate's own kernel takes any
floating dtype but refuses operands of different dtypes, so it passes only where the inputs and both models'
weights and buffers were all cast to the precision.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from profsvc_client.client import ProfilerClient, load_source
from profsvc_contract.models import ClockControl, Precision

pytestmark = pytest.mark.gpu

SOURCE = load_source(Path(__file__).parents[2] / "examples" / "scale_gain.py")
# The kernel's template argument for each mode, as the profiled launch's demangled name spells it.
SCALAR = {Precision.FP16: "c10::Half", Precision.BF16: "c10::BFloat16"}
# KernelBench's atol = rtol for fp16 and bf16 (src/kernelbench/eval.py, get_tolerance_for_precision).
KERNELBENCH_HALF_TOLERANCE = 1e-2


@pytest.fixture(scope="module")
def tools(served):
    with ProfilerClient(served, timeout=900) as client:
        yield client


def _clock_control(command: str) -> str:
    words = command.split()
    return words[words.index("--clock-control") + 1]


@pytest.mark.parametrize(
    ("precision", "clock_control"),
    [(Precision.FP16, ClockControl.BASE), (Precision.BF16, ClockControl.NONE)],
    ids=["fp16-base", "bf16-none"],
)
def test_an_evaluation_runs_in_its_precision_and_states_it(tools, precision, clock_control):
    result = tools.evaluate(SOURCE, precision=precision, clock_control=clock_control)
    assert result.precision is result.correctness.precision is result.benchmark.precision is precision
    assert result.correctness.ok, (result.correctness.message, result.correctness.error)
    assert {(t.atol, t.rtol) for t in result.correctness.tolerances} == {(KERNELBENCH_HALF_TOLERANCE,) * 2}
    assert result.benchmark.ok and result.benchmark.speedup is not None, result.benchmark.error
    assert f"correctness PASSED ({precision.value})" in result.report_text
    # The profiled call ran in the same precision: the kernel instantiated for its dtype.
    profile = result.profile
    assert profile.ok, profile.error
    assert SCALAR[precision] in profile.kernels[0].demangled_name, profile.kernels[0].demangled_name
    assert profile.ncu.clock_control is clock_control
    assert _clock_control(profile.ncu.command) == clock_control.value


def test_the_default_precision_is_fp32_with_the_tolerances_by_dtype(tools):
    result = tools.check_correctness(SOURCE)
    assert result.ok and result.precision is Precision.FP32, result.message
    assert {t.dtype: t.atol for t in result.tolerances}["float32"] == 1e-3


def test_timing_alone_states_its_precision(tools):
    timing = tools.benchmark(SOURCE, precision="bf16")
    assert timing.ok and timing.precision is Precision.BF16, timing.error
    assert "candidate (bf16): median" in timing.report_text


@pytest.mark.parametrize("clock_control", [ClockControl.BASE, ClockControl.NONE])
def test_a_profile_runs_ncu_with_the_clock_control_asked_for_and_states_it(tools, clock_control):
    # Twice each way round: the second of each finds a warm ncu worker (clocks none), which only `none` may take.
    for _ in range(2):
        result = tools.profile(SOURCE, clock_control=clock_control)
        assert result.ok, result.error
        assert result.ncu.clock_control is clock_control
        assert _clock_control(result.ncu.command) == clock_control.value
        assert f"clock control {clock_control.value}" in result.report_text
