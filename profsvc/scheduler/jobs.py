"""A validated job: what the scheduler runs (built by the server from a request)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from profsvc.metrics.derived import parse_derived
from profsvc.ncu.metric_sets import MetricSetSpec
from profsvc.scheduler.sessions import SessionKey
from profsvc_contract.models import (
    DEFAULT_CLOCK_CONTROL,
    DEFAULT_PRECISION,
    ClockControl,
    KernelFilter,
    Precision,
    Progress,
    SourceKind,
    Target,
)

ProgressSink = Callable[[Progress], None]


@dataclass(frozen=True)
class SourceSpec:
    """Decoded, validated source files."""

    kind: SourceKind
    main_name: str
    main_text: str
    reference_name: str = ""
    reference_text: str = ""
    nvcc_flags: tuple[str, ...] = ()
    # Which model of a Python problem runs (resolved by its kind's validation), and a program's arguments.
    target: Target = Target.UNSPECIFIED
    args: tuple[str, ...] = ()
    # The precision a Python problem's models and inputs run in (profsvc.worker.precision); no part of its build.
    precision: Precision = DEFAULT_PRECISION

    @property
    def text_size(self) -> int:
        """Characters in its files: what reading them costs."""
        return len(self.main_text) + len(self.reference_text)

    def files(self) -> dict[str, str | bytes]:
        """The files a worker's cell gets: name -> content."""
        files: dict[str, str | bytes] = {self.main_name: self.main_text}
        if self.reference_name:
            files[self.reference_name] = self.reference_text
        return files

    def paths(self, cell: Path) -> tuple[Path, Path | None]:
        """Where the files are in a cell: (main, reference or None)."""
        return cell / self.main_name, (cell / self.reference_name if self.reference_name else None)


@dataclass(frozen=True)
class ProfileSpec:
    """A Profile job."""

    source: SourceSpec
    kernel_filter: KernelFilter = field(default_factory=KernelFilter)
    metric_set: MetricSetSpec | None = None
    # ncu metrics to collect besides the set's, by name, and derived ones (NAME=FORMULA) over ncu metrics.
    metrics: tuple[str, ...] = ()
    derived: tuple[str, ...] = ()
    # Also write the HTML report (a few MB: asked for, not written for every result).
    html_report: bool = False
    # Draw the roofline charts (most of reading a small report: a caller that never downloads them skips them).
    charts: bool = True
    clock_control: ClockControl = DEFAULT_CLOCK_CONTROL

    def collected(self) -> tuple[str, ...]:
        """Every ncu metric to collect besides the set's: those named, and those the formulas read."""
        read = [m for text in self.derived for m in parse_derived(text).metrics]
        return tuple(dict.fromkeys([*self.metrics, *read]))

    session: SessionKey | None = None
