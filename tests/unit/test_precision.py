"""Precision modes as KernelBench has them: what is cast, the tolerances each mode compares with (CPU torch), and
the mode from a request to the judge, the profiling harness and the results."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

import pytest

from profsvc.build.python_problem import HarnessStatus
from profsvc.config import ServerConfig
from profsvc.host import HostInfo
from profsvc.kinds import Built, kind_named
from profsvc.scheduler import evaluation
from profsvc.scheduler.evaluation import benchmark, check_correctness, evaluate
from profsvc.scheduler.jobs import ProfileSpec, SourceSpec
from profsvc.scheduler.scheduler import Scheduler
from profsvc.telemetry import Telemetry
from profsvc.worker import precision as modes
from profsvc.worker.correctness import compare
from profsvc.worker.precision import cast_model, cast_values, tolerances
from profsvc_contract.models import (
    DEFAULT_PRECISION,
    ClockControl,
    CompileResult,
    GpuInfo,
    Precision,
    ProfileResult,
    SourceKind,
)
from tests.conftest import FIXTURES

torch = pytest.importorskip("torch")

# KernelBench, src/kernelbench/eval.py, get_tolerance_for_precision: {torch.float16: 1e-2, torch.bfloat16: 1e-2},
# used as both atol and rtol in `torch.allclose(output, output_new, atol=tolerance, rtol=tolerance)`.
KERNELBENCH_HALF_TOLERANCE = 1e-2
# profsvc's tolerances by output dtype before precision modes existed: fp32 mode keeps them.
FP32_MODE = {"float64": (1e-7, 1e-7), "float32": (1e-3, 1e-3), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def test_the_workers_know_the_contracts_modes_and_default():
    # The workers spell them out rather than import the contract (pydantic) on every start.
    assert modes.PRECISIONS == Precision.choices() and modes.DEFAULT_PRECISION == DEFAULT_PRECISION.value
    assert set(modes.CAST_DTYPES) == set(Precision.choices()) - {DEFAULT_PRECISION.value}


@pytest.mark.parametrize("precision", [Precision.FP16, Precision.BF16])
def test_half_modes_compare_every_floating_output_with_kernelbenchs_tolerance(precision):
    table = tolerances(precision)
    assert set(table) == set(FP32_MODE)
    assert all(pair == (KERNELBENCH_HALF_TOLERANCE, KERNELBENCH_HALF_TOLERANCE) for pair in table.values())


def test_fp32_mode_keeps_the_tolerances_by_output_dtype():
    assert tolerances(Precision.FP32) == FP32_MODE


@pytest.mark.parametrize("precision", [Precision.FP16, Precision.BF16])
@pytest.mark.parametrize("offset", [0.0, 0.005, 0.0195, 0.0205, 0.05, -0.0195, -0.0205])
def test_a_half_mode_verdict_is_kernelbenchs_allclose(precision, offset):
    # float32 outputs, as a model that upcasts its result returns: the mode decides the tolerance, not the dtype.
    reference = torch.tensor([1.0, -2.0, 0.5, 3.0])
    candidate = reference + offset * torch.tensor([1.0, 1.0, 1.0, 1.0])
    expected = torch.allclose(candidate, reference, atol=KERNELBENCH_HALF_TOLERANCE, rtol=KERNELBENCH_HALF_TOLERANCE)
    assert compare(candidate, reference, torch, tolerances(precision))["ok"] == expected


def test_the_same_outputs_pass_in_fp16_mode_and_fail_in_fp32_mode():
    # |1.0195 - 1| = 0.0195: within 1e-2 + 1e-2 * 1 (KernelBench's fp16), past 1e-3 + 1e-3 * 1 (float32 in fp32 mode).
    reference, candidate = torch.tensor([1.0, 1.0]), torch.tensor([1.0195, 1.0])
    assert compare(candidate, reference, torch, tolerances(Precision.FP16))["ok"]
    verdict = compare(candidate, reference, torch, tolerances(Precision.FP32))
    assert not verdict["ok"] and "atol 0.001, rtol 0.001" in verdict["message"]


def test_integer_outputs_must_match_exactly_in_every_mode():
    reference = torch.tensor([3, 4, 5])
    for precision in (Precision.FP32, Precision.FP16, Precision.BF16):
        assert not compare(torch.tensor([3, 4, 6]), reference, torch, tolerances(precision))["ok"]


@pytest.mark.parametrize(("precision", "dtype"), [(Precision.FP16, "float16"), (Precision.BF16, "bfloat16")])
def test_only_floating_point_tensors_are_cast(precision, dtype):
    values = [
        torch.randn(4),
        torch.arange(4),
        torch.tensor([True, False]),
        (torch.randn(2, dtype=torch.float64), torch.arange(3, dtype=torch.int32)),
        7,
        0.5,
        "mean",
    ]
    cast = cast_values(values, precision, torch)
    target = getattr(torch, dtype)
    assert cast[0].dtype == target and torch.equal(cast[0], values[0].to(target))
    assert cast[1] is values[1] and cast[2] is values[2]
    assert isinstance(cast[3], tuple) and cast[3][0].dtype == target and cast[3][1] is values[3][1]
    assert cast[4:] == [7, 0.5, "mean"]


def test_fp32_mode_casts_nothing():
    values = [torch.randn(2, dtype=torch.float64), torch.randn(2, dtype=torch.float16)]
    assert cast_values(values, Precision.FP32, torch) is values
    model = torch.nn.Linear(2, 2).double()
    assert cast_model(model, Precision.FP32, torch).weight.dtype == torch.float64


class _WithIndex(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
        self.register_buffer("index", torch.arange(3))
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x):
        return self.linear(x)[..., self.index] * self.scale


@pytest.mark.parametrize(("precision", "dtype"), [(Precision.FP16, torch.float16), (Precision.BF16, torch.bfloat16)])
def test_a_models_floating_point_weights_and_buffers_are_cast_its_integer_buffers_kept(precision, dtype):
    model = cast_model(_WithIndex(), precision, torch)
    assert model.linear.weight.dtype == model.linear.bias.dtype == model.scale.dtype == dtype
    assert model.index.dtype == torch.int64
    assert model(torch.randn(2, 3, dtype=dtype)).dtype == dtype


def test_a_model_that_is_no_module_is_left_as_it_is():
    def plain(x):
        return x * 2

    assert cast_model(plain, Precision.FP16, torch) is plain


T = TypeVar("T")


class _Scheduler:
    """Stands in for the scheduler and the paths on it that evaluation.py calls (judging.run_checks,
    profiling.profile): records what the agent's tools ask of them, answers a judge's ok status; parses in its
    own process."""

    def __init__(self) -> None:
        self.checks: list[tuple[str, dict[str, int | str]]] = []
        self.profiles: list[ProfileSpec] = []
        self.parsers = self

    async def run(self, function: Callable[..., T], *args: object, size: int) -> T:
        """The parsers' call (`scheduler.parsers.run`), here."""
        return function(*args)

    async def run_checks(
        self, source: SourceSpec, mode: str, options: dict[str, int | str], *_: object
    ) -> tuple[CompileResult, HarnessStatus]:
        self.checks.append((mode, dict(options)))
        correctness = {"ok": True, "trials": 1, "passed": 1}
        return CompileResult(ok=True), HarnessStatus(ok=True, stage="done", correctness=correctness, benchmark={})

    async def profile(self, spec: ProfileSpec, *_: object) -> ProfileResult:
        self.profiles.append(spec)
        return ProfileResult()


@pytest.fixture
def scheduler(monkeypatch: pytest.MonkeyPatch) -> _Scheduler:
    """A stand-in that evaluation.py's calls of run_checks(scheduler, ...) and profile(scheduler, ...) reach."""
    stand_in = _Scheduler()

    async def run_checks(scheduler: _Scheduler, *args: object) -> tuple[CompileResult, HarnessStatus]:
        return await scheduler.run_checks(*args)  # type: ignore[arg-type]

    async def profile(scheduler: _Scheduler, *args: object) -> ProfileResult:
        return await scheduler.profile(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(evaluation, "run_checks", run_checks)
    monkeypatch.setattr(evaluation, "profile", profile)
    return stand_in


def _problem(precision: Precision) -> SourceSpec:
    text = (FIXTURES / "seed47.py").read_text()
    return SourceSpec(kind=SourceKind.PYTHON_PROBLEM, main_name="seed47.py", main_text=text, precision=precision)


@pytest.mark.parametrize("precision", [Precision.FP32, Precision.BF16])
def test_the_judge_is_told_the_precision_and_the_results_state_it(scheduler, precision):
    checked = asyncio.run(check_correctness(scheduler, _problem(precision), 0))  # type: ignore[arg-type]
    timed = asyncio.run(benchmark(scheduler, _problem(precision), 0))  # type: ignore[arg-type]
    assert [(mode, options["precision"]) for mode, options in scheduler.checks] == [
        ("correctness", precision.value),
        ("benchmark", precision.value),
    ]
    assert checked.precision is timed.precision is precision
    assert f"({precision.value})" in checked.report_text


def test_an_evaluation_runs_correctness_timing_and_its_profile_in_its_precision_with_its_clock_control(
    scheduler, tmp_path
):
    result = asyncio.run(
        evaluate(scheduler, _problem(Precision.FP16), 0, False, clock_control=ClockControl.BASE)  # type: ignore[arg-type]
    )
    assert [(mode, options["precision"]) for mode, options in scheduler.checks] == [("evaluate", "fp16")]
    assert result.precision is result.correctness.precision is result.benchmark.precision is Precision.FP16
    (spec,) = scheduler.profiles
    assert spec.clock_control is ClockControl.BASE and spec.source.precision is Precision.FP16
    # The profiled call is the harness's, in the same precision.
    host = HostInfo(gpus=[GpuInfo(index=0, name="NVIDIA H200", compute_capability="9.0", memory_bytes=1 << 30)])
    kinds = Scheduler(ServerConfig(state_dir=tmp_path / "state"), host, None, Telemetry()).kinds
    argv = (
        kind_named(spec.source.kind)
        .run_target(kinds, spec.source, Built(compile=CompileResult(ok=True)))
        .argv(tmp_path)
    )
    assert argv[argv.index("--precision") + 1] == "fp16" and argv[argv.index("--mode") + 1] == "profile"


def test_an_evaluation_that_skips_the_charts_profiles_without_them(scheduler):
    asyncio.run(evaluate(scheduler, _problem(Precision.FP32), 0, False, charts=False))  # type: ignore[arg-type]
    (spec,) = scheduler.profiles
    assert spec.charts is False
