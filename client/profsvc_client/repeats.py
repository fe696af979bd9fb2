"""Statistics over repeated profiles of one request: pure, over the ProfileResults any server gives.

Launches are matched across repeats by kernel name and their place among that name's launches (the second
`gemm` of one repeat is the second `gemm` of the next), so a repeat that launched a kernel more or less often
still lines up the rest. Every catalog figure and every requested metric of a launch gets the median, least and
greatest value, the spread (max - min) / |median| in %, and n, the repeats that had a value; a failed repeat has
no kernels and adds no value.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import TypeVar

from profsvc_contract import errors
from profsvc_contract.models import (
    FigureStats,
    FigureValue,
    KernelResult,
    KernelStats,
    ProfileResult,
    Progress,
    RepeatResult,
)

LaunchKey = tuple[str, int]
T = TypeVar("T")


def figure_stats(values: Sequence[float | None], unit: str = "") -> FigureStats:
    """The statistics of one figure's values over the repeats (None: a repeat without a value)."""
    present = [value for value in values if value is not None]
    stats = FigureStats(unit=unit, values=list(values), n=len(present))
    if not present:
        return stats
    stats.median, stats.min, stats.max = statistics.median(present), min(present), max(present)
    if stats.max == stats.min:
        stats.spread_pct = 0.0
    elif stats.median != 0:
        stats.spread_pct = 100.0 * (stats.max - stats.min) / abs(stats.median)
    return stats


def _launches(result: ProfileResult) -> dict[LaunchKey, KernelResult]:
    """A result's launches by (name, its place among that name's launches)."""
    seen: dict[str, int] = {}
    keyed: dict[LaunchKey, KernelResult] = {}
    for kernel in result.kernels:
        keyed[(kernel.name, seen.get(kernel.name, 0))] = kernel
        seen[kernel.name] = seen.get(kernel.name, 0) + 1
    return keyed


def _stats_of(runs: Sequence[KernelResult | None], field: str) -> dict[str, FigureStats]:
    """Each name of `field` ("figures" or "metrics") that any repeat has, in the order repeats first show it."""
    maps: list[dict[str, FigureValue] | None] = [getattr(k, field) if k is not None else None for k in runs]
    names = list(dict.fromkeys(name for found in maps if found for name in found))
    stats = {}
    for name in names:
        values = [found[name] if found and name in found else None for found in maps]
        unit = next((value.unit for value in values if value is not None and value.unit), "")
        stats[name] = figure_stats([value.value if value is not None else None for value in values], unit)
    return stats


def aggregate_repeats(results: Sequence[ProfileResult]) -> RepeatResult:
    """The repeats of one request and every figure's statistics over them (`results` in repeat order)."""
    keyed = [_launches(result) for result in results]
    order = list(dict.fromkeys(key for launches in keyed for key in launches))
    kernels = []
    warnings = [
        f"repeat {index} failed ({result.error.kind}): {result.error.message}"
        for index, result in enumerate(results)
        if not result.ok
    ]
    succeeded = sum(result.ok for result in results)
    for name, occurrence in order:
        runs = [launches.get((name, occurrence)) for launches in keyed]
        present = [kernel for kernel in runs if kernel is not None]
        kernels.append(
            KernelStats(
                name=name,
                occurrence=occurrence,
                launch_index=present[0].launch_index,
                repeats=len(present),
                figures=_stats_of(runs, "figures"),
                metrics=_stats_of(runs, "metrics"),
            )
        )
        if len(present) < succeeded:
            warnings.append(f"{_launch_label(name, occurrence)} ran in {len(present)} of {succeeded} repeats")
    return RepeatResult(
        ok=bool(results) and all(result.ok for result in results),
        repeats=len(results),
        kernels=kernels,
        runs=list(results),
        warnings=warnings,
    )


def _launch_label(name: str, occurrence: int) -> str:
    return name if occurrence == 0 else f"{name} (its launch {occurrence + 1})"


def check_repeats(repeats: int) -> None:
    """Refuse a repeat count that asks for no profile at all."""
    if repeats < 1:
        raise errors.InvalidRequest(f"repeats must be at least 1, not {repeats}")


def numbered_progress(on_progress: Callable[[Progress], T], index: int, count: int) -> Callable[[Progress], T]:
    """`on_progress` for repeat `index` of `count`: each event's message says which repeat it is ("repeat 2/3: ...")."""

    def forward(event: Progress) -> T:
        return on_progress(event.model_copy(update={"message": f"repeat {index + 1}/{count}: {event.message}"}))

    return forward


__all__ = ["aggregate_repeats", "check_repeats", "figure_stats", "numbered_progress"]
