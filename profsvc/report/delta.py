"""The delta view: a result compared with the session's previous one, figure by figure.

Kernels are matched by name and, among launches of the same name, by order (the
second `gemm` of this run against the second `gemm` of the previous one). Every
catalog figure both launches have gets a row, except figures without a better
direction that did not change; the aggregate adds one row for the total GPU time
(kernel ""). Verdicts follow the catalog's `better` direction, not the sign: a
duration that drops improved, an occupancy that drops regressed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from profsvc.metrics.catalog import Better, Breakdown, Catalog, Figure
from profsvc_contract.models import DeltaRow, KernelResult, ProfileResult

# A relative change up to this size counts as unchanged: ncu's replayed measurements of the
# same kernel differ by about a percent from run to run.
UNCHANGED_RELATIVE_TOLERANCE = 0.02
IMPROVED = "improved"
REGRESSED = "regressed"
UNCHANGED = "unchanged"
# A figure without a better direction (grid size, pipe mix) that changed gets no verdict.
NO_VERDICT = ""
AGGREGATE_KERNEL = ""
TOTAL_FIGURE = "duration"


def compute_delta(before: ProfileResult, after: ProfileResult, catalog: Catalog) -> list[DeltaRow]:
    """Rows for every figure of every matched kernel, in `after`'s kernel and catalog order, then the total."""
    rows: list[DeltaRow] = []
    for old, new in matched_kernels(before.kernels, after.kernels):
        for entry in catalog.entries.values():
            row = delta_row(new.name, entry, old.value(entry.name), new.value(entry.name))
            if row is not None:
                rows.append(row)
    total = delta_row(AGGREGATE_KERNEL, catalog[TOTAL_FIGURE], _total_duration(before), _total_duration(after))
    if total is not None:
        rows.append(total)
    return rows


def matched_kernels(
    before: Sequence[KernelResult], after: Sequence[KernelResult]
) -> Iterator[tuple[KernelResult, KernelResult]]:
    """(previous, new) pairs: the n-th launch of a name in `after` with the n-th launch of that name in `before`."""
    previous: dict[str, list[KernelResult]] = {}
    for kernel in before:
        previous.setdefault(kernel.name, []).append(kernel)
    seen: Counter[str] = Counter()
    for kernel in after:
        index = seen[kernel.name]
        seen[kernel.name] += 1
        candidates = previous.get(kernel.name, [])
        if index < len(candidates):
            yield candidates[index], kernel


def delta_row(kernel: str, entry: Figure | Breakdown, before: float | None, after: float | None) -> DeltaRow | None:
    """One figure's row; None when either value is missing, or when a figure without direction did not change."""
    if before is None or after is None:
        return None
    unchanged = _unchanged(before, after)
    if entry.better is Better.NONE and unchanged:
        return None
    return DeltaRow(
        kernel=kernel,
        figure=entry.name,
        before=before,
        after=after,
        unit=entry.unit,
        change_pct=_change_pct(before, after),
        verdict=UNCHANGED if unchanged else _direction(entry.better, before, after),
    )


def _unchanged(before: float, after: float) -> bool:
    return abs(after - before) <= UNCHANGED_RELATIVE_TOLERANCE * abs(before)


def _change_pct(before: float, after: float) -> float | None:
    if before == 0:
        # No relative change from zero, except "none at all".
        return 0.0 if after == 0 else None
    return 100.0 * (after - before) / abs(before)


def _direction(better: Better, before: float, after: float) -> str:
    if better is Better.HIGHER:
        return IMPROVED if after > before else REGRESSED
    if better is Better.LOWER:
        return IMPROVED if after < before else REGRESSED
    return NO_VERDICT


def _total_duration(result: ProfileResult) -> float | None:
    durations = [d for kernel in result.kernels if (d := kernel.value(TOTAL_FIGURE)) is not None]
    return sum(durations) if durations else None
