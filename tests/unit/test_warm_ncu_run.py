"""A warm ncu worker's run handed back as the job's own (scheduler._without_warmup)."""

from __future__ import annotations

from pathlib import Path

from profsvc.ncu.runner import NcuOutcome
from profsvc.scheduler.scheduler import _without_warmup


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
    outcome = _without_warmup(_outcome(tmp_path, [27]), job_report)
    assert outcome.report == job_report and job_report.read_bytes() == b"report"
    assert not (tmp_path / "worker" / "report.ncu-rep").exists()
    assert not outcome.no_kernels


def test_a_run_that_profiled_only_the_warmup_kernel_profiled_no_kernel_of_the_job(tmp_path):
    # ncu profiled the worker's own kernel, so it printed no "No kernels were profiled": the job's passes say it.
    outcome = _without_warmup(_outcome(tmp_path, []), tmp_path / "job.ncu-rep")
    assert outcome.report is None and outcome.no_kernels
    assert not (tmp_path / "worker" / "report.ncu-rep").exists()


def test_a_failed_run_keeps_its_report_for_the_error(tmp_path):
    outcome = _without_warmup(_outcome(tmp_path, [], returncode=1), tmp_path / "job.ncu-rep")
    assert outcome.report == tmp_path / "job.ncu-rep" and not outcome.no_kernels
