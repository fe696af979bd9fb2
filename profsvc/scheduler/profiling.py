"""A Profile: build, run the target under ncu on a leased GPU (on its warm ncu worker where it may), read the
report, finish the result. Built on the core (scheduler.scheduler) as evaluation.py is."""

from __future__ import annotations

import dataclasses
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

from profsvc.build.python_problem import HarnessStatus, job_error, source_map
from profsvc.kinds import PROGRAM_TARGET, RunTarget, kind_named
from profsvc.ncu.command import NcuOptions, ncu_command
from profsvc.ncu.metric_sets import default_set
from profsvc.ncu.runner import NcuOutcome, NcuProgress, ProgressParser, ncu_outcome
from profsvc.scheduler.finishing import finish_result
from profsvc.scheduler.jobs import ProfileSpec, ProgressSink
from profsvc.scheduler.ncu_options import default_ncu_options, profile_ncu_options, warm_ncu_options
from profsvc.scheduler.program_outcome import program_failure
from profsvc.scheduler.reading import chart_artifacts, read_report
from profsvc.scheduler.scheduler import REPORT_NAME, UNJAILED, Job, Scheduler
from profsvc.worker.warm import READY
from profsvc_contract.models import CompileResult, JobError, KernelFilter, NcuRun, ProfileResult, Stage


async def profile(scheduler: Scheduler, spec: ProfileSpec, progress: ProgressSink | None = None) -> ProfileResult:
    """Build, run under ncu, read the report; with a session, add the delta against its last result."""
    scheduler.require_profiling()
    async with scheduler.admit(progress) as job:
        result = await _profiled(scheduler, job, spec)
        return await finish_result(scheduler, job, result, spec.session, html_report=spec.html_report)


async def _profiled(scheduler: Scheduler, job: Job, spec: ProfileSpec) -> ProfileResult:
    """A profile's result before it is finished: each failure ends it with its error."""
    source = spec.source
    built = await scheduler.build(job, source)
    result = ProfileResult(job_id=job.id, compile=built.compile)
    if scheduler.jail is None:
        result.warnings.append(UNJAILED)
    if not built.ok:
        result.error = _compile_error(built.compile)
        return result
    target = kind_named(source.kind).run_target(scheduler.kinds, source, built)
    result.target = target.target
    options = profile_ncu_options(spec, job.workspace / REPORT_NAME, target.default_nvtx, scheduler.config.limits)
    async with scheduler.gpu_lease(job) as gpu:
        job.progress(Stage.RUNNING, f"running under ncu on GPU {gpu}")

        def on_ncu(event: NcuProgress) -> None:
            message = f"kernel {event.kernel_index} {event.kernel_name}: {event.percent}%"
            job.progress(Stage.PROFILING, message, kernel_index=event.kernel_index, passes=event.passes)

        with scheduler.telemetry.stage("profile"):
            outcome = await _run_ncu(scheduler, job, gpu, options, target, on_ncu)
    assert scheduler.host.ncu is not None
    result.ncu = NcuRun(
        version=scheduler.host.ncu.version,
        command=shlex.join(outcome.command),
        passes=outcome.passes,
        seconds=outcome.seconds,
        metric_set=(spec.metric_set or default_set()).name,
        clock_control=options.clock_control,
    )
    locations = dict(target.locations)
    status: HarnessStatus | None = None
    if target.status_name:
        status = HarnessStatus.read(
            job.workspace / target.status_name,
            returncode=outcome.returncode,
            timed_out=outcome.timed_out,
            output=outcome.output_tail,
        )
        # Its exit: the worker's process ending after its status is written, then ncu's own (the report written).
        scheduler.record_phases("profile", status, outcome.ended, outcome.seconds)
        # Extensions built lazily during the run: their lines too.
        locations.update(source_map(status.builds, source.main_name))
        result.warnings.extend(status.warnings)
        if not status.ok and target.target != PROGRAM_TARGET:
            result.error = job_error(status)
            return result
    if target.target == PROGRAM_TARGET:
        # Told in the program's terms, with its last lines of output.
        default_selection = not spec.kernel_filter.nvtx_include
        program_error = program_failure(source.main_name, outcome, status, options, default_selection=default_selection)
        if program_error is not None:
            result.error = program_error
            return result
    failure = _ncu_failure(outcome, scheduler.config.limits.job_timeout_s)
    if failure is not None or outcome.report is None:
        result.error = failure or JobError(kind="ncu_failed", stage=Stage.PROFILING)
        return result
    job.progress(Stage.PARSING, "reading the report")
    # At most the launches asked for: a warm worker's ncu counts one more for its own kernel, which a worker that
    # took its job unprimed never ran. (A target that may run warm is one process, where ncu's count is the same.)
    selection = KernelFilter(launch_count=options.launch_count if target.warm else 0)
    analysis = await read_report(
        scheduler, job, outcome.report, selection, locations, spec.metrics, spec.derived, charts=spec.charts
    )
    result.device, result.kernels, result.aggregate = analysis.device, analysis.kernels, analysis.aggregate
    result.warnings.extend(analysis.warnings)
    result.warnings.extend(f"ncu: {e}" for e in outcome.errors)
    result.artifacts.append(scheduler.workspaces.artifact(job.id, outcome.report))
    result.artifacts.extend(chart_artifacts(scheduler, job))
    result.ok = bool(result.kernels)
    if not result.ok:
        result.error = JobError(kind="no_kernels_profiled", stage=Stage.PARSING, message=analysis.warnings[0])
    job.progress(Stage.DONE, "done")
    return result


async def _run_ncu(
    scheduler: Scheduler,
    job: Job,
    gpu: int,
    options: NcuOptions,
    target: RunTarget,
    on_progress: Callable[[NcuProgress], None],
) -> NcuOutcome:
    """Run the target under ncu in a cell: on the GPU's warm worker when it may and the options are the
    default ones, else fresh. The report and the target's status file are moved out of the cell into the
    job's workspace (the outcome names the report there)."""
    assert scheduler.host.ncu is not None
    ncu = scheduler.host.ncu.path
    kind = f"ncu-gpu{gpu}"
    make_argv = target.argv
    limits, primed = scheduler.config.limits, scheduler.prime_ncu_workers
    warm = _takes_warm_worker(scheduler, options, target, kind)
    parser = ProgressParser(on_progress)
    commands: list[list[str]] = []

    def fresh(argv: list[str], cell: Path) -> list[str]:
        commands.append(ncu_command(ncu, dataclasses.replace(options, export_path=cell / REPORT_NAME), argv))
        return commands[-1]

    def argv(cell: Path) -> list[str]:
        if warm:
            commands.append(ncu_command(ncu, warm_ncu_options(cell / REPORT_NAME, limits, primed), make_argv(cell)))
            # A worker that primed (said ready before its job) profiled its own kernel first, ncu's kernel 0;
            # the analysis leaves it out of the report's too.
            parser.skip_kernels = 1 if primed and (cell / READY).is_file() else 0
        return make_argv(cell)

    async with scheduler.cells.run(
        kind if warm else "",
        argv,
        files=target.files,
        gpu=gpu,
        timeout=limits.job_timeout_s,
        readonly=target.readonly,
        on_stdout=parser.feed,
        fresh=fresh,
        while_running=lambda: scheduler.gpu_turns.profiling(gpu),
    ) as (process, cell):
        outcome = ncu_outcome(commands[-1] if commands else [], process, parser, cell / REPORT_NAME)
        if warm:  # its ncu counts one launch more (warm_ncu_options), one the job may have used
            outcome.passes = outcome.passes[: options.launch_count]
        if outcome.report is not None:
            outcome.report = Path(shutil.move(outcome.report, options.export_path))
        status = cell / target.status_name
        if target.status_name and status.is_file() and not status.is_symlink():
            shutil.move(status, job.workspace / target.status_name)
    return outcome


def _takes_warm_worker(scheduler: Scheduler, options: NcuOptions, target: RunTarget, kind: str) -> bool:
    """Whether the warm ncu worker `kind` may run the target. Its ncu started ahead of the job with the default
    options, which it cannot change: a job with any other (a clock control, a metric set, a filter) would be
    served with the worker's, so it starts a fresh ncu."""
    return (
        target.warm
        and options == default_ncu_options(options.export_path, scheduler.config.limits)
        and kind in scheduler.standby.kinds()
    )


def _ncu_failure(outcome: NcuOutcome, job_timeout_s: float) -> JobError | None:
    """Why an ncu run left no report to read (None when it left one)."""
    if outcome.timed_out:
        return JobError(
            kind="timeout",
            stage=Stage.PROFILING,
            message=f"the job ran past its {job_timeout_s:.0f} s limit and was killed",
        )
    if outcome.report is not None:
        return None
    if outcome.no_kernels or outcome.returncode == 0:
        message = "ncu profiled no kernel: the measured call launched none that matched the filter"
        return JobError(kind="no_kernels_profiled", stage=Stage.PROFILING, message=message)
    errors = "; ".join(outcome.errors) or "see detail"
    message = f"ncu failed (exit status {outcome.returncode}): {errors}"
    return JobError(kind="ncu_failed", stage=Stage.PROFILING, message=message, detail=outcome.output_tail)


def _compile_error(compiled: CompileResult) -> JobError:
    return JobError(
        kind="compile_error",
        stage=Stage.COMPILING,
        message=compiled.diagnostics[0].message if compiled.diagnostics else "the build failed",
        detail=compiled.log[-4000:],
    )
