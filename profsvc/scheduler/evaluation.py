"""The agent's tools on top of the scheduler: correctness, benchmark and the whole evaluation."""

from __future__ import annotations

from profsvc.build.python_problem import HarnessStatus, job_error
from profsvc.metrics.sol import SOL_DEFINITION, sol_pct
from profsvc.report.evaluate_text import render_evaluation
from profsvc.report.markdown import render_evaluation_markdown
from profsvc.report.static_text import render_static_check
from profsvc.report.tool_text import render_benchmark_lines, render_correctness_lines
from profsvc.scheduler.jobs import ProfileSpec, ProgressSink, SourceSpec
from profsvc.scheduler.judging import run_checks
from profsvc.scheduler.profiling import profile
from profsvc.scheduler.scheduler import Scheduler
from profsvc.scheduler.sessions import SessionKey
from profsvc.staticcheck import Policy, check_source, make_policy
from profsvc.staticcheck.policy import Level
from profsvc.staticcheck.rules import load_rules
from profsvc.telemetry import collect_timings
from profsvc_contract.models import (
    DEFAULT_CLOCK_CONTROL,
    BenchmarkResult,
    ClockControl,
    CompileResult,
    CorrectnessResult,
    EvaluateResult,
    JobError,
    ProfileResult,
    RuleSeverity,
    Stage,
    StaticCheckResult,
    StaticFinding,
    StaticPolicy,
)

NO_CUSTOM_KERNEL = "no_custom_kernel"
DEFAULT_TRIALS = 5
DEFAULT_TIMED_CALLS = 100
WARMUP_CALLS = 10


def static_check(source: SourceSpec, policy: Policy | None = None) -> StaticCheckResult:
    """AST rules over the candidate (pure: nothing runs), with the policy's severities (default: the table's)."""
    policy = policy or make_policy()
    findings = policy.apply(check_source(source.main_text, source.main_name, source.reference_text or None))
    result = StaticCheckResult(
        ok=not any(f.severity == "error" for f in findings),
        findings=[
            StaticFinding(rule_id=f.rule_id, severity=str(f.severity), line=f.line, column=f.column, message=f.message)
            for f in findings
        ],
        policy=StaticPolicy(
            name=policy.name,
            overrides=[RuleSeverity(rule_id=rule, severity=str(level)) for rule, level in policy.overrides.items()],
        ),
    )
    result.report_text = render_static_check(result, source.main_name)
    return result


def _job_error(compiled: CompileResult, status: HarnessStatus | None) -> JobError:
    if status is None:
        message = compiled.diagnostics[0].message if compiled.diagnostics else "the build failed"
        return JobError(kind="compile_error", stage=Stage.COMPILING, message=message, detail=compiled.log[-4000:])
    return job_error(status)


async def check_correctness(
    scheduler: Scheduler, source: SourceSpec, trials: int, progress: ProgressSink | None = None
) -> CorrectnessResult:
    """Run the correctness trials in the source's precision."""
    options: dict[str, int | str] = {"trials": trials or DEFAULT_TRIALS, "precision": source.precision.value}
    with collect_timings() as timings:
        compiled, status = await run_checks(scheduler, source, "correctness", options, progress)
    if status is None or not status.ok or status.correctness is None:
        error = _job_error(compiled, status)
        result = CorrectnessResult(compile=compiled, error=error, message="could not run", timings=timings)
    else:
        result = CorrectnessResult.model_validate({**status.correctness, "compile": compiled, "timings": timings})
    result.precision = source.precision
    result.report_text = "\n".join(render_correctness_lines(result)) + "\n"
    return result


async def benchmark(
    scheduler: Scheduler, source: SourceSpec, timed_calls: int, progress: ProgressSink | None = None
) -> BenchmarkResult:
    """Time candidate and reference in the source's precision."""
    options: dict[str, int | str] = {
        "timed-calls": timed_calls or DEFAULT_TIMED_CALLS,
        "warmup": WARMUP_CALLS,
        "precision": source.precision.value,
    }
    with collect_timings() as timings:
        compiled, status = await run_checks(scheduler, source, "benchmark", options, progress)
    if status is None or not status.ok or status.benchmark is None:
        result = BenchmarkResult(compile=compiled, error=_job_error(compiled, status), timings=timings)
    else:
        result = BenchmarkResult.model_validate({**status.benchmark, "compile": compiled, "timings": timings})
    result.precision = source.precision
    result.report_text = "\n".join(render_benchmark_lines(result)) + "\n"
    return result


async def evaluate(
    scheduler: Scheduler,
    source: SourceSpec,
    trials: int,
    skip_profile: bool,
    progress: ProgressSink | None = None,
    session: SessionKey | None = None,
    policy: Policy | None = None,
    clock_control: ClockControl = DEFAULT_CLOCK_CONTROL,
    *,
    charts: bool = True,
) -> EvaluateResult:
    """Static check, build, correctness, timing, memory, launches, then (correct candidates) a profile and SOL,
    all in the source's precision; ncu sets the clocks as `clock_control` says; `charts`: draw the profile's
    roofline charts.

    The static check's verdict under `policy` is part of the evaluation's: an error finding fails it.
    """
    with collect_timings() as timings:
        result = await _evaluate(
            scheduler, source, trials, skip_profile, progress, session, policy, clock_control, charts
        )
    result.timings = timings
    return result


async def _evaluate(
    scheduler: Scheduler,
    source: SourceSpec,
    trials: int,
    skip_profile: bool,
    progress: ProgressSink | None,
    session: SessionKey | None,
    policy: Policy | None,
    clock_control: ClockControl,
    charts: bool,
) -> EvaluateResult:
    checked = await scheduler.parsers.run(static_check, source, policy, size=source.text_size)
    result = EvaluateResult(static_check=checked, precision=source.precision)
    options: dict[str, int | str] = {
        "trials": trials or DEFAULT_TRIALS,
        "timed-calls": DEFAULT_TIMED_CALLS,
        "warmup": WARMUP_CALLS,
        "precision": source.precision.value,
    }
    # The run-time side of no_custom_kernel (no launch of the candidate's own kernels) follows the same policy.
    own_kernel = (policy or make_policy()).level(NO_CUSTOM_KERNEL, load_rules()) is Level.ERROR
    compiled, status = await run_checks(scheduler, source, "evaluate", options, progress, own_kernel)
    if status is None or not status.ok or status.correctness is None:
        error = _job_error(compiled, status)
        result.correctness = CorrectnessResult(compile=compiled, error=error, message="could not run")
        result.benchmark = BenchmarkResult(compile=compiled, error=error)
    else:
        result.correctness = CorrectnessResult.model_validate({**status.correctness, "compile": compiled})
        if status.benchmark is not None:
            result.benchmark = BenchmarkResult.model_validate({**status.benchmark, "compile": compiled})
    result.correctness.precision = result.benchmark.precision = source.precision
    if result.correctness.ok and not skip_profile:
        spec = ProfileSpec(source=source, session=session, clock_control=clock_control, charts=charts)
        result.profile = await profile(scheduler, spec, progress)
        result.sol_pct = sol_pct(result.profile) if result.profile.ok else None
        result.sol_definition = SOL_DEFINITION
    elif skip_profile:
        result.profile = ProfileResult()
    decided = not result.benchmark.decisive_flags
    result.ok = result.static_check.ok and result.correctness.ok and result.benchmark.ok and decided
    result.report_text = render_evaluation(result)
    result.report_markdown = render_evaluation_markdown(result)
    return result
