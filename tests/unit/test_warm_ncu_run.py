"""Warm ncu workers in the scheduler: which ones prime, with which ncu options."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from profsvc.config import ServerConfig
from profsvc.host import HostInfo
from profsvc.kinds import RunTarget
from profsvc.metrics.analysis import analyze_report
from profsvc.metrics.nvtx import MEASURED_INCLUDE, PROFILER_WARMUP_RANGE, in_profsvc_range
from profsvc.ncu.locate import NcuInstall
from profsvc.proc import ProcessResult
from profsvc.report.text import render_text
from profsvc.scheduler.jobs import ProfileSpec, SourceSpec
from profsvc.scheduler.ncu_options import default_ncu_options, profile_ncu_options, warm_ncu_options
from profsvc.scheduler.profiling import _run_ncu
from profsvc.scheduler.scheduler import Job, Scheduler
from profsvc.server import app
from profsvc.telemetry import Telemetry
from profsvc.worker.warm import READY, WARM_PROFILER
from profsvc_client import cli
from profsvc_contract.models import ClockControl, GpuInfo, NcuRun, ProfileResult, SourceKind
from tests.conftest import FIXTURES


def _scheduler(tmp_path: Path, gpus: int, **config: object) -> Scheduler:
    host = HostInfo(
        gpus=[
            GpuInfo(index=i, name="NVIDIA H200", compute_capability="9.0", memory_bytes=1 << 30) for i in range(gpus)
        ],
        ncu=NcuInstall(path="/usr/local/bin/ncu", version="2025.3.1"),
    )
    return Scheduler(
        ServerConfig(state_dir=tmp_path / "state", **config),
        host,
        None,
        Telemetry(),
    )


def test_a_one_gpu_host_primes_its_ncu_workers_with_their_own_range(tmp_path):
    scheduler = _scheduler(tmp_path, gpus=1)
    spec = scheduler._ncu_standby_spec(0)
    assert spec.prime_lock is scheduler._gpu_locks[0]
    assert spec.environment(tmp_path)[WARM_PROFILER] == "1"
    limits = scheduler.config.limits
    default = default_ncu_options(tmp_path / "r.ncu-rep", limits)
    warm = warm_ncu_options(tmp_path / "r.ncu-rep", limits, scheduler.prime_ncu_workers)
    # ncu's syntax for a push/pop range of a named domain (Nsight Compute CLI guide, NVTX filtering).
    assert default.nvtx_include == ["profsvc@profsvc/"]
    assert warm.nvtx_include == ["profsvc@profsvc/", "profsvc@profsvc-warmup/"]
    assert warm.launch_count == default.launch_count + 1
    command = spec.command(tmp_path)
    assert [command[i + 1] for i, arg in enumerate(command) if arg == "--nvtx-include"] == warm.nvtx_include


@pytest.mark.parametrize(("gpus", "config"), [(2, {}), (1, {"ncu_warmup": False})], ids=["two GPUs", "turned off"])
def test_no_priming_with_several_gpus_or_when_turned_off(tmp_path, gpus, config):
    # A primed worker holds up other ncu runs while it waits; the hold's scope across GPUs is not measured.
    scheduler = _scheduler(tmp_path, gpus=gpus, **config)
    for gpu in range(gpus):
        spec = scheduler._ncu_standby_spec(gpu)
        assert spec.prime_lock is None
        assert WARM_PROFILER not in spec.environment(tmp_path)
    report = tmp_path / "r.ncu-rep"
    limits = scheduler.config.limits
    assert warm_ncu_options(report, limits, scheduler.prime_ncu_workers) == default_ncu_options(report, limits)


def _clock_control(argv: list[str]) -> str:
    return argv[argv.index("--clock-control") + 1]


@pytest.mark.parametrize(("gpus", "config"), [(1, {}), (2, {}), (1, {"ncu_warmup": False})])
def test_warm_ncu_workers_start_with_the_clocks_left_alone(tmp_path, gpus, config):
    scheduler = _scheduler(tmp_path, gpus=gpus, **config)
    assert {_clock_control(list(scheduler._ncu_standby_spec(gpu).command(tmp_path))) for gpu in range(gpus)} == {"none"}


@pytest.mark.parametrize(("clock_control", "taken"), [(ClockControl.NONE, "ncu-gpu0"), (ClockControl.BASE, "")])
def test_a_clock_control_the_warm_worker_lacks_starts_a_fresh_ncu(tmp_path, monkeypatch, clock_control, taken):
    scheduler = _scheduler(tmp_path, gpus=1)
    monkeypatch.setattr(scheduler.standby, "kinds", lambda: ["ncu-gpu0"])
    kinds: list[str] = []

    @contextlib.asynccontextmanager
    async def run(
        kind: str, make_argv: Callable[[Path], list[str]], *, fresh: Callable[[list[str], Path], list[str]], **_: object
    ) -> AsyncIterator[tuple[ProcessResult, Path]]:
        # As Cells.run: the named kind's warm worker (its ncu already running), else the argv `fresh` wraps in ncu.
        kinds.append(kind)
        cell = tmp_path / "cell"
        cell.mkdir(exist_ok=True)
        argv = make_argv(cell) if kind else fresh(make_argv(cell), cell)
        yield ProcessResult(tuple(argv), 0, "", "", 0.1, False), cell

    monkeypatch.setattr(scheduler.cells, "run", run)
    source = SourceSpec(kind=SourceKind.PYTHON_PROBLEM, main_name="p.py", main_text="")
    spec = ProfileSpec(source=source, clock_control=clock_control)
    options = profile_ncu_options(spec, tmp_path / "report.ncu-rep", [MEASURED_INCLUDE], scheduler.config.limits)
    target = RunTarget(argv=lambda cell: ["python", "-m", "profsvc.worker.harness"], files={}, readonly=[], warm=True)
    outcome = asyncio.run(_run_ncu(scheduler, Job("j", tmp_path, None, {}), 0, options, target, lambda _: None))
    assert kinds == [taken]
    # The command the result states: the clocks the kernels were profiled under.
    assert _clock_control(outcome.command) == clock_control.value


@pytest.mark.parametrize(("flag", "expected"), [([], True), (["--no-ncu-warmup"], False)])
def test_serve_passes_the_ncu_warmup_choice_to_the_server(monkeypatch, tmp_path, flag, expected):
    # The server itself is stood in for: what reaches it is the configuration `profsvc serve` built.
    seen: list[ServerConfig] = []

    async def serve(config: ServerConfig) -> None:
        seen.append(config)

    monkeypatch.setattr(app, "serve", serve)
    assert cli.main(["serve", "--port", "0", "--state-dir", str(tmp_path), *flag]) == 0
    assert [c.ncu_warmup for c in seen] == [expected]


def test_a_warm_up_range_in_the_default_domain_is_not_profsvcs(reader):
    # Made on the H200 by a primed worker of a server whose harness still used the default domain
    # (benchmarks/bench_fastpath.py, 2026-12-03): its first kernel ran in a push/pop range "profsvc-warmup" of the
    # default domain, as a user's range of that name would. Only profsvc's own domain marks its warm-up kernel now,
    # so both kernels are the report's.
    report = FIXTURES / "primed" / "seed47_primed.ncu-rep"
    actions = [action for nvtx_range in reader.load_report(str(report)) for action in nvtx_range]
    state = actions[0].nvtx_state()
    domain = state.domain_by_id(state.domains()[0])
    assert (len(state.domains()), domain.name(), list(domain.push_pop_ranges())) == (
        1,
        "<default domain>",
        [PROFILER_WARMUP_RANGE],
    )
    assert not any(in_profsvc_range(action, PROFILER_WARMUP_RANGE) for action in actions)
    kernels = analyze_report(report).kernels
    assert [(kernel.name, kernel.launch_index) for kernel in kernels] == [
        ("spin_kernel", 0),
        ("vga_linear_kernel", 1),
    ]


def test_the_profile_report_states_the_clock_control():
    ran = {"version": "2025.3.1", "command": "ncu --clock-control base ...", "seconds": 2.0}
    base = render_text(ProfileResult(ncu=NcuRun(**ran, clock_control=ClockControl.BASE)))
    assert "ncu 2025.3.1, clock control base, 2.0 s" in base
    # A result that states none (an older server's) says nothing of it.
    assert "clock control" not in render_text(ProfileResult(ncu=NcuRun(**ran)))


@pytest.mark.parametrize("primed", [True, False])
def test_a_warm_worker_numbers_the_jobs_kernels_from_one_primed_or_not(tmp_path, monkeypatch, primed):
    # ncu numbers a process's profiled kernels from 0: a primed worker's own kernel was its 0 (printed before the
    # job was handed over), so the job's first is 1; a worker that took the job unprimed profiles it as 0. Either
    # way the job sees its kernels numbered from 1, and no more passes than the launches it asked for, although
    # the worker's ncu counts one launch more for its own kernel.
    scheduler = _scheduler(tmp_path, gpus=1)
    monkeypatch.setattr(scheduler.standby, "kinds", lambda: ["ncu-gpu0"])
    source = SourceSpec(kind=SourceKind.PYTHON_PROBLEM, main_name="p.py", main_text="")
    options = profile_ncu_options(
        ProfileSpec(source=source), tmp_path / "report.ncu-rep", [MEASURED_INCLUDE], scheduler.config.limits
    )
    first = 1 if primed else 0
    # The job launches more kernels than it may profile: ncu stops at its count, one more than the job's.
    lines = [
        f'==PROF== Profiling "k{i}" - {first + i}: 0%....50%....100% - {20 + i} passes\n'
        for i in range(options.launch_count + 1 - first)
    ]

    @contextlib.asynccontextmanager
    async def run(
        kind: str, make_argv: Callable[[Path], list[str]], *, on_stdout: Callable[[str], None], **_: object
    ) -> AsyncIterator[tuple[ProcessResult, Path]]:
        cell = tmp_path / "cell"
        cell.mkdir(exist_ok=True)
        if primed:
            (cell / READY).write_text("1")
        argv = make_argv(cell)
        for line in lines:
            on_stdout(line)
        yield ProcessResult(tuple(argv), 0, "".join(lines), "", 0.1, False), cell

    monkeypatch.setattr(scheduler.cells, "run", run)
    target = RunTarget(argv=lambda cell: ["python", "-m", "profsvc.worker.harness"], files={}, readonly=[], warm=True)
    events = []
    outcome = asyncio.run(_run_ncu(scheduler, Job("j", tmp_path, None, {}), 0, options, target, events.append))
    assert [e.kernel_index for e in events][:2] == [1, 2]
    assert outcome.passes == [20 + i for i in range(options.launch_count)]
