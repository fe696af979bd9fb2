"""Reading a report, a profile's own or an uploaded one (Analyze), on the caller's reader or an analyze worker, in
a jail: ncu's reader is native code that a hostile file may crash, so never in the server. Built on the core
(scheduler.scheduler)."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Sequence
from pathlib import Path, PurePath

from profsvc.metrics.analysis import ReportAnalysis
from profsvc.proc import ProcessResult
from profsvc.scheduler.finishing import finish_result
from profsvc.scheduler.jobs import ProgressSink
from profsvc.scheduler.readers import CALLER
from profsvc.scheduler.scheduler import ANALYZE_MODULE, REPORT_NAME, Job, Scheduler
from profsvc.scheduler.sessions import SessionKey
from profsvc_contract.errors import InvalidRequest, PreconditionFailed, Reason
from profsvc_contract.models import ArtifactRef, JobError, KernelFilter, NcuRun, ProfileResult, Stage

ANALYZE_TIMEOUT_S = 300.0
CHART_NAMES = ("roofline.png", "roofline.svg")
# Exit statuses of the analyze worker (profsvc.worker.analyze_report).
EXIT_UNREADABLE, EXIT_NO_READER = 3, 4


def _upload_name(filename: str) -> str:
    """The last part of an uploaded report's file name, where it is a plain one; else REPORT_NAME.

    Control characters are refused too: the name appears in one-line error messages and logs.
    """
    name = PurePath(filename.replace("\\", "/")).name
    if name in ("", ".", "..") or not name.isprintable() or len(name.encode()) > 200:
        return REPORT_NAME
    return name


async def read_report(
    scheduler: Scheduler,
    job: Job,
    report: Path,
    kernel_filter: KernelFilter,
    source_map: dict[str, tuple[str, int]] | None = None,
    metrics: Sequence[str] = (),
    derived: Sequence[str] = (),
    *,
    charts: bool = True,
) -> ReportAnalysis:
    """Read a report in an analyze worker's cell (a copy of it: the reader may be fed a hostile file); its
    charts (where `charts`) are moved into the job's workspace."""

    def argv(cell: Path) -> list[str]:
        command = [scheduler.config.python, "-m", ANALYZE_MODULE, str(cell / "report" / report.name)]
        command += ["--filter", kernel_filter.model_dump_json(), *(["--charts", str(cell)] if charts else [])]
        command += ["--metrics", json.dumps(list(metrics)), "--derived", json.dumps(list(derived))]
        return [*command, "--source-map", json.dumps(source_map or {})]

    files = {f"report/{report.name}": report}

    def on_warm_worker() -> contextlib.AbstractAsyncContextManager[tuple[ProcessResult, Path]]:
        return scheduler.cells.run("analyze", argv, files=files, gpu=None, timeout=ANALYZE_TIMEOUT_S)

    # A caller's reports go to its own readers that stay (scheduler.readers); work with no caller, to warm workers.
    caller = CALLER.get()
    reading = (
        scheduler.readers.read(caller, files, argv, ANALYZE_TIMEOUT_S, on_warm_worker)
        if caller is not None and scheduler.readers is not None
        else on_warm_worker()
    )
    async with scheduler.analyze_slots, scheduler.timed("parse"), reading as (process, cell):
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
    scheduler: Scheduler,
    upload: Path,
    filename: str,
    kernel_filter: KernelFilter,
    progress: ProgressSink | None = None,
    session: SessionKey | None = None,
    metrics: Sequence[str] = (),
    derived: Sequence[str] = (),
    *,
    html_report: bool = False,
    charts: bool = True,
) -> ProfileResult:
    """Read an uploaded report (the file `upload`, moved into the job's workspace); `metrics`: ncu metrics to
    report besides the catalog's; `derived`: NAME=FORMULA metrics over ncu metrics; `html_report`: also write
    report.html; `charts`: draw the roofline charts."""
    async with scheduler.admit(progress) as job:
        # Stored under the user's own file name, so that what the reader says of it names their file; in a
        # folder of its own, apart from the charts written beside the job.
        path = job.workspace / "upload" / _upload_name(filename)
        path.parent.mkdir()
        shutil.move(upload, path)
        job.progress(Stage.PARSING, f"reading {path.name}")
        try:
            analysis = await read_report(
                scheduler, job, path, kernel_filter, metrics=metrics, derived=derived, charts=charts
            )
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
            artifacts=chart_artifacts(scheduler, job),
            ncu=NcuRun(version=analysis.ncu_version),
        )
        if not result.ok:
            result.error = JobError(kind="no_kernels_profiled", stage=Stage.PARSING, message=analysis.warnings[0])
        return await finish_result(scheduler, job, result, session, html_report=html_report)


def chart_artifacts(scheduler: Scheduler, job: Job) -> list[ArtifactRef]:
    """The roofline charts the analyze worker drew, as artifacts."""
    charts = [job.workspace / name for name in CHART_NAMES]
    return [scheduler.workspaces.artifact(job.id, path) for path in charts if path.is_file()]
