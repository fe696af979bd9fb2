"""A validated job: what the scheduler runs (built by the server from a request)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from profsvc.ncu.metric_sets import MetricSetSpec
from profsvc.scheduler.sessions import SessionKey
from profsvc_client.models import KernelFilter, Progress, SourceKind

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

    def write(self, workspace: Path) -> tuple[Path, Path | None]:
        """Put the files into a job workspace; return (main, reference or None)."""
        main = workspace / self.main_name
        main.write_text(self.main_text)
        if not self.reference_name:
            return main, None
        reference = workspace / self.reference_name
        reference.write_text(self.reference_text)
        return main, reference


@dataclass(frozen=True)
class ProfileSpec:
    """A Profile job."""

    source: SourceSpec
    kernel_filter: KernelFilter = field(default_factory=KernelFilter)
    metric_set: MetricSetSpec | None = None
    session: SessionKey | None = None
