"""ncu's options for a Profile: a request's, the default ones, and those a warm ncu worker starts under.

The warm ncu workers start (scheduler.scheduler) before any request, and a Profile takes one only when its own
options are the default ones (scheduler.profiling): both read them here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from profsvc.config import Limits
from profsvc.metrics.nvtx import MEASURED_INCLUDE, WARMUP_INCLUDE
from profsvc.ncu.command import NcuOptions
from profsvc.ncu.metric_sets import resolve
from profsvc.scheduler.jobs import ProfileSpec, SourceSpec
from profsvc_contract.models import SourceKind

# The options of a default Profile depend only on the source's kind: this stands for any Python problem.
_ANY_PYTHON_PROBLEM = SourceSpec(kind=SourceKind.PYTHON_PROBLEM, main_name="", main_text="")


def profile_ncu_options(spec: ProfileSpec, report: Path, default_nvtx: list[str], limits: Limits) -> NcuOptions:
    """ncu's options for a Profile: the request's metric set and filter; its kind's NVTX ranges by default."""
    metric_set = spec.metric_set or resolve("")
    assert metric_set is not None
    kernel_filter = spec.kernel_filter
    nvtx = list(kernel_filter.nvtx_include) or list(default_nvtx)
    count = kernel_filter.launch_count or limits.max_launches
    return NcuOptions(
        collection_args=metric_set.collection_args(spec.collected()),
        export_path=report,
        nvtx_include=nvtx,
        name_regex=kernel_filter.name_regex,
        launch_count=min(count, limits.max_launches),
        launch_skip=kernel_filter.launch_skip,
        clock_control=spec.clock_control,
    )


def default_ncu_options(report: Path, limits: Limits) -> NcuOptions:
    """What a Python problem's Profile collects when the request names no metric set and no filter."""
    return profile_ncu_options(ProfileSpec(source=_ANY_PYTHON_PROBLEM), report, [MEASURED_INCLUDE], limits)


def warm_ncu_options(report: Path, limits: Limits, primed: bool) -> NcuOptions:
    """The default options; for a worker that primes (scheduler.warm_pool), plus its own kernel, profiled in its
    warm-up range before the job."""
    options = default_ncu_options(report, limits)
    if not primed:
        return options
    return dataclasses.replace(
        options,
        nvtx_include=[*options.nvtx_include, WARMUP_INCLUDE],
        launch_count=options.launch_count + 1,
    )
