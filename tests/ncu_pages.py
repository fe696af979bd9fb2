"""Nsight Compute's own pages of a report, as `ncu --import R --page details|raw --csv` prints them.

tools/capture_ncu_pages.sh writes them beside each committed report (<stem>_details.csv, <stem>_raw.csv).
A value on a page is text rounded to the digits ncu prints, in the unit the page states: each reading
here is the interval that text stands for (one unit of its last digit either way), converted to a base
unit by the tables below, so a test can say "profsvc's figure lies within what ncu shows".
"""

from __future__ import annotations

import csv
import math
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# The page's unit -> (base unit, factor to it). ncu scales by powers of 1000 in its "auto" unit mode
# (tools/capture_ncu_pages.sh asks for base units; a page in the other mode still reads right).
_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_SCALED = (
    *("byte", "byte/s", "byte/block", "byte/cycle", "inst", "inst/cycle", "cycle", "sector"),
    *("block", "thread", "warp", "register/thread"),
)
UNITS: dict[str, tuple[str, float]] = {
    **{f"{p}{u}": (u, f) for p, f in _PREFIX.items() for u in _SCALED},
    **{f"{p}{u}/second": (f"{u}/s", f) for p, f in _PREFIX.items() for u in ("byte",)},
    **{f"{p}hz": ("hz", f) for p, f in _PREFIX.items()},
    **{f"{p}Hz": ("hz", f) for p, f in _PREFIX.items()},
    "cycle/nsecond": ("hz", 1e9),
    "cycle/usecond": ("hz", 1e6),
    "cycle/msecond": ("hz", 1e3),
    "cycle/second": ("hz", 1.0),
    "ns": ("ns", 1.0),
    "nsecond": ("ns", 1.0),
    "us": ("ns", 1e3),
    "usecond": ("ns", 1e3),
    "ms": ("ns", 1e6),
    "msecond": ("ns", 1e6),
    "s": ("ns", 1e9),
    "second": ("ns", 1e9),
    "%": ("%", 1.0),
    "SM": ("SM", 1.0),
    "branches": ("branches", 1.0),
    "": ("", 1.0),
}


class PageError(AssertionError):
    """A page that does not say what a test needs: a missing row, an unknown unit, text that is not a number."""


@dataclass(frozen=True)
class Reading:
    """A value ncu printed: the interval [low, high] its rounded text stands for, in `unit` (a base unit)."""

    low: float
    high: float
    unit: str
    text: str

    @classmethod
    def exact(cls, value: float, unit: str) -> Reading:
        return cls(value, value, unit, f"{value} {unit}".strip())

    def holds(self, value: float | None) -> bool:
        """Whether `value` is what ncu printed, up to its rounding (and float error at the bounds)."""
        if value is None:
            return False
        slack = 1e-9 * max(abs(self.low), abs(self.high))
        return self.low - slack <= value <= self.high + slack

    def _combine(self, other: Reading | float, op: Callable[[float, float], float], symbol: str) -> Reading:
        """The interval of `self op other`: the extremes lie at its corners (no sign change inside for /)."""
        theirs = other if isinstance(other, Reading) else Reading.exact(other, "")
        corners = [op(a, b) for a in (self.low, self.high) for b in (theirs.low, theirs.high)]
        return Reading(min(corners), max(corners), self.unit, f"({self.text} {symbol} {theirs.text})")

    def __add__(self, other: Reading | float) -> Reading:
        return self._combine(other, operator.add, "+")

    def __mul__(self, other: Reading | float) -> Reading:
        return self._combine(other, operator.mul, "x")

    def __truediv__(self, other: Reading | float) -> Reading:
        return self._combine(other, operator.truediv, "/")


def reading(text: str, unit: str) -> Reading:
    """ncu's text ("3,176,954,732.51", "44.98", "0") in its unit, as an interval in the base unit."""
    if unit not in UNITS:
        raise PageError(f"unit {unit!r} on the page has no conversion in tests/ncu_pages.py UNITS")
    base, factor = UNITS[unit]
    plain = text.replace(",", "")
    try:
        value = float(plain)
    except ValueError:
        raise PageError(f"{text!r} is not a number") from None
    # ncu prints a whole value without decimals ("5,095", "0") and any other with its decimals ("0.08",
    # "848.50"): the first is exact, the second one unit of its last digit either way (rounded or cut).
    decimals = len(plain.partition(".")[2])
    step = 10.0**-decimals if "." in plain else 0.0
    return Reading((value - step) * factor, (value + step) * factor, base, f"{text} {unit}".strip())


@dataclass(frozen=True)
class KernelPage:
    """One profiled launch's rows of a details page: (section, label) -> (value text, unit)."""

    result_id: int
    kernel: str
    rows: dict[tuple[str, str], tuple[str, str]]

    def sections(self) -> set[str]:
        return {section for section, _ in self.rows}

    def get(self, section: str, label: str) -> Reading:
        if (section, label) not in self.rows:
            near = sorted(lab for sec, lab in self.rows if sec == section)
            raise PageError(f"ncu's page for {self.kernel} has no {label!r} in {section!r} (it has {near})")
        text, unit = self.rows[(section, label)]
        return reading(text, unit)

    def whole(self, section: str, label: str) -> int:
        """A count the page shows (a grid size, a block limit): whole, exact, in no prefixed unit."""
        value = self.get(section, label)
        assert value.low == value.high and value.low.is_integer(), f"{label!r} is {value.text}, not a whole number"
        return int(value.low)


def _csv_rows(path: Path) -> Iterator[list[str]]:
    """The CSV part of a page: a live run's page also holds ncu's ==PROF== lines."""
    with path.open(newline="") as handle:
        yield from csv.reader(line for line in handle if line.startswith('"'))


def details_page(path: Path) -> list[KernelPage]:
    """Every launch's header rows of a details page, in the report's order."""
    rows = _csv_rows(path)
    header = next(rows)
    column = {name: header.index(name) for name in ("ID", "Kernel Name", "Section Name", "Metric Name")}
    unit_at, value_at = header.index("Metric Unit"), header.index("Metric Value")
    pages: dict[int, KernelPage] = {}
    for row in rows:
        label = row[column["Metric Name"]]
        if not label:  # a rule's result, not a figure
            continue
        result_id = int(row[column["ID"]])
        page = pages.setdefault(result_id, KernelPage(result_id, row[column["Kernel Name"]], {}))
        key = (row[column["Section Name"]], label)
        if key in page.rows:
            raise PageError(f"{path.name}: {key} appears twice for result {result_id}")
        page.rows[key] = (row[value_at], row[unit_at])
    return [pages[i] for i in sorted(pages)]


@dataclass(frozen=True)
class RawPage:
    """One launch's columns of a raw page: metric name -> (value text, unit)."""

    result_id: int
    kernel: str
    values: dict[str, tuple[str, str]]

    def get(self, metric: str) -> Reading | None:
        """The metric's reading; None where the page leaves it blank or shows no number (an instanced metric)."""
        if metric not in self.values:
            raise PageError(f"ncu's raw page for {self.kernel} has no column {metric!r}")
        text, unit = self.values[metric]
        try:
            return reading(text, unit)
        except PageError:
            if not text or not _is_number(text):
                return None
            raise


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text.replace(",", "")))
    except ValueError:
        return False


def raw_page(path: Path) -> list[RawPage]:
    """Every launch's row of a raw page (a header row, a units row, then one row per launch)."""
    rows = _csv_rows(path)
    header, units = next(rows), next(rows)
    first_metric = header.index("CC") + 1
    id_at, kernel_at = header.index("ID"), header.index("Kernel Name")
    return [
        RawPage(
            int(row[id_at]),
            row[kernel_at],
            {header[i]: (row[i], units[i]) for i in range(first_metric, len(header))},
        )
        for row in rows
    ]


def pages_of(report: Path) -> tuple[Path, Path]:
    """Where tools/capture_ncu_pages.sh puts a report's details and raw pages."""
    stem = report.with_suffix("")
    return stem.with_name(f"{stem.name}_details.csv"), stem.with_name(f"{stem.name}_raw.csv")
