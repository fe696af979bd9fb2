"""A ProfileResult's last step, whether a profile or an uploaded report made it: the job's timings, its text and
Markdown, the session's delta, the HTML report where asked."""

from __future__ import annotations

import asyncio

from profsvc.metrics.catalog import load_catalog
from profsvc.report.delta import compute_delta
from profsvc.report.html import render_html
from profsvc.report.markdown import render_markdown
from profsvc.report.text import render_text
from profsvc.scheduler.scheduler import Job, Scheduler
from profsvc.scheduler.sessions import SessionKey
from profsvc_contract.models import ProfileResult

# The HTML report of a result with kernels (profsvc.report.html).
HTML_NAME = "report.html"


async def finish_result(
    scheduler: Scheduler, job: Job, result: ProfileResult, session: SessionKey | None, *, html_report: bool
) -> ProfileResult:
    """The result as it is answered. Called while the job is admitted: the HTML report it writes counts in the
    job's workspace."""
    result.timings = job.timings_so_far()
    _render(result)
    if session is not None and result.ok:
        # Kept as the session's latest, and compared with the one before.
        result.session_id = session.id
        previous = scheduler.sessions.swap(session, result)
        if previous is not None:
            result.delta = compute_delta(previous, result, load_catalog())
            _render(result)
    if html_report:
        await _add_html(scheduler, job, result)
    return result


def _render(result: ProfileResult) -> None:
    result.report_text = render_text(result)
    result.report_markdown = render_markdown(result)


async def _add_html(scheduler: Scheduler, job: Job, result: ProfileResult) -> None:
    """The result's HTML report as an artifact, where it has kernels (rendered off the event loop)."""
    if not result.kernels:
        return
    try:
        text = await asyncio.to_thread(render_html, result)
    except ImportError as error:  # a server installed without its charting library
        result.warnings.append(f"no HTML report: {error}")
        return
    path = job.workspace / HTML_NAME
    path.write_text(text, encoding="utf-8")
    result.artifacts.append(scheduler.workspaces.artifact(job.id, path))
