"""Warm ncu workers in the scheduler: which ones prime, and their run handed back as the job's own."""

from __future__ import annotations

from pathlib import Path

from profsvc.config import ServerConfig
from profsvc.host import HostInfo
from profsvc.ncu.command import PROFILER_WARMUP_RANGE
from profsvc.ncu.locate import NcuInstall
from profsvc.ncu.runner import NcuOutcome
from profsvc.sandbox import Sandbox
from profsvc.scheduler.scheduler import Scheduler, _without_warmup
from profsvc.telemetry import Telemetry
from profsvc.worker.standby import WARM_PROFILER
from profsvc_client.models import GpuInfo


def _outcome(tmp_path: Path, passes: list[int], returncode: int = 0) -> NcuOutcome:
    report = tmp_path / "worker" / "report.ncu-rep"
    report.parent.mkdir()
    report.write_bytes(b"report")
    return NcuOutcome(
        command=["ncu"], returncode=returncode, seconds=1.0, timed_out=False, passes=passes, report=report
    )


def test_the_report_moves_to_the_jobs_place(tmp_path):
    job_report = tmp_path / "job" / "report.ncu-rep"
    job_report.parent.mkdir()
    outcome = _without_warmup(_outcome(tmp_path, [27]), job_report, primed=True)
    assert outcome.report == job_report and job_report.read_bytes() == b"report"
    assert not (tmp_path / "worker" / "report.ncu-rep").exists()
    assert not outcome.no_kernels


def test_a_run_that_profiled_only_the_warmup_kernel_profiled_no_kernel_of_the_job(tmp_path):
    # ncu profiled the worker's own kernel, so it printed no "No kernels were profiled": the job's passes say it.
    outcome = _without_warmup(_outcome(tmp_path, []), tmp_path / "job.ncu-rep", primed=True)
    assert outcome.report is None and outcome.no_kernels
    assert not (tmp_path / "worker" / "report.ncu-rep").exists()


def test_a_failed_run_keeps_its_report_for_the_error(tmp_path):
    outcome = _without_warmup(_outcome(tmp_path, [], returncode=1), tmp_path / "job.ncu-rep", primed=True)
    assert outcome.report == tmp_path / "job.ncu-rep" and not outcome.no_kernels


def test_a_worker_that_did_not_prime_keeps_ncus_own_word_on_missing_kernels(tmp_path):
    # Without the worker's own kernel, an empty run left no report, or ncu said so: nothing to second-guess.
    outcome = _without_warmup(_outcome(tmp_path, []), tmp_path / "job.ncu-rep", primed=False)
    assert outcome.report == tmp_path / "job.ncu-rep" and not outcome.no_kernels


def _scheduler(tmp_path: Path, gpus: int) -> Scheduler:
    host = HostInfo(
        gpus=[
            GpuInfo(index=i, name="NVIDIA H200", compute_capability="9.0", memory_bytes=1 << 30) for i in range(gpus)
        ],
        ncu=NcuInstall(path="/usr/local/bin/ncu", version="2025.3.1"),
    )
    config = ServerConfig(state_dir=tmp_path / "state")
    return Scheduler(config, host, Sandbox(network_prefix=(), memory_prefix=()), Telemetry())


def test_a_one_gpu_host_primes_its_ncu_workers_with_their_own_range(tmp_path):
    scheduler = _scheduler(tmp_path, gpus=1)
    spec = scheduler._ncu_standby_spec(0)
    assert spec.prime_lock is scheduler._gpu_locks[0]
    assert spec.environment(tmp_path)[WARM_PROFILER] == "1"
    default, warm = (f(tmp_path / "r.ncu-rep") for f in (scheduler._default_ncu_options, scheduler._warm_ncu_options))
    assert warm.nvtx_include == [*default.nvtx_include, f"{PROFILER_WARMUP_RANGE}/"]
    assert warm.launch_count == default.launch_count + 1
    assert f"{PROFILER_WARMUP_RANGE}/" in spec.command(tmp_path)


def test_a_host_with_several_gpus_does_not_prime(tmp_path):
    # ncu's lock is held by a primed worker while it waits; its scope across GPUs is not measured.
    scheduler = _scheduler(tmp_path, gpus=2)
    for gpu in (0, 1):
        spec = scheduler._ncu_standby_spec(gpu)
        assert spec.prime_lock is None
        assert WARM_PROFILER not in spec.environment(tmp_path)
    report = tmp_path / "r.ncu-rep"
    assert scheduler._warm_ncu_options(report) == scheduler._default_ncu_options(report)
