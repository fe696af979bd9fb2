"""--precision and --clock-control: from the command line, the Python client, the agent tools and a batch to the
request, and what a batch's table says of them."""

from __future__ import annotations

import contextlib
import inspect
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from profsvc_client import batch, cli
from profsvc_client.client import evaluate_request, profile_request, trials_request
from profsvc_contract import errors
from profsvc_contract._proto import profiler_pb2 as pb
from profsvc_contract.models import (
    DEFAULT_CLOCK_CONTROL,
    DEFAULT_PRECISION,
    BenchmarkResult,
    ClockControl,
    CorrectnessResult,
    EvaluateResult,
    FigureValue,
    KernelResult,
    KernelSource,
    NcuRun,
    Precision,
    ProfileResult,
    SourceFile,
)

SOURCE = KernelSource(main=SourceFile(name="p.py", content=b"class ModelNew: pass\n"))
# The options as a user types them, and the commands that take each (README, "Command line").
PRECISION_COMMANDS = ("check", "time", "evaluate")
CLOCK_CONTROL_COMMANDS = ("profile", "evaluate", "batch")


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", PRECISION_COMMANDS)
def test_the_help_lists_the_precision_modes(command, capsys):
    assert "--precision {fp32,fp16,bf16}" in _help(command, capsys)


@pytest.mark.parametrize("command", CLOCK_CONTROL_COMMANDS)
def test_the_help_lists_the_clock_controls(command, capsys):
    assert "--clock-control {none,base}" in _help(command, capsys)


@pytest.mark.parametrize(
    ("argv", "choices"),
    [
        (["check", "p.py", "--precision", "fp8"], ("fp32", "fp16", "bf16")),
        (["evaluate", "p.py", "--precision", "FP16"], ("fp32", "fp16", "bf16")),
        (["profile", "p.py", "--clock-control", "boost"], ("none", "base")),
        (["batch", "problems", "--out", "r.parquet", "--clock-control", "reset"], ("none", "base")),
    ],
)
def test_a_bad_value_is_a_usage_error_listing_the_choices(argv, choices, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    assert done.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "invalid choice" in error and all(choice in error for choice in choices)


def test_the_commands_that_do_not_run_models_take_no_precision(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["profile", "p.py", "--precision", "fp16"])
    assert done.value.code == 2 and "--precision" in capsys.readouterr().err


class _Recorder:
    """Stands in for ProfilerClient: records the keyword arguments of each call, answers an ok result."""

    def __init__(self) -> None:
        self.calls: dict[str, dict[str, Any]] = {}

    def _record(self, name: str, result: Any, kwargs: dict[str, Any]) -> Any:
        self.calls[name] = kwargs
        return result

    def check_correctness(self, source: KernelSource, **kwargs: Any) -> CorrectnessResult:
        return self._record("check_correctness", CorrectnessResult(ok=True), kwargs)

    def benchmark(self, source: KernelSource, **kwargs: Any) -> BenchmarkResult:
        return self._record("benchmark", BenchmarkResult(ok=True), kwargs)

    def evaluate(self, source: KernelSource, **kwargs: Any) -> EvaluateResult:
        return self._record("evaluate", EvaluateResult(ok=True), kwargs)

    def profile(self, source: KernelSource, **kwargs: Any) -> ProfileResult:
        return self._record("profile", ProfileResult(ok=True), kwargs)


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    client = _Recorder()

    @contextlib.contextmanager
    def connect(_: object) -> Iterator[_Recorder]:
        yield client

    monkeypatch.setattr(cli, "connect", connect)
    return client


@pytest.mark.parametrize(
    ("argv", "call", "expected"),
    [
        (["check"], "check_correctness", {"precision": "fp32"}),
        (["check", "--precision", "bf16"], "check_correctness", {"precision": "bf16"}),
        (["time", "--precision", "fp16"], "benchmark", {"precision": "fp16"}),
        (["evaluate"], "evaluate", {"precision": "fp32", "clock_control": "none"}),
        (
            ["evaluate", "--precision", "fp16", "--clock-control", "base"],
            "evaluate",
            {"precision": "fp16", "clock_control": "base"},
        ),
        (["profile"], "profile", {"clock_control": "none"}),
        (["profile", "--clock-control", "base"], "profile", {"clock_control": "base"}),
    ],
)
def test_the_command_line_hands_the_options_to_the_client(recorder, tmp_path, argv, call, expected, capsys):
    problem = tmp_path / "p.py"
    problem.write_text("class ModelNew: pass\n")
    assert cli.main([argv[0], str(problem), *argv[1:]]) == 0
    capsys.readouterr()
    assert {name: recorder.calls[call][name] for name in expected} == expected


def test_the_requests_carry_the_proto_values():
    assert trials_request(pb.CheckCorrectnessRequest, SOURCE, 3, "fp16").precision == pb.PRECISION_FP16
    assert trials_request(pb.BenchmarkRequest, SOURCE, 0, Precision.BF16).precision == pb.PRECISION_BF16
    evaluate = evaluate_request(SOURCE, 0, False, "", None, "bf16", "base")
    assert (evaluate.precision, evaluate.clock_control) == (pb.PRECISION_BF16, pb.CLOCK_CONTROL_BASE)
    default = evaluate_request(SOURCE, 0, False, "", None)
    assert (default.precision, default.clock_control) == (pb.PRECISION_FP32, pb.CLOCK_CONTROL_NONE)
    assert profile_request(SOURCE, None, "", "", clock_control="base").clock_control == pb.CLOCK_CONTROL_BASE


@pytest.mark.parametrize(
    "make",
    [
        lambda: trials_request(pb.CheckCorrectnessRequest, SOURCE, 0, "fp64"),
        lambda: evaluate_request(SOURCE, 0, False, "", None, clock_control="boost"),
        lambda: profile_request(SOURCE, None, "", "", clock_control="Base"),
    ],
)
def test_the_python_client_refuses_a_bad_value_in_one_line_listing_the_choices(make):
    with pytest.raises(errors.InvalidRequest) as caught:
        make()
    message = caught.value.message
    assert "\n" not in message and ("fp32, fp16, bf16" in message or "none, base" in message)


def test_the_defaults_are_fp32_and_clocks_left_alone():
    # fp32 casts nothing (the problem as it is); `none` leaves the GPU's clocks as they run for the kernel's users.
    assert (DEFAULT_PRECISION, DEFAULT_CLOCK_CONTROL) == (Precision.FP32, ClockControl.NONE)
    assert Precision.choices() == ("fp32", "fp16", "bf16") and ClockControl.choices() == ("none", "base")


def test_the_agent_tools_offer_the_contracts_choices_with_its_defaults():
    mcp_server = pytest.importorskip("profsvc_client.mcp_server", reason="the agent tools need the MCP SDK")
    tools = mcp_server.ProfsvcTools
    for method, name, kind, default in (
        (tools.run_correctness, "precision", Precision, DEFAULT_PRECISION),
        (tools.submit_kernel, "precision", Precision, DEFAULT_PRECISION),
        (tools.submit_kernel, "clock_control", ClockControl, DEFAULT_CLOCK_CONTROL),
        (tools.profile_kernel, "clock_control", ClockControl, DEFAULT_CLOCK_CONTROL),
    ):
        literal = typing.get_args(typing.get_type_hints(method, include_extras=True)[name])[0]
        assert typing.get_args(literal) == kind.choices(), (method.__name__, name)
        assert inspect.signature(method).parameters[name].default == default.value


def test_the_agent_tools_hand_the_options_to_the_client():
    mcp_server = pytest.importorskip("profsvc_client.mcp_server", reason="the agent tools need the MCP SDK")
    client = _Recorder()
    tools = mcp_server.ProfsvcTools(client)  # type: ignore[arg-type]
    tools.run_correctness("class ModelNew: pass\n", precision="bf16")
    tools.profile_kernel("class ModelNew: pass\n", clock_control="base")
    tools.submit_kernel("class ModelNew: pass\n", precision="fp16", clock_control="base")
    assert client.calls["check_correctness"]["precision"] == "bf16"
    assert client.calls["profile"]["clock_control"] == "base"
    assert (client.calls["evaluate"]["precision"], client.calls["evaluate"]["clock_control"]) == ("fp16", "base")


@pytest.fixture
def problems(tmp_path: Path) -> Path:
    root = tmp_path / "problems"
    root.mkdir()
    (root / "a.py").write_text("# a\n")
    (root / "b.cu").write_text("int main() {}\n")
    return root


def test_a_batch_profiles_with_the_clock_control_asked_for_and_reruns_when_it_changes(problems):
    default = {p.name: p for p in batch.discover(problems)}
    based = {p.name: p for p in batch.discover(problems, clock_control="base")}
    linted = batch.discover(problems, task="lint", clock_control="base")
    assert {p.clock_control for p in default.values()} == {ClockControl.NONE}
    assert {p.clock_control for p in based.values()} == {ClockControl.BASE}
    # A lint runs no ncu: its key stays the one it had.
    assert {p.key for p in linted} == {p.key for p in batch.discover(problems, task="lint")}
    # Another clock control is another measurement; the default keeps the keys of checkpoints made before.
    assert all(based[name].key != default[name].key for name in default)
    assert default["a.py"].key == batch.Problem("a.py", problems / "a.py", default["a.py"].digest).key
    with pytest.raises(errors.InvalidRequest, match="none, base"):
        batch.discover(problems, clock_control="boost")


def test_a_batch_hands_the_clock_control_to_the_client(problems):
    client = _Recorder()
    problem = batch.discover(problems, clock_control="base")[0]
    batch.run_task(client, problem, b"# a\n")  # type: ignore[arg-type]
    assert client.calls["profile"]["clock_control"] is ClockControl.BASE


def test_the_cli_hands_the_batch_its_clock_control(monkeypatch, problems):
    seen: list[object] = []

    def discover(*_: object, clock_control: object, **__: object) -> list[batch.Problem]:
        seen.append(clock_control)
        raise errors.InvalidRequest("stop here")

    monkeypatch.setattr(batch, "discover", discover)
    assert cli.main(["batch", str(problems), "--out", "r.parquet", "--clock-control", "base"]) == 2
    assert seen == ["base"]


def test_the_table_states_the_clock_control_each_result_states(problems, tmp_path):
    pytest.importorskip("pyarrow", reason="batch results need pandas and pyarrow")
    figures = {"duration": FigureValue(value=1.0, unit="ns")}

    def profile(problem: batch.Problem) -> ProfileResult | Any:
        if problem.task == "lint":
            return batch.StaticCheckResult(ok=True)
        # As the server answers: the ncu run's clock control, whatever was asked.
        ncu = NcuRun(version="2025.3.1", clock_control=ClockControl.BASE if problem.name == "a.py" else "none")
        return ProfileResult(ok=True, kernels=[KernelResult(name="k", figures=figures)], ncu=ncu)

    out = tmp_path / "r.parquet"
    problems_run = [*batch.discover(problems), *batch.discover(problems, task="lint")]
    batch.run_batch(problems_run, out, profile, concurrency=1)
    frame = batch.read_results(out)
    assert list(frame.columns).index("clock_control") == list(batch.COLUMNS).index("clock_control")
    rows = {(row.problem, row.task): row.clock_control for row in frame.itertuples()}
    assert rows == {
        ("a.py", "profile"): "base",
        ("b.cu", "profile"): "none",
        ("a.py", "lint"): "",
        ("b.cu", "lint"): "",
    }
