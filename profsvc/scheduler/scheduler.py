"""The scheduler's core: the admission queue, the GPU lease and each job's lifecycle (workspace, build, progress).

Each job runs in its own workspace. Builds run in parallel (up to `compile_workers`); a GPU is held by one job
at a time, because hardware counters need the GPU to themselves. Every process a job starts is killed with its
process group when the job ends, times out or is cancelled (a client that goes away cancels the job's task).
The paths stand on this core, a module each: `profiling`, `reading` (a report; Analyze), `finishing` (a
ProfileResult's last step), `judging` (correctness and timing), `evaluation` (the agent's tools).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

from profsvc.build.cache import BuildCache
from profsvc.build.python_problem import HarnessStatus
from profsvc.build.service import BuildCacheIndex, BuildService
from profsvc.build.toolchain import worker_environment
from profsvc.config import ServerConfig
from profsvc.host import HostInfo
from profsvc.jail import Jail, close_jail
from profsvc.jobenv import torch_arch_list
from profsvc.jobfiles import remove_left_behind, remove_tree, trash_of
from profsvc.kinds import Built, KindContext, kind_named
from profsvc.ncu.command import ncu_command
from profsvc.proc import ProcessResult
from profsvc.report.html import warm_up_html
from profsvc.scheduler.artifacts import Workspaces
from profsvc.scheduler.cells import Cells, supervised
from profsvc.scheduler.compiled import CompiledSources
from profsvc.scheduler.disk_guard import DiskGuard
from profsvc.scheduler.gpu_turns import GpuTurns
from profsvc.scheduler.jobs import ProgressSink, SourceSpec
from profsvc.scheduler.ncu_options import warm_ncu_options
from profsvc.scheduler.parsing import Parsers
from profsvc.scheduler.readers import ReaderPool
from profsvc.scheduler.sessions import SessionStore
from profsvc.scheduler.warm_pool import StandbyPool, StandbySpec
from profsvc.telemetry import Telemetry, collect_timings
from profsvc.worker.warm import WARM_LIBRARIES, WARM_PROFILER, pid_alive
from profsvc_contract.errors import PreconditionFailed, Reason, ResourceExhausted
from profsvc_contract.models import CompileResult, Progress, Stage

HARNESS_MODULE = "profsvc.worker.harness"
ANALYZE_MODULE = "profsvc.worker.analyze_report"
READER_MODULE = "profsvc.worker.reader"
BUILDER_MODULE = "profsvc.worker.builder"
JUDGE_MODULE = "profsvc.worker.judge"
UNJAILED = (
    "this server runs jobs unjailed (--unjailed): the job could read and write what the server can, and reach"
    " the network"
)
READERS_FOLDER = "readers"
# Where ncu writes its report, in a cell and in a job's workspace.
REPORT_NAME = "report.ncu-rep"


class Job:
    """Bookkeeping of one running job: its id, workspace, clock and progress sink."""

    def __init__(self, job_id: str, workspace: Path, progress: ProgressSink | None, timings: dict[str, float]) -> None:
        self.id = job_id
        self.workspace = workspace
        # Stage seconds of the call this job serves (telemetry.collect_timings), for the result.
        self.timings = timings
        self.started = time.monotonic()
        self._progress = progress

    def timings_so_far(self) -> dict[str, float]:
        """The call's stage seconds so far, with its `total` until now (for a result made before the job ends)."""
        return {**self.timings, "total": time.monotonic() - self.started}

    def progress(self, stage: Stage, message: str = "", **fields: int) -> None:
        if self._progress is not None:
            elapsed = time.monotonic() - self.started
            self._progress(Progress(stage=stage, message=message, elapsed_seconds=elapsed, **fields))


class Scheduler:
    """The core every job runs through: admission, builds, GPU leases, warm workers, and the server's state."""

    def __init__(self, config: ServerConfig, host: HostInfo, jail: Jail | None, telemetry: Telemetry) -> None:
        self.config = config
        self.host = host
        self.jail = jail
        self.telemetry = telemetry
        self.sessions = SessionStore(config.max_sessions, config.session_bytes, config.session_ttl_s)
        self.cache = BuildCache(config.cache_dir)
        self.workspaces = Workspaces(config.jobs_dir, keep=config.keep_jobs, keep_bytes=config.disk_budget_bytes)
        self._compile_slots = asyncio.Semaphore(config.compile_workers)
        # Reports read at once (scheduler.reading), each by a worker process of its own.
        self.analyze_slots = asyncio.Semaphore(config.compile_workers)
        self._free_gpus: asyncio.Queue[int] = asyncio.Queue()
        # Held by the job on a GPU, and by a warm ncu worker while it primes (scheduler.warm_pool).
        self._gpu_locks: dict[int, asyncio.Lock] = {}
        for gpu in host.gpus:
            self._free_gpus.put_nowait(gpu.index)
            self._gpu_locks[gpu.index] = asyncio.Lock()
        self._admitted = 0
        self._waiting_for_gpu = 0
        self.standby = StandbyPool(config.state_dir / "standby")
        # Warm workers start their CUDA work while no profile runs on their GPU.
        self.gpu_turns = GpuTurns()
        index_root = config.state_dir / "index"
        index_root.mkdir(parents=True, exist_ok=True)
        self.index = BuildCacheIndex(self.cache.root, index_root.resolve())
        arch_list = torch_arch_list(config.cuda_arch or host.default_arch)
        self.builds = BuildService(self.index, self._run_builder, lambda: worker_environment(config.python, arch_list))
        self.compiled = CompiledSources(self.cache.root)
        # A parse takes a CPU for up to seconds; a few parsers keep up with many callers (each about 50 MB).
        self.parsers = Parsers(min(4, config.compile_workers))
        # Started with the warm workers: a caller's reports then go to readers that stay (scheduler.readers).
        self.readers: ReaderPool | None = None
        self.cells = Cells(
            config.state_dir / "cells",
            jail,
            self.standby,
            python=config.python,
            cuda_arch=config.cuda_arch or host.default_arch,
            base_handlers={"build": self.builds.handle},
            disk=DiskGuard(config.state_dir, config.disk_reserve_bytes),
            turns=self.gpu_turns,
        )
        self._disk_guard: asyncio.Task[None] | None = None
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
        self.prime_ncu_workers = config.ncu_warmup and len(host.gpus) == 1

    # ------------------------------------------------------------ warm workers

    async def start(self) -> None:
        """Check the build cache against its index and start the warm workers the configuration asks for."""
        # What a server stopped before it could remove them left of its jobs' folders.
        for root in (self.standby.root, self.cells.root, self.config.state_dir / READERS_FOLDER):
            remove_left_behind(root, pid_alive)
            remove_tree(trash_of(root))
        if self.config.disk_reserve_bytes:
            self.cells.disk.warn_if_low()
            self._disk_guard = asyncio.get_running_loop().create_task(self.cells.disk.watch())
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
        # A reader reads about 7 reports/s (two-core machine) in about 0.3 GB: a few per caller keep up with many
        # clients; the total bounds their memory however many tokens call.
        per_caller = self.config.readers_per_caller
        if per_caller is None:
            per_caller = min(4, self.config.compile_workers)
        if per_caller:
            self.readers = ReaderPool(
                self.config.state_dir / READERS_FOLDER,
                self._spec(READER_MODULE, None),
                own=self.jail.own if self.jail is not None else lambda _folder: None,
                own_descriptor=self.jail.own_descriptor if self.jail is not None else lambda _fd: None,
                per_caller=per_caller,
                max_readers=min(16, max(per_caller, 2 * self.config.compile_workers)),
            )
        for gpu in self._gpu_indices():
            # Not under ncu: this one may also start the GPU libraries a timing run needs (cuBLAS, CUPTI).
            # A check takes one of each. An agent checks every 4 to 5 s when it alternates checks and profiles
            # back to back, and beside a profile a GPU worker took about 12 s to warm up (torch, a CUDA context,
            # cuBLAS and CUPTI; an H100): three of each let its next check find one warm.
            run = self._spec(HARNESS_MODULE, gpu, readonly=cache, extra={WARM_LIBRARIES: "1"})
            self.standby.keep(f"run-gpu{gpu}", run, depth=3)
            judge = self._spec(JUDGE_MODULE, gpu, readonly=cache, extra={WARM_LIBRARIES: "1"})
            self.standby.keep(f"judge-gpu{gpu}", judge, depth=3)
            if self.host.ncu is not None:
                self.standby.keep(f"ncu-gpu{gpu}", self._ncu_standby_spec(gpu), depth=2)

    def isolation(self) -> str:
        """How job processes are isolated here, in one line."""
        return self.jail.describe() if self.jail is not None else UNJAILED

    async def close(self) -> None:
        """Stop the glue headers' builder and the warm workers, and release the jail's cgroups."""
        if self._disk_guard is not None:
            self._disk_guard.cancel()
        await self.builds.close()
        await self.standby.close()
        if self.readers is not None:
            await self.readers.close()
        await self.parsers.close()
        await close_jail(self.jail)

    def _gpu_indices(self) -> list[int]:
        return [gpu.index for gpu in self.host.gpus]

    def _worker_argv(self, module: str, directory: Path) -> list[str]:
        # A jailed worker cannot see the server's pid (its own PID namespace): 0 turns that lifeline off; the
        # jail dies with the server instead.
        server = 0 if self.jail is not None else os.getpid()
        argv = [self.config.python, "-m", module, "--standby", str(directory), "--server-pid", str(server)]
        return supervised(self.config.python, argv)

    def _spec(
        self, module: str, gpu: int | None, *, readonly: list[Path] | None = None, extra: dict[str, str] | None = None
    ) -> StandbySpec:
        return self.cells.spec(
            lambda directory: self._worker_argv(module, directory), gpu, readonly=readonly or [], extra=extra
        )

    def _ncu_standby_spec(self, gpu: int) -> StandbySpec:
        def command(directory: Path) -> list[str]:
            assert self.host.ncu is not None
            options = warm_ncu_options(directory / REPORT_NAME, self.config.limits, self.prime_ncu_workers)
            return ncu_command(self.host.ncu.path, options, self._worker_argv(HARNESS_MODULE, directory))

        primed = self.prime_ncu_workers
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

        # A shared binding is made beside the job whose build lacked it, for its next one: it takes no slot a
        # job could be waiting for, and is no job's build time.
        beside = request.get("op") == "bind"
        async with (
            self._compile_slots if not beside else contextlib.nullcontext(),
            self.timed("build") if not beside else contextlib.nullcontext(),
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
    async def timed(self, stage: str) -> AsyncIterator[None]:
        """Time a stage of the current job; async, to sit in one `async with` beside the slot and cell it times."""
        with self.telemetry.stage(stage):
            yield

    @contextlib.asynccontextmanager
    async def admit(self, progress: ProgressSink | None) -> AsyncIterator[Job]:
        """A queue place and a workspace for one job, given back (the workspace kept, then pruned) when it ends."""
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
                    job = Job(job_id, workspace, progress, timings)
                    job.progress(Stage.QUEUED, "accepted", queue_position=max(0, self._admitted - 1))
                    yield job
            finally:
                self.workspaces.finish(job_id)
        finally:
            self._admitted -= 1
            self.telemetry.queue_depth.set(self._admitted)

    @contextlib.asynccontextmanager
    async def gpu_lease(self, job: Job) -> AsyncIterator[int]:
        """A free GPU's index, its lock held until the job gives it back: one job on a GPU at a time."""
        self._waiting_for_gpu += 1
        try:
            if self._free_gpus.empty():
                job.progress(Stage.QUEUED, "waiting for a GPU", queue_position=self._waiting_for_gpu)
            with self.telemetry.stage("gpu_wait"):
                gpu = await self._free_gpus.get()
                try:
                    # A warm worker priming on this GPU stops: priming never delays a job (scheduler.warm_pool).
                    self.standby.stop_priming(self._gpu_locks[gpu])
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

    def record_phases(self, stage: str, status: HarnessStatus, ended: float = 0.0, ran: float = 0.0) -> None:
        """Export the worker's phase timings as stages `stage:phase`: where a stage's time goes. With `ended` and
        `ran` (when its process's end was seen, after how long a run), also `stage:exit`, from its status written
        to that end."""
        for phase, seconds in status.phase_seconds().items():
            self.telemetry.observe(f"{stage}:{phase}", seconds)
        exited = status.seconds_to_exit(ended, ran)
        if exited is not None:
            self.telemetry.observe(f"{stage}:exit", exited)

    async def build(self, job: Job, source: SourceSpec) -> Built:
        """Build the source as its kind does (profsvc.kinds); a compile error is a result."""
        job.progress(Stage.COMPILING, f"building {source.main_name}")
        built = await kind_named(source.kind).build(self.kinds, source)
        if built.status is not None:
            self.record_phases("compile", built.status)
        return built

    async def compile(self, source: SourceSpec, progress: ProgressSink | None = None) -> CompileResult:
        """Build a source; a compile error is a result."""
        async with self.admit(progress) as job:
            result = (await self.build(job, source)).compile
            return result.model_copy(update={"timings": job.timings_so_far()})
