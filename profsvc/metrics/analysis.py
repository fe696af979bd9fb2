"""Read a whole .ncu-rep into kernel results (device, kernels, warnings)."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

from pydantic import BaseModel, Field

from profsvc.metrics.catalog import Catalog, load_catalog
from profsvc.metrics.extract import device_info, kernel_result
from profsvc.metrics.reader import load_reader
from profsvc_client.models import DeviceInfo, KernelFilter, KernelResult


class ReportAnalysis(BaseModel):
    """What one report holds, as typed results."""

    device: DeviceInfo = Field(default_factory=DeviceInfo)
    kernels: list[KernelResult] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class ReportUnreadable(ValueError):
    """The file is not a report ncu_report can read."""


# Every .ncu-rep starts with these bytes; ncu_report reads other files as empty reports.
REPORT_MAGIC = b"NVR\x00"


def analyze_report(
    path: str | Path,
    kernel_filter: KernelFilter | None = None,
    *,
    catalog: Catalog | None = None,
    reader: ModuleType | None = None,
) -> ReportAnalysis:
    """Every profiled launch in the report that passes the filter, in launch order."""
    reader = reader or load_reader()
    catalog = catalog or load_catalog()
    kernel_filter = kernel_filter or KernelFilter()
    name_pattern = re.compile(kernel_filter.name_regex) if kernel_filter.name_regex else None
    with Path(path).open("rb") as handle:
        if handle.read(len(REPORT_MAGIC)) != REPORT_MAGIC:
            raise ReportUnreadable(f"{Path(path).name} is not an Nsight Compute report (.ncu-rep)")
    try:
        context = reader.load_report(str(path))
    except Exception as error:  # ncu_report raises bare exceptions for unreadable files
        raise ReportUnreadable(f"{Path(path).name} is not a readable Nsight Compute report ({error})") from None
    if context is None:
        raise ReportUnreadable(f"{Path(path).name} is not a readable Nsight Compute report")
    analysis = ReportAnalysis()
    demangled = reader.IAction.NameBase_DEMANGLED
    for range_index in range(context.num_ranges()):
        profiled_range = context.range_by_idx(range_index)
        if kernel_filter.nvtx_include:
            indices = list(profiled_range.actions_by_nvtx(list(kernel_filter.nvtx_include), []))
        else:
            indices = list(range(profiled_range.num_actions()))
        for action_index in indices:
            action = profiled_range.action_by_idx(action_index)
            if name_pattern and not name_pattern.search(action.name()):
                continue
            if not analysis.kernels:
                analysis.device = device_info(action)
            analysis.kernels.append(kernel_result(action, catalog, len(analysis.kernels), demangled))
    if not analysis.kernels:
        analysis.warnings.append("the report holds no kernel launch that matches the filter")
    return analysis
