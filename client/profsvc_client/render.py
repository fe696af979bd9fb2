"""The reports the client renders itself: the server's capabilities, and the statistics over repeated profiles
(made here from several results, so no server renders them). The server renders every other report.
"""

from __future__ import annotations

from profsvc_contract.document import dumps, result_document
from profsvc_contract.models import Capabilities, FigureStats, KernelStats, RepeatResult
from profsvc_contract.units import format_value

REPEAT_NOTE = "each repeat is a full ncu run (its replay passes, its report read); statistics over those with a value"
STATS_HEADER = ("median", "min", "max", "spread", "n")


def capabilities_text(capabilities: Capabilities, form: str) -> str:
    """`profsvc capabilities` in `form`: text, json or md."""
    if form == "json":
        return dumps(result_document(capabilities))
    gpus = [f"{g.index}: {g.name} (sm_{g.compute_capability.replace('.', '')})" for g in capabilities.gpus]
    profiling = "yes" if capabilities.profiling_available else f"no ({capabilities.unavailable_reason})"
    rows = [
        ("server", capabilities.server_version),
        ("host", capabilities.host or "unknown"),
        ("GPUs", "; ".join(gpus) or "none"),
        ("driver", capabilities.driver_version or "none"),
        ("ncu", capabilities.ncu_version or "none"),
        ("nvcc", capabilities.nvcc_version or "none"),
        ("profiling", profiling),
        ("isolation", capabilities.isolation),
        ("metric sets", ", ".join(m.name for m in capabilities.metric_sets)),
    ]
    if form == "md":
        lines = ["| | |", "| --- | --- |", *(f"| {k} | {v.replace('|', '/')} |" for k, v in rows)]
        lines += ["", *(f"- `{m.name}`: {m.description}" for m in capabilities.metric_sets)]
    else:
        lines = [f"{k + ':':<13}{v}" for k, v in rows]
        lines += [f"  {m.name:<11}{m.description}" for m in capabilities.metric_sets]
    return "\n".join(lines) + "\n"


def _cells(stats: FigureStats) -> tuple[str, ...]:
    spread = "n/a" if stats.spread_pct is None else f"{stats.spread_pct:.1f} %"
    values = (format_value(value, stats.unit) for value in (stats.median, stats.min, stats.max))
    return (*values, spread, str(stats.n))


def _rows(kernel: KernelStats) -> list[tuple[str, ...]]:
    """One row per figure, then per requested metric, that some repeat has a value for."""
    shown = {**kernel.figures, **kernel.metrics}
    return [(name, *_cells(stats)) for name, stats in shown.items() if stats.n]


def _title(kernel: KernelStats, repeats: int) -> str:
    return f"{kernel.name} (launch {kernel.launch_index}), in {kernel.repeats} of {repeats} repeats"


def _heading(result: RepeatResult) -> list[str]:
    ok = sum(run.ok for run in result.runs)
    lines = [f"{result.repeats} repeats, {ok} ok: {REPEAT_NOTE}"]
    first = next((run for run in result.runs if run.ok), None)
    if first is not None and first.device.name:
        lines.append(f"GPU: {first.device.name} (compute capability {first.device.compute_capability})")
    if first is not None and first.ncu.version:
        metric_set = f", metric set {first.ncu.metric_set}" if first.ncu.metric_set else ""
        lines.append(f"ncu {first.ncu.version}{metric_set}")
    return lines


def repeat_text(result: RepeatResult) -> str:
    """The statistics as the CLI prints them: a table per kernel launch, figures by name."""
    lines = ["=== profsvc repeated profile ===", *_heading(result)]
    for kernel in result.kernels:
        rows = _rows(kernel)
        width = max((len(row[0]) for row in rows), default=0)
        lines += ["", _title(kernel, result.repeats)]
        lines.append(f"  {'':<{width}}  " + "  ".join(f"{h:>12}" for h in STATS_HEADER[:4]) + f"  {'n':>3}")
        for name, *cells, n in rows:
            lines.append(f"  {name:<{width}}  " + "  ".join(f"{c:>12}" for c in cells) + f"  {n:>3}")
    for run in result.runs:
        if not run.ok and run.report_text:
            lines += ["", run.report_text.rstrip("\n")]
            break  # one failure's report says why; the notes below name every failed repeat
    lines += [f"note: {warning}" for warning in result.warnings]
    return "\n".join(lines) + "\n"


def repeat_markdown(result: RepeatResult) -> str:
    """The statistics in Markdown, for a pull request."""
    lines = ["## profsvc repeated profile", "", *(f"- {line}" for line in _heading(result))]
    for kernel in result.kernels:
        lines += ["", f"### `{kernel.name}`", ""]
        lines += [f"Launch {kernel.launch_index}, in {kernel.repeats} of {result.repeats} repeats."]
        lines += ["", "| figure | " + " | ".join(STATS_HEADER) + " |", "| --- |" + " ---: |" * len(STATS_HEADER)]
        lines += [f"| `{name}` | " + " | ".join(cells) + " |" for name, *cells in _rows(kernel)]
    if result.warnings:
        lines += ["", *(f"- note: {warning}" for warning in result.warnings)]
    return "\n".join(lines) + "\n"
