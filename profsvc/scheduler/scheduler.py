"""The scheduler: a bounded queue, builds on CPU cores, one GPU lane per device.

Each job runs in its own workspace. Builds run in parallel (up to
`compile_workers`); a GPU is held by one profiling job at a time, because
hardware counters need the GPU to themselves. Every process a job starts is
killed with its process group when the job ends, times out or is cancelled
(a client that goes away cancels the job's task).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import secrets
import shlex
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path, PurePath

from profsvc.build.cache import BuildCache
from profsvc.build.nvcc import build_cuda_program
from profsvc.build.python_problem import HarnessStatus, compile_problem, harness_argv, job_error, source_map
from profsvc.config import ServerConfig
from profsvc.host import HostInfo
from profsvc.jobenv import job_environment
from profsvc.metrics.analysis import ReportAnalysis
from profsvc.metrics.catalog import load_catalog
from profsvc.metrics.nvtx import PROFILER_WARMUP_RANGE
from profsvc.ncu.command import (
    ANY_PUSH_POP_RANGE,
    ANY_START_END_RANGE,
    NcuOptions,
    marks_nvtx_ranges,
    ncu_command,
)
from profsvc.ncu.metric_sets import resolve
from profsvc.ncu.runner import NcuOutcome, NcuProgress, follow_ncu, run_ncu
from profsvc.proc import ProcessResult, run_process
from profsvc.report.delta import compute_delta
from profsvc.report.text import render_text
from profsvc.sandbox import NO_NETWORK_ISOLATION, Sandbox
from profsvc.scheduler.artifacts import Workspaces
from profsvc.scheduler.compiled import CompiledSources
from profsvc.scheduler.jobs import ProfileSpec, ProgressSink, SourceSpec
from profsvc.scheduler.sessions import SessionKey, SessionStore
from profsvc.scheduler.standby import StandbyGone, StandbyPool, StandbySpec
from profsvc.telemetry import Telemetry
from profsvc.worker.standby import WARM_LIBRARIES, WARM_PROFILER
from profsvc_client.errors import InvalidRequest, PreconditionFailed, Reason, ResourceExhausted
from profsvc_client.models import (
    ArtifactRef,
    CompileResult,
    JobError,
    KernelFilter,
    NcuRun,
    ProfileResult,
    Progress,
    SourceKind,
    Stage,
)

HARNESS_RANGE = "profsvc"
HARNESS_MODULE = "profsvc.worker.harness"
ANALYZE_MODULE = "profsvc.worker.analyze_report"
ANALYZE_TIMEOUT_S = 300.0
REPORT_NAME = "report.ncu-rep"
CHART_NAMES = ("roofline.png", "roofline.svg")
# The options of a default Profile depend only on the source's kind: this stands for any Python problem.
_ANY_PYTHON_PROBLEM = SourceSpec(kind=SourceKind.PYTHON_PROBLEM, main_name="", main_text="")
# Exit statuses of the analyze worker (profsvc.worker.analyze_report).
EXIT_UNREADABLE, EXIT_NO_READER = 3, 4


class _Job:
    """Bookkeeping of one running job: its id, workspace, clock and progress sink."""

    def __init__(self, job_id: str, workspace: Path, progress: ProgressSink | None) -> None:
        self.id = job_id
        self.workspace = workspace
        self.started = time.monotonic()
        self._progress = progress

    def report(self, stage: Stage, message: str = "", **fields: int) -> None:
        if self._progress is not None:
            elapsed = time.monotonic() - self.started
            self._progress(Progress(stage=stage, message=message, elapsed_seconds=elapsed, **fields))


def _upload_name(filename: str) -> str:
    """The last part of an uploaded report's file name, where it is a plain one; else REPORT_NAME.

    Control characters are refused too: the name appears in one-line error messages and logs.
    """
    name = PurePath(filename.replace("\\", "/")).name
    if name in ("", ".", "..") or not name.isprintable() or len(name.encode()) > 200:
        return REPORT_NAME
    return name


class Scheduler:
    """Runs compile, profile and analyze jobs."""

    def __init__(self, config: ServerConfig, host: HostInfo, sandbox: Sandbox, telemetry: Telemetry) -> None:
        self.config = config
        self.host = host
        self.sandbox = sandbox
        self.telemetry = telemetry
        self.sessions = SessionStore(config.max_sessions, config.session_bytes, config.session_ttl_s)
        self.cache = BuildCache(config.cache_dir)
        self.workspaces = Workspaces(config.jobs_dir, keep=config.keep_jobs, keep_bytes=config.disk_budget_bytes)
        self._compile_slots = asyncio.Semaphore(config.compile_workers)
        self._free_gpus: asyncio.Queue[int] = asyncio.Queue()
        # Held by the job on a GPU, and by a warm ncu worker while it primes (scheduler.standby).
        self._gpu_locks: dict[int, asyncio.Lock] = {}
        for gpu in host.gpus:
            self._free_gpus.put_nowait(gpu.index)
            self._gpu_locks[gpu.index] = asyncio.Lock()
        self._admitted = 0
        self._waiting_for_gpu = 0
        self.standby = StandbyPool(config.state_dir / "standby")
        # A primed worker holds up every other ncu's kernels on its GPU while it waits (measured on one H200:
        # tools/ncu_lock_probe.sh). Whether that hold spans GPUs is not measured: with several GPUs, an idle
        # primed worker might hold up every other GPU's profiles, so only a one-GPU host primes.
        self._prime_ncu_workers = config.ncu_warmup and len(host.gpus) == 1
        self.compiled = CompiledSources()

    # ------------------------------------------------------------ warm workers

    async def start(self) -> None:
        """Start the warm workers the configuration asks for (see scheduler.standby)."""
        self.standby.remove_stale()
        if not self.config.warm_workers:
            return
        # Two where jobs arrive faster than a worker warms up (a batch): builds, and profiles on each GPU.
        self.standby.keep("compile", self._standby_spec(HARNESS_MODULE, None, self.sandbox.wrap_cpu), depth=2)
        self.standby.keep("analyze", self._standby_spec(ANALYZE_MODULE, None, self.sandbox.wrap_cpu))
        for gpu in self._gpu_indices():
            # Not under ncu: this one may also start the GPU libraries a timing run needs (cuBLAS, CUPTI).
            run = self._standby_spec(HARNESS_MODULE, gpu, self.sandbox.wrap, extra={WARM_LIBRARIES: "1"})
            self.standby.keep(f"run-gpu{gpu}", run)
            if self.host.ncu is not None:
                self.standby.keep(f"ncu-gpu{gpu}", self._ncu_standby_spec(gpu), depth=2)

    async def close(self) -> None:
        """Stop the warm workers."""
        await self.standby.close()

    def _gpu_indices(self) -> list[int]:
        return [gpu.index for gpu in self.host.gpus]

    def _worker_argv(self, module: str, directory: Path) -> list[str]:
        return [self.config.python, "-m", module, "--standby", str(directory), "--server-pid", str(os.getpid())]

    def _standby_environment(
        self, gpu: int | None, extra: dict[str, str] | None = None
    ) -> Callable[[Path], dict[str, str]]:
        return lambda directory: job_environment(directory, gpu_index=gpu, cuda_arch=self._arch(), extra=extra)

    def _standby_spec(
        self, module: str, gpu: int | None, wrap: Callable[[list[str]], list[str]], extra: dict[str, str] | None = None
    ) -> StandbySpec:
        return StandbySpec(
            command=lambda directory: wrap(self._worker_argv(module, directory)),
            environment=self._standby_environment(gpu, extra),
        )

    def _ncu_standby_spec(self, gpu: int) -> StandbySpec:
        def command(directory: Path) -> list[str]:
            assert self.host.ncu is not None
            options = self._warm_ncu_options(directory / REPORT_NAME)
            worker = self._worker_argv(HARNESS_MODULE, directory)
            return [*self.sandbox.network_prefix, *ncu_command(self.host.ncu.path, options, worker)]

        if not self._prime_ncu_workers:
            return StandbySpec(command=command, environment=self._standby_environment(gpu))
        return StandbySpec(
            command=command,
            environment=self._standby_environment(gpu, {WARM_PROFILER: "1"}),
            prime_lock=self._gpu_locks[gpu],
        )

    async def _run_worker(
        self,
        kind: str,
        argv: list[str],
        *,
        fresh: Callable[[list[str]], list[str]],
        cwd: Path,
        env: dict[str, str],
        timeout: float,
        stdin: bytes | None = None,
    ) -> ProcessResult:
        """Run a worker (`python -m module args`): on the kind's warm worker when there is one, else fresh."""
        standby = await self.standby.take(kind)
        if standby is not None:
            try:
                text = stdin.decode() if stdin else ""
                return await standby.run(argv[3:], cwd=cwd, stdin=text, timeout=timeout, on_stdout=None)
            except StandbyGone:
                pass  # it died before taking the job: run the job fresh
            finally:
                standby.discard()
        return await run_process(fresh(argv), cwd=cwd, env=env, timeout=timeout, stdin_data=stdin)

    # ------------------------------------------------------------ admission

    @contextlib.asynccontextmanager
    async def _timed(self, stage: str) -> AsyncIterator[None]:
        with self.telemetry.stage(stage):
            yield

    @contextlib.asynccontextmanager
    async def _admit(self, progress: ProgressSink | None) -> AsyncIterator[_Job]:
        if self._admitted >= self.config.limits.queue_size:
            raise ResourceExhausted(
                f"the server's queue is full ({self.config.limits.queue_size} jobs); try again later", Reason.QUEUE_FULL
            )
        self._admitted += 1
        self.telemetry.queue_depth.set(self._admitted)
        try:
            job_id, workspace = self.workspaces.create()
            try:
                job = _Job(job_id, workspace, progress)
                job.report(Stage.QUEUED, "accepted", queue_position=max(0, self._admitted - 1))
                yield job
            finally:
                self.workspaces.finish(job_id)
        finally:
            self._admitted -= 1
            self.telemetry.queue_depth.set(self._admitted)

    @contextlib.asynccontextmanager
    async def _gpu(self, job: _Job) -> AsyncIterator[int]:
        self._waiting_for_gpu += 1
        try:
            if self._free_gpus.empty():
                job.report(Stage.QUEUED, "waiting for a GPU", queue_position=self._waiting_for_gpu)
            with self.telemetry.stage("gpu_wait"):
                gpu = await self._free_gpus.get()
                try:
                    await self._gpu_locks[gpu].acquire()
                except BaseException:
                    self._free_gpus.put_nowait(gpu)
                    raise
        finally:
            self._waiting_for_gpu -= 1
        held = time.monotonic()
        try:
            yield gpu
        finally:
            self.telemetry.gpu_busy.labels(gpu=str(gpu)).inc(time.monotonic() - held)
            self._gpu_locks[gpu].release()
            self._free_gpus.put_nowait(gpu)

    # ------------------------------------------------------------ preconditions

    def require_profiling(self) -> None:
        """Raise FAILED_PRECONDITION when this host cannot profile."""
        if not self.host.gpus:
            raise PreconditionFailed(f"cannot profile: {self.host.unavailable_reason}", Reason.NO_GPU)
        if self.host.ncu is None:
            raise PreconditionFailed(f"cannot profile: {self.host.unavailable_reason}", Reason.NO_NCU)

    def require_gpu(self) -> None:
        """Raise FAILED_PRECONDITION when this host has no GPU to run on."""
        if not self.host.gpus:
            raise PreconditionFailed(f"cannot run: {self.host.unavailable_reason}", Reason.NO_GPU)

    def require_nvcc(self) -> None:
        """Raise FAILED_PRECONDITION when nvcc is missing."""
        if not self.host.nvcc_path:
            raise PreconditionFailed("cannot build CUDA code: nvcc is not installed on this server", Reason.NO_NVCC)

    # ------------------------------------------------------------ builds

    def _record_phases(self, stage: str, status: HarnessStatus) -> None:
        """Export the worker's phase timings as stages `stage:phase`: where a stage's time goes."""
        for phase, seconds in status.phase_seconds().items():
            self.telemetry.observe(f"{stage}:{phase}", seconds)

    def _env(self, job: _Job, gpu: int | None) -> dict[str, str]:
        return job_environment(job.workspace, gpu_index=gpu, cuda_arch=self._arch())

    def _arch(self) -> str:
        return self.config.cuda_arch or self.host.default_arch

    async def _build(
        self, job: _Job, source: SourceSpec
    ) -> tuple[CompileResult, Path | None, Path | None, HarnessStatus | None]:
        """Build in the workspace: (result, main file or binary, reference file, harness status)."""
        main, reference = source.write(job.workspace)
        job.report(Stage.COMPILING, f"building {source.main_name}")
        async with self._compile_slots, self._timed("compile"):
            if source.kind == SourceKind.CUDA_PROGRAM:
                self.require_nvcc()
                build = await build_cuda_program(
                    source=source.main_text,
                    file_name=source.main_name,
                    flags=list(source.nvcc_flags),
                    arch=self._arch(),
                    nvcc=self.host.nvcc_path,
                    nvcc_version=self.host.nvcc_version,
                    cache=self.cache,
                    timeout=self.config.limits.compile_timeout_s,
                    sandbox=self.sandbox,
                )
                return build.result, build.binary, None, None
            remembered = self.compiled.get(source)
            if remembered is not None:
                return remembered[0], main, reference, remembered[1]
            env = self._env(job, None)

            def run(argv: list[str]) -> Awaitable[ProcessResult]:
                return self._run_worker(
                    "compile",
                    argv,
                    fresh=self.sandbox.wrap_cpu,
                    cwd=job.workspace,
                    env=env,
                    timeout=self.config.limits.compile_timeout_s,
                )

            result, status = await compile_problem(
                python=self.config.python,
                main=main,
                reference=reference,
                cache_root=self.cache.root,
                workspace=job.workspace,
                run=run,
            )
            self._record_phases("compile", status)
            self.compiled.put(source, result, status)
            return result, main, reference, status

    async def compile(self, source: SourceSpec, progress: ProgressSink | None = None) -> CompileResult:
        """Build a source; a compile error is a result."""
        async with self._admit(progress) as job:
            result, _, _, _ = await self._build(job, source)
            return result

    # ------------------------------------------------------------ correctness and timing

    async def run_checks(
        self, source: SourceSpec, mode: str, options: dict[str, int], progress: ProgressSink | None = None
    ) -> tuple[CompileResult, HarnessStatus | None]:
        """Build, then run the worker harness in `mode` (correctness, benchmark, evaluate) holding a GPU."""
        self.require_gpu()
        async with self._admit(progress) as job:
            compiled, main, reference, _ = await self._build(job, source)
            if not compiled.ok or main is None:
                return compiled, None
            status_path = job.workspace / f"{mode}-status.json"
            argv = harness_argv(self.config.python, main, reference, self.cache.root, status_path, mode, **options)
            argv.append("--seed-stdin")
            # A fresh secret per job: the worker reads it from stdin before user code runs.
            secret = json.dumps({"seed": secrets.randbits(62)}).encode() + b"\n"
            async with self._gpu(job) as gpu:
                job.report(Stage.RUNNING, f"running {mode} on GPU {gpu}")
                with self.telemetry.stage(mode):
                    process = await self._run_worker(
                        f"run-gpu{gpu}",
                        argv,
                        fresh=self.sandbox.wrap,
                        cwd=job.workspace,
                        env=self._env(job, gpu),
                        timeout=self.config.limits.job_timeout_s,
                        stdin=secret,
                    )
            status = HarnessStatus.read(
                status_path, returncode=process.returncode, timed_out=process.timed_out, output=process.stderr
            )
            self._record_phases(mode, status)
            job.report(Stage.DONE, "done")
            return compiled, status

    # ------------------------------------------------------------ profile

    def _ncu_options(self, spec: ProfileSpec, report: Path) -> NcuOptions:
        metric_set = spec.metric_set or resolve("")
        assert metric_set is not None
        kernel_filter = spec.kernel_filter
        nvtx = list(kernel_filter.nvtx_include)
        count = kernel_filter.launch_count or self.config.limits.max_launches
        if not nvtx and spec.source.kind == SourceKind.PYTHON_PROBLEM:
            nvtx = [f"{HARNESS_RANGE}/"]
        elif not nvtx and marks_nvtx_ranges(spec.source.main_text):
            nvtx = [ANY_PUSH_POP_RANGE, ANY_START_END_RANGE]
        return NcuOptions(
            collection_args=metric_set.collection_args(),
            export_path=report,
            nvtx_include=nvtx,
            name_regex=kernel_filter.name_regex,
            launch_count=min(count, self.config.limits.max_launches),
            launch_skip=kernel_filter.launch_skip,
        )

    def _default_ncu_options(self, report: Path) -> NcuOptions:
        """What a Python problem's Profile collects when the request names no metric set and no filter."""
        return self._ncu_options(ProfileSpec(source=_ANY_PYTHON_PROBLEM), report)

    def _warm_ncu_options(self, report: Path) -> NcuOptions:
        """The default options plus the warm worker's own kernel, profiled in its warm-up range before the job
        (where workers prime: scheduler.standby)."""
        options = self._default_ncu_options(report)
        if not self._prime_ncu_workers:
            return options
        return dataclasses.replace(
            options,
            nvtx_include=[*options.nvtx_include, f"{PROFILER_WARMUP_RANGE}/"],
            launch_count=options.launch_count + 1,
        )

    async def _run_ncu(
        self, job: _Job, gpu: int, options: NcuOptions, argv: list[str], on_progress: Callable[[NcuProgress], None]
    ) -> NcuOutcome:
        """Run the target under ncu: on the GPU's warm worker when the options are the default ones, else fresh."""
        assert self.host.ncu is not None
        kind = f"ncu-gpu{gpu}"
        warm = argv[1:3] == ["-m", HARNESS_MODULE] and options == self._default_ncu_options(options.export_path)
        standby = await self.standby.take(kind) if warm else None
        if standby is not None:
            try:
                warm_options = self._warm_ncu_options(standby.directory / REPORT_NAME)
                command = ncu_command(self.host.ncu.path, warm_options, argv)

                def run(feed: Callable[[str], None]) -> Awaitable[ProcessResult]:
                    timeout = self.config.limits.job_timeout_s
                    return standby.run(argv[3:], cwd=job.workspace, stdin="", timeout=timeout, on_stdout=feed)

                # A primed worker's own kernel is ncu's first; the analysis leaves it out of the report's too.
                skip = 1 if self._prime_ncu_workers else 0
                outcome = await follow_ncu(command, warm_options, run, on_progress, skip_kernels=skip)
                if outcome.report is not None:
                    outcome.report = Path(shutil.move(outcome.report, options.export_path))
                return outcome
            except StandbyGone:
                pass  # it died before taking the job: run the job fresh
            finally:
                standby.discard()
        # A second ncu on the GPU beside the waiting warm workers' could wait for them: pause them meanwhile.
        async with self.standby.paused(kind):
            return await run_ncu(
                self.host.ncu.path,
                options,
                argv,
                env=self._env(job, gpu),
                cwd=job.workspace,
                timeout=self.config.limits.job_timeout_s,
                on_progress=on_progress,
                prefix=self.sandbox.network_prefix,
            )

    async def profile(self, spec: ProfileSpec, progress: ProgressSink | None = None) -> ProfileResult:
        """Build, run under ncu, read the report; with a session, add the delta against its last result."""
        return self._with_session(await self._profile(spec, progress), spec.session)

    def _with_session(self, result: ProfileResult, session: SessionKey | None) -> ProfileResult:
        """Keep the result as the session's latest and add the delta against the one before."""
        if session is not None and result.ok:
            result.session_id = session.id
            previous = self.sessions.swap(session, result)
            if previous is not None:
                result.delta = compute_delta(previous, result, load_catalog())
                result.report_text = render_text(result)
        return result

    async def _profile(self, spec: ProfileSpec, progress: ProgressSink | None) -> ProfileResult:
        self.require_profiling()
        async with self._admit(progress) as job:
            compiled, target, reference, compile_status = await self._build(job, spec.source)
            builds = list(compile_status.builds) if compile_status else []
            result = ProfileResult(job_id=job.id, compile=compiled)
            if not self.sandbox.isolates_network:
                result.warnings.append(NO_NETWORK_ISOLATION)
            if not compiled.ok or target is None:
                result.error = JobError(
                    kind="compile_error",
                    stage=Stage.COMPILING,
                    message=compiled.diagnostics[0].message if compiled.diagnostics else "the build failed",
                    detail=compiled.log[-4000:],
                )
                return self._finish(result)
            report = job.workspace / REPORT_NAME
            options = self._ncu_options(spec, report)
            status_path = job.workspace / "profile-status.json"
            if spec.source.kind == SourceKind.CUDA_PROGRAM:
                argv = [str(target)]
            else:
                argv = harness_argv(self.config.python, target, reference, self.cache.root, status_path, "profile")
            async with self._gpu(job) as gpu:
                job.report(Stage.RUNNING, f"running under ncu on GPU {gpu}")

                def on_ncu(event: NcuProgress) -> None:
                    message = f"kernel {event.kernel_index} {event.kernel_name}: {event.percent}%"
                    job.report(Stage.PROFILING, message, kernel_index=event.kernel_index, passes=event.passes)

                with self.telemetry.stage("profile"):
                    outcome = await self._run_ncu(job, gpu, options, argv, on_ncu)
            assert self.host.ncu is not None
            result.ncu = NcuRun(
                version=self.host.ncu.version,
                command=shlex.join(outcome.command),
                passes=outcome.passes,
                seconds=outcome.seconds,
            )
            if spec.source.kind == SourceKind.PYTHON_PROBLEM:
                status = HarnessStatus.read(
                    status_path, returncode=outcome.returncode, timed_out=outcome.timed_out, output=outcome.output_tail
                )
                self._record_phases("profile", status)
                builds += status.builds
                if not status.ok:
                    result.error = job_error(status)
                    return self._finish(result)
            failure = self._ncu_failure(outcome)
            if failure is not None or outcome.report is None:
                result.error = failure or JobError(kind="ncu_failed", stage=Stage.PROFILING)
                return self._finish(result)
            job.report(Stage.PARSING, "reading the report")
            if spec.source.kind == SourceKind.CUDA_PROGRAM:
                # nvcc compiled the program in its cache folder: report its lines under the user's file name.
                locations = {str(target.parent / spec.source.main_name): (spec.source.main_name, 0)}
            else:
                locations = source_map(builds, spec.source.main_name)
            analysis = await self._analyze_file(job, outcome.report, KernelFilter(), locations)
            result.device, result.kernels, result.aggregate = analysis.device, analysis.kernels, analysis.aggregate
            result.warnings.extend(analysis.warnings)
            result.warnings.extend(f"ncu: {e}" for e in outcome.errors)
            result.artifacts.append(self.workspaces.artifact(job.id, outcome.report))
            result.artifacts.extend(self._charts(job))
            result.ok = bool(result.kernels)
            if not result.ok:
                result.error = JobError(kind="no_kernels_profiled", stage=Stage.PARSING, message=analysis.warnings[0])
            job.report(Stage.DONE, "done")
            return self._finish(result)

    def _ncu_failure(self, outcome: NcuOutcome) -> JobError | None:
        """Why an ncu run left no report to read (None when it left one)."""
        if outcome.timed_out:
            return JobError(
                kind="timeout",
                stage=Stage.PROFILING,
                message=f"the job ran past its {self.config.limits.job_timeout_s:.0f} s limit and was killed",
            )
        if outcome.report is not None:
            return None
        if outcome.no_kernels or outcome.returncode == 0:
            message = "ncu profiled no kernel: the measured call launched none that matched the filter"
            return JobError(kind="no_kernels_profiled", stage=Stage.PROFILING, message=message)
        errors = "; ".join(outcome.errors) or "see detail"
        message = f"ncu failed (exit status {outcome.returncode}): {errors}"
        return JobError(kind="ncu_failed", stage=Stage.PROFILING, message=message, detail=outcome.output_tail)

    # ------------------------------------------------------------ analyze

    async def _analyze_file(
        self, job: _Job, report: Path, kernel_filter: KernelFilter, source_map: dict[str, tuple[str, int]] | None = None
    ) -> ReportAnalysis:
        argv = [self.config.python, "-m", ANALYZE_MODULE, str(report), "--filter", kernel_filter.model_dump_json()]
        argv += ["--charts", str(job.workspace), "--source-map", json.dumps(source_map or {})]
        env = job_environment(job.workspace, gpu_index=None)
        async with self._compile_slots, self._timed("parse"):
            process = await self._run_worker(
                "analyze", argv, fresh=self.sandbox.wrap_cpu, cwd=job.workspace, env=env, timeout=ANALYZE_TIMEOUT_S
            )
        if process.returncode == EXIT_UNREADABLE:
            raise InvalidRequest(process.stderr.strip().splitlines()[-1], Reason.BAD_REPORT)
        if process.returncode == EXIT_NO_READER:
            raise PreconditionFailed(process.stderr.strip().splitlines()[-1], Reason.NO_REPORT_READER)
        if not process.ok:
            raise InvalidRequest(
                f"{report.name} could not be read (the report reader exited with status {process.returncode})",
                Reason.BAD_REPORT,
            )
        return ReportAnalysis.model_validate_json(process.stdout)

    async def analyze(
        self,
        upload: Path,
        filename: str,
        kernel_filter: KernelFilter,
        progress: ProgressSink | None = None,
        session: SessionKey | None = None,
    ) -> ProfileResult:
        """Read an uploaded report (the file `upload`, moved into the job's workspace)."""
        async with self._admit(progress) as job:
            # Stored under the user's own file name, so that what the reader says of it names their file; in a
            # folder of its own, apart from the charts written beside the job.
            path = job.workspace / "upload" / _upload_name(filename)
            path.parent.mkdir()
            shutil.move(upload, path)
            job.report(Stage.PARSING, f"reading {path.name}")
            try:
                analysis = await self._analyze_file(job, path, kernel_filter)
            finally:
                # Not an artifact (the user has the file): kept, rejected uploads filled the disk.
                shutil.rmtree(path.parent, ignore_errors=True)
            result = ProfileResult(
                ok=bool(analysis.kernels),
                job_id=job.id,
                device=analysis.device,
                kernels=analysis.kernels,
                aggregate=analysis.aggregate,
                warnings=analysis.warnings,
                artifacts=self._charts(job),
            )
            if not result.ok:
                result.error = JobError(kind="no_kernels_profiled", stage=Stage.PARSING, message=analysis.warnings[0])
            return self._with_session(self._finish(result), session)

    def _charts(self, job: _Job) -> list[ArtifactRef]:
        """The roofline charts the analyze worker drew, as artifacts."""
        charts = [job.workspace / name for name in CHART_NAMES]
        return [self.workspaces.artifact(job.id, path) for path in charts if path.is_file()]

    def _finish(self, result: ProfileResult) -> ProfileResult:
        result.report_text = render_text(result)
        return result
