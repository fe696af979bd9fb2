"""Follow an ncu run: the only place profsvc reads ncu's output (profsvc.ncu.command builds its command line).

ncu's own chatter (==PROF== lines) is read as it arrives, to report progress
and the number of replay passes per kernel; the figures themselves are read
from the exported report, never from this text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from profsvc.proc import ProcessResult

_PROFILING = re.compile(r'==PROF== Profiling "(?P<name>[^"]*)"(?:\s*-\s*(?P<index>\d+))?')
_PERCENT = re.compile(r"(\d+)%")
_PASSES = re.compile(r"-\s*(\d+)\s*pass(?:es)?")
_ERROR = re.compile(r"^==ERROR==\s*(.*)$", re.MULTILINE)
_NO_KERNELS = "No kernels were profiled"


@dataclass(frozen=True)
class NcuProgress:
    """Progress of the ncu run: kernel k (1-based), percent done, passes once known."""

    kernel_index: int
    kernel_name: str
    percent: int
    passes: int = 0


@dataclass
class NcuOutcome:
    """How the ncu run ended."""

    command: list[str]
    returncode: int
    seconds: float
    timed_out: bool
    passes: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    no_kernels: bool = False
    output_tail: str = ""
    report: Path | None = None
    ended: float = 0.0  # as ProcessResult's


class ProgressParser:
    """Incremental parser of ncu's stdout."""

    def __init__(self, on_progress: Callable[[NcuProgress], None] | None, skip_kernels: int = 0) -> None:
        self.on_progress = on_progress
        self.skip_kernels = skip_kernels
        self.buffer = ""
        self.passes: list[int] = []

    def feed(self, chunk: str) -> None:
        self.buffer += chunk
        # A "Profiling" line grows in place (0%....50%....100% - N passes) before its newline.
        *complete, self.buffer = self.buffer.split("\n")
        for line in complete:
            self._line(line, final=True)
        if self.buffer:
            self._line(self.buffer, final=False)

    def _line(self, line: str, final: bool) -> None:
        match = _PROFILING.search(line)
        if not match:
            return
        if match["index"] is None:
            index = len(self.passes) + 1
        else:
            # ncu numbers from 0, the kernels that are not the job's (skip_kernels) first.
            index = int(match["index"]) + 1 - self.skip_kernels
            if index < 1:
                return
        percents = _PERCENT.findall(line[match.end() :])
        passes = _PASSES.search(line)
        if final and passes:
            self.passes.append(int(passes.group(1)))
        if self.on_progress is not None:
            self.on_progress(
                NcuProgress(
                    kernel_index=index,
                    kernel_name=match["name"],
                    percent=int(percents[-1]) if percents else 0,
                    passes=int(passes.group(1)) if passes else 0,
                )
            )


def ncu_outcome(command: list[str], result: ProcessResult, parser: ProgressParser, report: Path) -> NcuOutcome:
    """How an ncu run ended, from its process, the parser that followed its stdout, and where its report is.

    The parser's `skip_kernels` left a primed worker's own kernel out of the passes and the progress.
    """
    parser.feed("\n")
    text = result.stdout + "\n" + result.stderr
    return NcuOutcome(
        command=command,
        returncode=result.returncode,
        seconds=result.seconds,
        timed_out=result.timed_out,
        passes=parser.passes,
        errors=[e.strip() for e in _ERROR.findall(text)],
        no_kernels=_NO_KERNELS in text,
        output_tail=text[-4000:],
        report=report if report.is_file() and not report.is_symlink() else None,
        ended=result.ended,
    )
