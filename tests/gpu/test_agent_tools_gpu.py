"""The agent's tools on a GPU: correctness, timing, memory, launches and Evaluate, against planted cheats.

The candidates share one load_inline extension with the fault suite (tests/faults/problems.py), so
the build cache builds it once per GPU run.
"""

from __future__ import annotations

import pytest

from profsvc_client.client import ProfilerClient, load_source
from profsvc_contract.models import KernelSource
from tests.conftest import FIXTURES
from tests.faults.problems import LARGE_N, SMALL_N, model_new, source

pytestmark = pytest.mark.gpu

CANDIDATES = {
    "honest": model_new("return _ext.affine(x)"),
    "side_stream": model_new(
        "with torch.cuda.stream(self.stream):\n            return _ext.affine_current_stream(x)",
        init="self.stream = torch.cuda.Stream()",
    ),
    "result_cache": model_new(
        "key = (x.data_ptr(), tuple(x.shape))\n        if key not in SEEN:\n            SEEN[key] = _ext.affine(x)\n"
        "        return SEEN[key]"
    ).replace("class ModelNew", "SEEN = {}\n\n\nclass ModelNew"),
    "writes_nothing": model_new("return _ext.nothing(x)"),
    "mutates_input": model_new("return _ext.affine_inplace(x)"),
    "hard_coded_shape": model_new("return _ext.affine_fixed(x)"),
}


def _candidate(name: str, n: int = SMALL_N) -> KernelSource:
    return source(name, CANDIDATES[name], n)


@pytest.fixture(scope="module")
def tools(served):
    with ProfilerClient(served, timeout=900) as client:
        yield client


def test_honest_candidate_passes_and_is_timed(tools):
    correctness = tools.check_correctness(_candidate("honest"))
    assert correctness.ok, correctness.message
    assert correctness.trials == 5 and correctness.passed == 5
    assert correctness.max_abs_error is not None and correctness.max_abs_error < 1e-5
    timing = tools.benchmark(_candidate("honest"))
    assert timing.ok and not timing.flags, timing.flags
    assert timing.candidate.launches_per_call == 1
    assert timing.reference.launches_per_call == 2  # x * 2.0 then + 1.0
    assert timing.fusion_ratio == pytest.approx(2.0)
    assert timing.speedup and timing.speedup_ci_low <= timing.speedup <= timing.speedup_ci_high
    # Never below the kernels' own durations.
    assert timing.candidate.events.median_us >= timing.candidate.kernels.median_us


def test_side_stream_is_flagged(tools):
    # Large enough that the kernel outlasts the host's own time between the two events (measured on the
    # H200: at 4 MiB the events still span the whole kernel, so nothing is hidden and nothing is flagged).
    timing = tools.benchmark(_candidate("side_stream", LARGE_N))
    assert any("outside the timed stream" in f for f in timing.flags), timing.flags
    assert timing.speedup_basis == "wall"
    assert tools.static_check(_candidate("side_stream")).findings


def test_result_cache_is_caught(tools):
    correctness = tools.check_correctness(_candidate("result_cache"))
    timing = tools.benchmark(_candidate("result_cache"))
    caught_in_trials = not correctness.ok
    caught_in_timing = any("reuses results across calls" in f for f in timing.flags)
    assert caught_in_trials or caught_in_timing, (correctness.message, timing.flags)


def test_unwritten_output_is_caught(tools):
    correctness = tools.check_correctness(_candidate("writes_nothing"))
    assert not correctness.ok
    assert correctness.trial_results[0].message


def test_input_mutation_is_caught(tools):
    correctness = tools.check_correctness(_candidate("mutates_input"))
    assert not correctness.ok
    assert "changed its input #0" in correctness.message


def test_hard_coded_shape_is_caught_with_a_message_saying_so(tools):
    correctness = tools.check_correctness(_candidate("hard_coded_shape"))
    assert not correctness.ok
    assert correctness.trial_results[0].ok  # the nominal shape works
    assert "hard-code one shape" in correctness.message


@pytest.mark.parametrize(
    ("problem", "kernel"),
    [(load_source(FIXTURES / "seed47.py"), "vga_linear_kernel"), (_candidate("honest", LARGE_N), "affine_kernel")],
    ids=["seed47", "affine_1GiB"],
)
def test_timing_agrees_with_ncu_and_is_never_below_it(tools, problem, kernel):
    source = problem
    timing = tools.benchmark(source)
    assert timing.ok, timing.error
    profile = tools.profile(source)
    ncu_us = profile.kernels[0].value("duration") / 1e3
    assert profile.kernels[0].name == kernel
    measured = timing.candidate.events.median_us
    # On failure: events, CUPTI's kernel records and the clocks, to tell launch overhead from a slower kernel.
    seen = (measured, ncu_us, timing.candidate.kernels.median_us, timing.clocks_mhz)
    assert measured >= ncu_us * 0.995, seen  # ncu's own clock rounding aside
    if ncu_us >= 20:
        assert measured <= ncu_us * 1.05, seen


def test_evaluate_seed_problem_end_to_end(tools):
    events = []
    result = tools.evaluate(load_source(FIXTURES / "seed47.py"), on_progress=events.append)
    assert result.static_check.ok
    assert result.correctness.ok
    assert result.benchmark.ok and result.benchmark.speedup is not None
    assert result.profile.ok and result.profile.kernels[0].name == "vga_linear_kernel"
    assert result.sol_pct is not None and 0 < result.sol_pct <= 100
    # From the judge's status written to its process's end: within the evaluate stage.
    assert 0 < result.timings["evaluate:exit"] < result.timings["evaluate"]
    assert "correctness PASSED" in result.report_text and "speedup" in result.report_text
