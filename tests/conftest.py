"""Shared fixtures: the committed real ncu reports and a loaded ncu_report reader."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REPORTS = sorted(FIXTURES.glob("*.ncu-rep"))


@pytest.fixture(scope="session")
def reader() -> ModuleType:
    """NVIDIA's ncu_report module (the ncu install's copy on a GPU host, else the PyPI package)."""
    from profsvc.metrics.reader import load_reader

    return load_reader()


def first_action(reader: ModuleType, report: Path):
    """The first profiled launch of a report."""
    return reader.load_report(str(report)).range_by_idx(0).action_by_idx(0)
