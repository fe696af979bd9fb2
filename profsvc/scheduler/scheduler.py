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
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path, PurePath

from profsvc.build.cache import BuildCache
from profsvc.build.python_problem import HarnessStatus, harness_argv, job_error, source_map
from profsvc.build.service import BuildCacheIndex, BuildService
from profsvc.build.toolchain import worker_environment
from profsvc.config import ServerConfig
from profsvc.host import HostInfo
from profsvc.jail import Jail, close_jail
from profsvc.jobenv import torch_arch_list
from profsvc.kinds import PROGRAM_TARGET, Built, KindContext, RunTarget, kind_named
from profsvc.metrics.analysis import ReportAnalysis
from profsvc.metrics.catalog import load_catalog
from profsvc.metrics.nvtx import MEASURED_INCLUDE, WARMUP_INCLUDE
from profsvc.ncu.command import (
    NcuOptions,
    ncu_command,
)
from profsvc.ncu.metric_sets import resolve
from profsvc.ncu.runner import NcuOutcome, NcuProgress, ProgressParser, ncu_outcome
from profsvc.proc import ProcessResult
from profsvc.report.delta import compute_delta
from profsvc.report.html import render_html, warm_up_html
from profsvc.report.markdown import render_markdown
from profsvc.report.text import render_text
from profsvc.scheduler.artifacts import Workspaces
from profsvc.scheduler.cells import Cells
from profsvc.scheduler.compiled import CompiledSources
from profsvc.scheduler.jobs import ProfileSpec, ProgressSink, SourceSpec
from profsvc.scheduler.program_outcome import program_failure
from profsvc.scheduler.relay import Relay
from profsvc.scheduler.sessions import SessionKey, SessionStore
from profsvc.scheduler.warm_pool import StandbyPool, StandbySpec
from profsvc.staticcheck.own_kernels import own_kernel_names
from profsvc.telemetry import JOB_TIMINGS, Telemetry, collect_timings
from profsvc.worker.warm import WARM_LIBRARIES, WARM_PROFILER
from profsvc_contract.errors import InvalidRequest, PreconditionFailed, Reason, ResourceExhausted
from profsvc_contract.models import (
    ArtifactRef,
    CompileResult,
    JobError,
    KernelFilter,
    NcuRun,
    ProfileResult,
    Progress,
    SourceKind,
    Stage,
    Target,
)

HARNESS_MODULE = "profsvc.worker.harness"
ANALYZE_MODULE = "profsvc.worker.analyze_report"
BUILDER_MODULE = "profsvc.worker.builder"
JUDGE_MODULE = "profsvc.worker.judge"
# How long the candidate's process gets to exit once the judge is done.
CANDIDATE_EXIT_S = 5.0
UNJAILED = (
    "this server runs jobs unjailed (--unjailed): the job could read and write what the server can, and reach"
    " the network"
)
ANALYZE_TIMEOUT_S = 300.0
REPORT_NAME = "report.ncu-rep"
CHART_NAMES = ("roofline.png", "roofline.svg")
# The HTML report of a result with kernels (profsvc.report.html).
HTML_NAME = "report.html"
# The options of a default Profile depend only on the source's kind: this stands for any Python problem.
_ANY_PYTHON_PROBLEM = SourceSpec(kind=SourceKind.PYTHON_PROBLEM, main_name="", main_text="")
# Exit statuses of the analyze worker (profsvc.worker.analyze_report).
EXIT_UNREADABLE, EXIT_NO_READER = 3, 4


class _Job:
    """Bookkeeping of one running job: its id, workspace, clock and progress sink."""

    def __init__(self, job_id: str, workspace: Path, progress: ProgressSink | None, timings: dict[str, float]) -> None:
        self.id = job_id
        self.workspace = workspace
        # Stage seconds of the call this job serves (telemetry.collect_timings), for the result.
        self.timings = timings
        self.started = time.monotonic()
        self._progress = progress

    def progress(self, stage: Stage, message: str = "", **fields: int) -> None:
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


def _compile_error(compiled: CompileResult) -> JobError:
    return JobError(
        kind="compile_error",
        stage=Stage.COMPILING,
        message=compiled.diagnostics[0].message if compiled.diagnostics else "the build failed",
        detail=compiled.log[-4000:],
    )


class Scheduler:
    """Runs compile, profile and analyze jobs."""

    def __init__(self, config: ServerConfig, host: HostInfo, jail: Jail | None, telemetry: Telemetry) -> None:
        self.config = config
        self.host = host
        self.jail = jail
        self.telemetry = telemetry
        self.sessions = SessionStore(config.max_sessions, config.session_bytes, config.session_ttl_s)
        self.cache = BuildCache(config.cache_dir)
        self.workspaces = Workspaces(config.jobs_dir, keep=config.keep_jobs, keep_bytes=config.disk_budget_bytes)
        self._compile_slots = asyncio.Semaphore(config.compile_workers)
        self._analyze_slots = asyncio.Semaphore(config.compile_workers)
        self._free_gpus: asyncio.Queue[int] = asyncio.Queue()
        # Held by the job on a GPU, and by a warm ncu worker while it primes (scheduler.warm_pool).
        self._gpu_locks: dict[int, asyncio.Lock] = {}
        for gpu in host.gpus:
            self._free_gpus.put_nowait(gpu.index)
            self._gpu_locks[gpu.index] = asyncio.Lock()
        self._admitted = 0
        self._waiting_for_gpu = 0
        self.standby = StandbyPool(config.state_dir / "standby")
        index_root = config.state_dir / "index"
        index_root.mkdir(parents=True, exist_ok=True)
        self.index = BuildCacheIndex(self.cache.root, index_root.resolve())
        arch_list = torch_arch_list(config.cuda_arch or host.default_arch)
        self.builds = BuildService(self.index, self._run_builder, lambda: worker_environment(config.python, arch_list))
        self.compiled = CompiledSources()
        self.cells = Cells(
            config.state_dir / "cells",
            jail,
            self.standby,
            cuda_arch=config.cuda_arch or host.default_arch,
            base_handlers={"build": self.builds.handle},
        )
        self.kinds = KindContext(
            config=config,
            host=host,
            cells=self.cells,
            cache_root=self.cache.root,
            index=self.index,
            compile_slots=self._compile_slots,
            telemetry=telemetry,
            compiled=self.compiled,
        )
        # A primed worker holds up every other ncu's kernels on its GPU while it waits (measured on one H200:
        # tools/ncu_lock_probe.sh). Whether that hold spans GPUs is not measured: with several GPUs, an idle
        # primed worker might hold up every other GPU's profiles, so only a one-GPU host primes.
        self._prime_ncu_workers = config.ncu_warmup and len(host.gpus) == 1
        self.compiled = CompiledSources()

    # ------------------------------------------------------------ warm workers

    async def start(self) -> None:
        """Check the build cache against its index and start the warm workers the configuration asks for."""
        self.standby.remove_stale()
        await asyncio.to_thread(self.index.sweep)
        if not self.config.warm_workers:
            return
        # Paid ahead like the warm workers: the glue headers every CUDA build reads (without them, the first
        # such build waits for them), and the HTML report's charting library (a first import of a few tenths of
        # a second, otherwise on the first result's clock).
        self.builds.prepare_headers()
        asyncio.get_running_loop().run_in_executor(None, warm_up_html)
        cache = [self.cache.root]
        # Two where jobs arrive faster than a worker warms up (a batch): builds, and profiles on each GPU.
        self.standby.keep("compile", self._spec(HARNESS_MODULE, None, readonly=cache), depth=2)
        self.standby.keep("builder", self._spec(BUILDER_MODULE, None, readonly=cache))
        self.standby.keep("analyze", self._spec(ANALYZE_MODULE, None))
        for gpu in self._gpu_indices():
            # Not under ncu: this one may also start the GPU libraries a timing run needs (cuBLAS, CUPTI).
            # A check takes one of each; two of each let an agent's next call find them warm while the
            # replacements start (a GPU worker warms up in seconds: torch, a CUDA context, cuBLAS and CUPTI).
            run = self._spec(HARNESS_MODULE, gpu, readonly=cache, extra={WARM_LIBRARIES: "1"})
            self.standby.keep(f"run-gpu{gpu}", run, depth=2)
            judge = self._spec(JUDGE_MODULE, gpu, readonly=cache, extra={WARM_LIBRARIES: "1"})
            self.standby.keep(f"judge-gpu{gpu}", judge, depth=2)
            if self.host.ncu is not None:
                self.standby.keep(f"ncu-gpu{gpu}", self._ncu_standby_spec(gpu), depth=2)

    def isolation(self) -> str:
        """How job processes are isolated here, in one line."""
        return self.jail.describe() if self.jail is not None else UNJAILED

    async def close(self) -> None:
        """Stop the glue headers' builder and the warm workers, and release the jail's cgroups."""
        await self.builds.close()
        await self.standby.close()
        await close_jail(self.jail)

    def _gpu_indices(self) -> list[int]:
        return [gpu.index for gpu in self.host.gpus]

    def _worker_argv(self, module: str, directory: Path) -> list[str]:
        # A jailed worker cannot see the server's pid (its own PID namespace): 0 turns that lifeline off; the
        # jail dies with the server instead.
        server = 0 if self.jail is not None else os.getpid()
        return [self.config.python, "-m", module, "--standby", str(directory), "--server-pid", str(server)]

    def _spec(
        self, module: str, gpu: int | None, *, readonly: list[Path] | None = None, extra: dict[str, str] | None = None
    ) -> StandbySpec:
        return self.cells.spec(
            lambda directory: self._worker_argv(module, directory), gpu, readonly=readonly or [], extra=extra
        )

    def _ncu_standby_spec(self, gpu: int) -> StandbySpec:
        def command(directory: Path) -> list[str]:
            assert self.host.ncu is not None
            options = self._warm_ncu_options(directory / REPORT_NAME)
            return ncu_command(self.host.ncu.path, options, self._worker_argv(HARNESS_MODULE, directory))

        primed = self._prime_ncu_workers
        return self.cells.spec(
            command,
            gpu,
            readonly=[self.cache.root],
            extra={WARM_PROFILER: "1"} if primed else None,
            prime_lock=self._gpu_locks[gpu] if primed else None,
        )

    @contextlib.asynccontextmanager
    async def _run_builder(self, request: dict[str, object]) -> AsyncIterator[tuple[ProcessResult, Path]]:
        """The trusted builder in a cell of its own (build.service): its staging folder is the cell."""

        def argv(cell: Path) -> list[str]:
            command = [self.config.python, "-m", BUILDER_MODULE, "--request", str(cell / "request.json")]
            command += ["--result", str(cell / "result.json"), "--cache", str(self.cache.root)]
            return [*command, "--staging", str(cell)]

        async with (
            self._compile_slots,
            self._timed("build"),
            self.cells.run(
                "builder",
                argv,
                files={"request.json": json.dumps(request)},
                gpu=None,
                timeout=self.config.limits.compile_timeout_s,
                readonly=[self.cache.root],
            ) as ran,
        ):
            yield ran

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
                with collect_timings() as timings:
                    job = _Job(job_id, workspace, progress, timings)
                    job.progress(Stage.QUEUED, "accepted", queue_position=max(0, self._admitted - 1))
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
                job.progress(Stage.QUEUED, "waiting for a GPU", queue_position=self._waiting_for_gpu)
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

    def _arch(self) -> str:
        return self.config.cuda_arch or self.host.default_arch

    async def _build(self, job: _Job, source: SourceSpec) -> Built:
        """Build the source as its kind does (profsvc.kinds); a compile error is a result."""
        job.progress(Stage.COMPILING, f"building {source.main_name}")
        built = await kind_named(source.kind).build(self.kinds, source)
        if built.status is not None:
            self._record_phases("compile", built.status)
        return built

    async def compile(self, source: SourceSpec, progress: ProgressSink | None = None) -> CompileResult:
        """Build a source; a compile error is a result."""
        async with self._admit(progress) as job:
            result = (await self._build(job, source)).compile
            return result.model_copy(update={"timings": dict(job.timings)})

    # ------------------------------------------------------------ correctness and timing

    async def run_checks(
        self,
        source: SourceSpec,
        mode: str,
        options: dict[str, int | str],
        progress: ProgressSink | None = None,
        own_kernel: bool = True,
    ) -> tuple[CompileResult, HarnessStatus | None]:
        """Build, then run `mode` (correctness, benchmark, evaluate) on a GPU: the judge in one cell, the
        candidate's process in another (profsvc.worker.judge); the judge's status is the answer. `options`: the
        judge's (trials, timed-calls, warmup, precision).
        `own_kernel`: a call that launches no kernel of the candidate's own fails correctness."""
        self.require_gpu()
        async with self._admit(progress) as job:
            compiled = (await self._build(job, source)).compile
            if not compiled.ok:
                return compiled, None
            async with self._gpu(job) as gpu:
                job.progress(Stage.RUNNING, f"running {mode} on GPU {gpu}")
                with self.telemetry.stage(mode):
                    status = await self._judged(source, mode, options, gpu, own_kernel)
            self._record_phases(mode, status)
            job.progress(Stage.DONE, "done")
            return compiled, status

    async def _judged(
        self, source: SourceSpec, mode: str, options: dict[str, int | str], gpu: int, own_kernel: bool
    ) -> HarnessStatus:
        """The judge and the candidate's process, paired by a relay; the judge's status."""
        relay = Relay()
        status_name = f"{mode}-status.json"
        timeout = self.config.limits.job_timeout_s
        # The judge holds the reference (the whole file where the problem comes as one), the candidate's process
        # its own file alone.
        reference_name, reference_text = (
            (source.reference_name, source.reference_text)
            if source.reference_name
            else (source.main_name, source.main_text)
        )
        names, vendor = own_kernel_names(source.main_text)
        judge_files: dict[str, str | bytes] = {
            reference_name: reference_text,
            "own-kernels.json": json.dumps({"names": sorted(names), "vendor": vendor}),
        }

        def judge_argv(cell: Path) -> list[str]:
            relay.judge_cell = cell
            command = [self.config.python, "-m", JUDGE_MODULE, "--reference", str(cell / reference_name)]
            command += ["--cache", str(self.cache.root)]
            command += ["--status", str(cell / status_name), "--mode", mode]
            # The options a mode names (trials, timed-calls, warmup, precision); the judge's defaults for the others.
            for name, value in options.items():
                command += [f"--{name}", str(value)]
            if alone:
                return [*command, "--no-candidate"]
            return [*command, "--own-kernels", str(cell / "own-kernels.json")] if own_kernel else command

        def candidate_argv(cell: Path) -> list[str]:
            relay.candidate_cell = cell
            main = cell / source.main_name
            return harness_argv(self.config.python, main, None, self.cache.root, cell / "status.json", "candidate")

        async def candidate() -> None:
            process = None
            try:
                async with self.cells.run(
                    f"run-gpu{gpu}",
                    candidate_argv,
                    files={source.main_name: source.main_text},
                    gpu=gpu,
                    timeout=timeout,
                    readonly=[self.cache.root],
                    handlers={"next": relay.candidate_next},
                ) as (process, _):
                    pass
            finally:
                relay.candidate_ended(process)

        alone = source.target == Target.REFERENCE
        running = asyncio.get_running_loop().create_task(candidate() if not alone else asyncio.sleep(0))
        # A fresh secret per job, read by the judge from stdin: the candidate's process never sees it.
        secret = json.dumps({"seed": secrets.randbits(62)}).encode() + b"\n"
        try:
            async with self.cells.run(
                f"judge-gpu{gpu}",
                judge_argv,
                files=judge_files,
                gpu=gpu,
                timeout=timeout,
                readonly=[self.cache.root],
                stdin=secret,
                handlers={"candidate": relay.judge_command},
            ) as (process, cell):
                status = HarnessStatus.read(
                    cell / status_name,
                    returncode=process.returncode,
                    timed_out=process.timed_out,
                    output=process.stderr,
                )
        finally:
            relay.judge_ended()
            # The candidate's process was told to exit: a moment for that, then it is killed.
            done, _ = await asyncio.wait([running], timeout=CANDIDATE_EXIT_S)
            if not done:
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running
        return status

    # ------------------------------------------------------------ profile

    def _ncu_options(self, spec: ProfileSpec, report: Path, default_nvtx: list[str]) -> NcuOptions:
        """ncu's options for a Profile: the request's metric set and filter; its kind's NVTX ranges by default."""
        metric_set = spec.metric_set or resolve("")
        assert metric_set is not None
        kernel_filter = spec.kernel_filter
        nvtx = list(kernel_filter.nvtx_include) or list(default_nvtx)
        count = kernel_filter.launch_count or self.config.limits.max_launches
        return NcuOptions(
            collection_args=metric_set.collection_args(spec.collected()),
            export_path=report,
            nvtx_include=nvtx,
            name_regex=kernel_filter.name_regex,
            launch_count=min(count, self.config.limits.max_launches),
            launch_skip=kernel_filter.launch_skip,
            clock_control=spec.clock_control,
        )

    def _default_ncu_options(self, report: Path) -> NcuOptions:
        """What a Python problem's Profile collects when the request names no metric set and no filter."""
        return self._ncu_options(ProfileSpec(source=_ANY_PYTHON_PROBLEM), report, [MEASURED_INCLUDE])

    def _warm_ncu_options(self, report: Path) -> NcuOptions:
        """The default options plus the warm worker's own kernel, profiled in its warm-up range before the job
        (where workers prime: scheduler.warm_pool)."""
        options = self._default_ncu_options(report)
        if not self._prime_ncu_workers:
            return options
        return dataclasses.replace(
            options,
            nvtx_include=[*options.nvtx_include, WARMUP_INCLUDE],
            launch_count=options.launch_count + 1,
        )

    def _takes_warm_worker(self, options: NcuOptions, target: RunTarget, kind: str) -> bool:
        """Whether the warm ncu worker `kind` may run the target. Its ncu started ahead of the job with the default
        options, which it cannot change: a job with any other (a clock control, a metric set, a filter) would be
        served with the worker's, so it starts a fresh ncu."""
        return (
            target.warm and options == self._default_ncu_options(options.export_path) and kind in self.standby.kinds()
        )

    async def _run_ncu(
        self, job: _Job, gpu: int, options: NcuOptions, target: RunTarget, on_progress: Callable[[NcuProgress], None]
    ) -> NcuOutcome:
        """Run the target under ncu in a cell: on the GPU's warm worker when it may and the options are the
        default ones, else fresh. The report and the target's status file are moved out of the cell into the
        job's workspace (the outcome names the report there)."""
        assert self.host.ncu is not None
        ncu = self.host.ncu.path
        kind = f"ncu-gpu{gpu}"
        make_argv = target.argv
        warm = self._takes_warm_worker(options, target, kind)
        # A primed worker's own kernel is ncu's first; the analysis leaves it out of the report's too.
        parser = ProgressParser(on_progress, skip_kernels=1 if warm and self._prime_ncu_workers else 0)
        commands: list[list[str]] = []

        def fresh(argv: list[str], cell: Path) -> list[str]:
            commands.append(ncu_command(ncu, dataclasses.replace(options, export_path=cell / REPORT_NAME), argv))
            return commands[-1]

        def argv(cell: Path) -> list[str]:
            if warm:
                commands.append(ncu_command(ncu, self._warm_ncu_options(cell / REPORT_NAME), make_argv(cell)))
            return make_argv(cell)

        async with self.cells.run(
            kind if warm else "",
            argv,
            files=target.files,
            gpu=gpu,
            timeout=self.config.limits.job_timeout_s,
            readonly=target.readonly,
            on_stdout=parser.feed,
            fresh=fresh,
        ) as (process, cell):
            outcome = ncu_outcome(commands[-1] if commands else [], process, parser, cell / REPORT_NAME)
            if outcome.report is not None:
                outcome.report = Path(shutil.move(outcome.report, options.export_path))
            status = cell / target.status_name
            if target.status_name and status.is_file() and not status.is_symlink():
                shutil.move(status, job.workspace / target.status_name)
        return outcome

    async def profile(self, spec: ProfileSpec, progress: ProgressSink | None = None) -> ProfileResult:
        """Build, run under ncu, read the report; with a session, add the delta against its last result."""
        result = self._with_session(await self._profile(spec, progress), spec.session)
        return await self._with_html(result) if spec.html_report else result

    async def _with_html(self, result: ProfileResult) -> ProfileResult:
        """The result's HTML report as an artifact, where it has kernels (rendered off the event loop)."""
        if not result.kernels or not result.job_id:
            return result
        try:
            text = await asyncio.to_thread(render_html, result)
        except ImportError as error:  # a server installed without its charting library
            result.warnings.append(f"no HTML report: {error}")
            return result
        path = self.workspaces.root / result.job_id / HTML_NAME
        path.write_text(text, encoding="utf-8")
        result.artifacts.append(self.workspaces.artifact(result.job_id, path))
        return result

    def _with_session(self, result: ProfileResult, session: SessionKey | None) -> ProfileResult:
        """Keep the result as the session's latest and add the delta against the one before."""
        if session is not None and result.ok:
            result.session_id = session.id
            previous = self.sessions.swap(session, result)
            if previous is not None:
                result.delta = compute_delta(previous, result, load_catalog())
                result.report_text = render_text(result)
                result.report_markdown = render_markdown(result)
        result.report_markdown = render_markdown(result)
        return result

    async def _profile(self, spec: ProfileSpec, progress: ProgressSink | None) -> ProfileResult:
        self.require_profiling()
        async with self._admit(progress) as job:
            source = spec.source
            built = await self._build(job, source)
            result = ProfileResult(job_id=job.id, compile=built.compile)
            if self.jail is None:
                result.warnings.append(UNJAILED)
            if not built.ok:
                result.error = _compile_error(built.compile)
                return self._finish(result)
            target = kind_named(source.kind).run_target(self.kinds, source, built)
            result.target = target.target
            options = self._ncu_options(spec, job.workspace / REPORT_NAME, target.default_nvtx)
            async with self._gpu(job) as gpu:
                job.progress(Stage.RUNNING, f"running under ncu on GPU {gpu}")

                def on_ncu(event: NcuProgress) -> None:
                    message = f"kernel {event.kernel_index} {event.kernel_name}: {event.percent}%"
                    job.progress(Stage.PROFILING, message, kernel_index=event.kernel_index, passes=event.passes)

                with self.telemetry.stage("profile"):
                    outcome = await self._run_ncu(job, gpu, options, target, on_ncu)
            assert self.host.ncu is not None
            result.ncu = NcuRun(
                version=self.host.ncu.version,
                command=shlex.join(outcome.command),
                passes=outcome.passes,
                seconds=outcome.seconds,
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
                self._record_phases("profile", status)
                # Extensions built lazily during the run: their lines too.
                locations.update(source_map(status.builds, source.main_name))
                result.warnings.extend(status.warnings)
                if not status.ok and target.target != PROGRAM_TARGET:
                    result.error = job_error(status)
                    return self._finish(result)
            if target.target == PROGRAM_TARGET:
                # Told in the program's terms, with its last lines of output.
                default_selection = not spec.kernel_filter.nvtx_include
                program_error = program_failure(
                    source.main_name, outcome, status, options, default_selection=default_selection
                )
                if program_error is not None:
                    result.error = program_error
                    return self._finish(result)
            failure = self._ncu_failure(outcome)
            if failure is not None or outcome.report is None:
                result.error = failure or JobError(kind="ncu_failed", stage=Stage.PROFILING)
                return self._finish(result)
            job.progress(Stage.PARSING, "reading the report")
            analysis = await self._analyze_file(
                job, outcome.report, KernelFilter(), locations, spec.metrics, spec.derived
            )
            result.device, result.kernels, result.aggregate = analysis.device, analysis.kernels, analysis.aggregate
            result.warnings.extend(analysis.warnings)
            result.warnings.extend(f"ncu: {e}" for e in outcome.errors)
            result.artifacts.append(self.workspaces.artifact(job.id, outcome.report))
            result.artifacts.extend(self._charts(job))
            result.ok = bool(result.kernels)
            if not result.ok:
                result.error = JobError(kind="no_kernels_profiled", stage=Stage.PARSING, message=analysis.warnings[0])
            job.progress(Stage.DONE, "done")
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
        self,
        job: _Job,
        report: Path,
        kernel_filter: KernelFilter,
        source_map: dict[str, tuple[str, int]] | None = None,
        metrics: Sequence[str] = (),
        derived: Sequence[str] = (),
    ) -> ReportAnalysis:
        """Read a report in an analyze worker's cell (a copy of it: the reader may be fed a hostile file); its
        charts are moved into the job's workspace."""

        def argv(cell: Path) -> list[str]:
            command = [self.config.python, "-m", ANALYZE_MODULE, str(cell / "report" / report.name)]
            command += ["--filter", kernel_filter.model_dump_json(), "--charts", str(cell)]
            command += ["--metrics", json.dumps(list(metrics)), "--derived", json.dumps(list(derived))]
            return [*command, "--source-map", json.dumps(source_map or {})]

        async with (
            self._analyze_slots,
            self._timed("parse"),
            self.cells.run(
                "analyze",
                argv,
                files={f"report/{report.name}": report},
                gpu=None,
                timeout=ANALYZE_TIMEOUT_S,
            ) as (process, cell),
        ):
            for name in CHART_NAMES:
                if (cell / name).is_file() and not (cell / name).is_symlink():
                    shutil.move(cell / name, job.workspace / name)
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
        metrics: Sequence[str] = (),
        derived: Sequence[str] = (),
        *,
        html_report: bool = False,
    ) -> ProfileResult:
        """Read an uploaded report (the file `upload`, moved into the job's workspace); `metrics`: ncu metrics to
        report besides the catalog's; `derived`: NAME=FORMULA metrics over ncu metrics; `html_report`: also write
        report.html."""
        async with self._admit(progress) as job:
            # Stored under the user's own file name, so that what the reader says of it names their file; in a
            # folder of its own, apart from the charts written beside the job.
            path = job.workspace / "upload" / _upload_name(filename)
            path.parent.mkdir()
            shutil.move(upload, path)
            job.progress(Stage.PARSING, f"reading {path.name}")
            try:
                analysis = await self._analyze_file(job, path, kernel_filter, metrics=metrics, derived=derived)
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
            result = self._with_session(self._finish(result), session)
            return await self._with_html(result) if html_report else result

    def _charts(self, job: _Job) -> list[ArtifactRef]:
        """The roofline charts the analyze worker drew, as artifacts."""
        charts = [job.workspace / name for name in CHART_NAMES]
        return [self.workspaces.artifact(job.id, path) for path in charts if path.is_file()]

    def _finish(self, result: ProfileResult) -> ProfileResult:
        timings = JOB_TIMINGS.get()
        if timings is not None:
            result.timings = dict(timings)
        result.report_text = render_text(result)
        result.report_markdown = render_markdown(result)
        return result
