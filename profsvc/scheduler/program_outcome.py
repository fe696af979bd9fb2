"""Why a program's profile holds nothing, in one line naming the case, with the program's last lines of output.

The cases: the program exited with a non-zero status (or raised), it never opened an NVTX range that was
selected, or it launched no kernel that matched the filter. ncu's own lines (==PROF==, ==WARNING==, ...) and
the list of kernels it prints when none matched are left out of the output shown: the last lines are the
program's.
"""

from __future__ import annotations

import re

from profsvc.build.python_problem import HarnessStatus, job_error
from profsvc.ncu.command import NcuOptions
from profsvc.ncu.runner import NcuOutcome
from profsvc_contract.models import JobError, Stage

TAIL_LINES = 15
_NCU_LINE = re.compile(r"^==[A-Z]+==")
# ncu's list of the launches it saw when none matched: its header, then one numbered kernel name a line.
_KERNEL_LIST = "Available Kernels:"
_KERNEL_ITEM = re.compile(r"^\d+\. \S")
# The longest last line quoted in the one-line message.
_QUOTED_CHARS = 200


def program_tail(output: str, lines: int = TAIL_LINES) -> str:
    """The last lines the program printed (stdout, then stderr), ncu's own lines left out."""
    kept: list[str] = []
    in_list = False
    for line in output.splitlines():
        in_list = line.strip() == _KERNEL_LIST or (in_list and bool(_KERNEL_ITEM.match(line)))
        if line.strip() and not in_list and not _NCU_LINE.match(line):
            kept.append(line.rstrip())
    return "\n".join(kept[-lines:])


def _with_output(error: JobError, tail: str) -> JobError:
    """The error with the program's last line quoted in its message and its last lines in the detail."""
    if not tail:
        return error.model_copy(update={"detail": error.detail or "the program printed nothing"})
    last = tail.splitlines()[-1].strip()
    quoted = last if len(last) <= _QUOTED_CHARS else last[: _QUOTED_CHARS - 3] + "..."
    detail = f"{error.detail}\n\n" if error.detail else ""
    return error.model_copy(
        update={
            "message": f"{error.message} (last output: {quoted!r})",
            "detail": f"{detail}the program's last lines of output:\n{tail}",
        }
    )


def _selection(options: NcuOptions, default_selection: bool) -> str:
    if default_selection:
        return "any NVTX range it marks"
    return "NVTX ranges " + ", ".join(options.nvtx_include)


def _matching(options: NcuOptions) -> str:
    return f" that matches --kernel {options.name_regex!r}" if options.name_regex else ""


def program_failure(
    program: str,
    outcome: NcuOutcome,
    status: HarnessStatus | None,
    options: NcuOptions,
    *,
    default_selection: bool,
) -> JobError | None:
    """Why a program's run left nothing to show (None when it left a report to read, or when ncu itself failed:
    that is ncu's error, not the program's). `status`: the launcher's, for a Python program."""
    tail = program_tail(outcome.output_tail)
    if status is not None and not status.ok:
        # Exited with a non-zero status, or raised (located in the program's file).
        return _with_output(job_error(status), tail)
    if status is None and outcome.returncode != 0 and not outcome.errors and not outcome.timed_out:
        # ncu ends with its program's status; its own failures say ==ERROR==.
        message = f"{program} exited with status {outcome.returncode}"
        return _with_output(JobError(kind="program_exit", stage=Stage.RUNNING, message=message), tail)
    if outcome.report is not None or outcome.timed_out or (outcome.returncode != 0 and outcome.errors):
        return None
    if options.nvtx_include and status is not None and status.nvtx_range_count == 0:
        message = (
            f"{program} ran to its end without opening an NVTX range, so nothing was profiled"
            f" (selected: {_selection(options, default_selection)})"
        )
        return _with_output(JobError(kind="nvtx_range_not_reached", stage=Stage.PROFILING, message=message), tail)
    if options.nvtx_include:
        opened = ", ".join(status.nvtx_ranges) if status is not None and status.nvtx_ranges else ""
        did = f"opened NVTX ranges ({opened})" if opened else "ran to its end"
        message = (
            f"{program} {did} but launched no kernel{_matching(options)} inside the selected ones"
            f" ({_selection(options, default_selection)}); nothing was profiled"
        )
    else:
        message = f"{program} launched no kernel{_matching(options)}; nothing was profiled"
    return _with_output(JobError(kind="no_kernels_profiled", stage=Stage.PROFILING, message=message), tail)
