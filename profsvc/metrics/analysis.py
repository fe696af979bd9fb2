"""Read a whole .ncu-rep into kernel results (device, kernels, totals, warnings)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, Field

from profsvc.metrics.catalog import Catalog, load_catalog
from profsvc.metrics.derived import derived_values, parse_derived
from profsvc.metrics.extract import device_info, kernel_result, numeric, requested_metrics
from profsvc.metrics.hotspots import lacks_line_info
from profsvc.metrics.name_filter import name_pattern
from profsvc.metrics.nvtx import PROFILER_WARMUP_RANGE, in_profsvc_range
from profsvc.metrics.reader import load_reader
from profsvc.metrics.roofline import load_roofline_params
from profsvc.metrics.session import report_ncu_version
from profsvc_contract.models import Aggregate, DeviceInfo, FigureValue, KernelFilter, KernelResult, KernelShare


class ReportAnalysis(BaseModel):
    """What one report holds, as typed results."""

    device: DeviceInfo = Field(default_factory=DeviceInfo)
    kernels: list[KernelResult] = Field(default_factory=list)
    aggregate: Aggregate = Field(default_factory=Aggregate)
    warnings: list[str] = Field(default_factory=list)
    # The version of the ncu that wrote the report, as its session records it ("" where it does not).
    ncu_version: str = ""


def aggregate_kernels(kernels: Sequence[KernelResult]) -> Aggregate:
    """Totals over the launches: count, summed `duration`, and each kernel name's share of it.

    A launch without a duration counts as a launch but adds no time. Names are
    ordered by summed duration, largest first; shares are 0 when no launch has a duration.
    """
    durations: dict[str, float] = {}
    launches: dict[str, int] = {}
    for kernel in kernels:
        durations[kernel.name] = durations.get(kernel.name, 0.0) + (kernel.value("duration") or 0.0)
        launches[kernel.name] = launches.get(kernel.name, 0) + 1
    total = sum(durations.values())
    shares = [
        KernelShare(
            name=name,
            launches=launches[name],
            duration_ns=duration,
            share_pct=100.0 * duration / total if total > 0 else 0.0,
        )
        for name, duration in durations.items()
    ]
    shares.sort(key=lambda share: share.duration_ns, reverse=True)
    return Aggregate(launches=len(kernels), total_duration_ns=total, kernels=shares)


class ReportUnreadable(ValueError):
    """The file is not a report ncu_report can read."""


# Every .ncu-rep starts with these bytes; ncu_report reads other files as empty reports.
REPORT_MAGIC = b"NVR\x00"


def _load(reader: ModuleType, path: str | Path) -> Any:
    """The report's IContext; ReportUnreadable for anything ncu_report cannot read."""
    with Path(path).open("rb") as handle:
        if handle.read(len(REPORT_MAGIC)) != REPORT_MAGIC:
            raise ReportUnreadable(f"{Path(path).name} is not an Nsight Compute report (.ncu-rep)")
    try:
        context = reader.load_report(str(path))
    except Exception as error:  # ncu_report raises bare exceptions for unreadable files
        raise ReportUnreadable(f"{Path(path).name} is not a readable Nsight Compute report ({error})") from None
    if context is None:
        raise ReportUnreadable(f"{Path(path).name} is not a readable Nsight Compute report")
    if context.num_ranges() == 0:
        # ncu writes a report only once it holds a result: none at all means a truncated or damaged file.
        raise ReportUnreadable(f"{Path(path).name} holds no profiling results (a truncated or damaged report?)")
    return context


def _selected_actions(context: Any, kernel_filter: KernelFilter) -> Iterator[Any]:
    """The report's actions (IAction) that pass the filter, in launch order, skip and count applied as ncu does."""
    stop = kernel_filter.launch_skip + kernel_filter.launch_count if kernel_filter.launch_count else None
    return itertools.islice(_matching_actions(context, kernel_filter), kernel_filter.launch_skip, stop)


def _matching_actions(context: Any, kernel_filter: KernelFilter) -> Iterator[Any]:
    """The actions that pass the filter's NVTX and name parts; never a warm worker's own warm-up kernel."""
    pattern = name_pattern(kernel_filter.name_regex) if kernel_filter.name_regex else None
    for range_index in range(context.num_ranges()):
        profiled_range = context.range_by_idx(range_index)
        if kernel_filter.nvtx_include:
            # Crashes the process when grpc or matplotlib was imported before ncu_report (the report worker
            # loads the reader first).
            indices = list(profiled_range.actions_by_nvtx(list(kernel_filter.nvtx_include), []))
        else:
            indices = list(range(profiled_range.num_actions()))
        for action_index in indices:
            action = profiled_range.action_by_idx(action_index)
            if in_profsvc_range(action, PROFILER_WARMUP_RANGE):
                continue
            if not pattern or pattern.search(action.name()):
                yield action


def analyze_report(
    path: str | Path,
    kernel_filter: KernelFilter | None = None,
    *,
    catalog: Catalog | None = None,
    reader: ModuleType | None = None,
    metrics: Sequence[str] = (),
    derived: Sequence[str] = (),
) -> ReportAnalysis:
    """Every profiled launch in the report that passes the filter, in launch order; `metrics`: ncu metrics to
    report for each besides the catalog's figures; `derived`: NAME=FORMULA metrics over ncu metrics."""
    reader = reader or load_reader()
    catalog = catalog or load_catalog()
    context = _load(reader, path)
    analysis = ReportAnalysis(ncu_version=report_ncu_version(path))
    demangled = reader.IAction.NameBase_DEMANGLED
    roofline_params = load_roofline_params()
    without_line_info: list[str] = []
    definitions = [parse_derived(text) for text in derived]
    for action in _selected_actions(context, kernel_filter or KernelFilter()):
        if not analysis.kernels:
            analysis.device = device_info(action)
        kernel = kernel_result(action, catalog, len(analysis.kernels), demangled, roofline_params)
        kernel.metrics = requested_metrics(action, metrics)
        values = derived_values(definitions, lambda name, action=action: numeric(action, name))
        kernel.metrics.update({name: FigureValue(value=value) for name, value in values.items()})
        analysis.kernels.append(kernel)
        if not kernel.hotspots and lacks_line_info(action):
            without_line_info.append(kernel.name)
    if not analysis.kernels:
        analysis.warnings.append("the report holds no kernel launch that matches the filter")
    absent = [name for name in metrics if any(k.metrics[name].value is None for k in analysis.kernels)]
    if absent:
        analysis.warnings.append(
            f"not in the report: {', '.join(absent)} (ncu collects a metric only when asked: profile with --metric)"
        )
    if without_line_info:
        names = ", ".join(dict.fromkeys(without_line_info))
        analysis.warnings.append(
            f"no source-line hotspots for {names}: the build lacked -lineinfo, so ncu could not map its PC samples"
            " to CUDA source lines (compile with nvcc -lineinfo)"
        )
    analysis.aggregate = aggregate_kernels(analysis.kernels)
    return analysis
