"""SOL score: how close the profiled kernels came to their roofline bound.

For each kernel the roofline bound is the least time its work could take on
this device: max(DRAM bytes / peak DRAM bandwidth, FLOPs / peak FLOP rate of
its precision), both peaks read from the report. The score is the summed
bound over the summed measured duration, in % (100 % = every kernel ran at
its roof). It is absent when a kernel lacks those counters.
"""

from __future__ import annotations

from profsvc.metrics.roofline import PRECISIONS, flop_counts
from profsvc_contract.models import KernelResult, ProfileResult

SOL_DEFINITION = (
    "sum over kernels of max(DRAM bytes / peak DRAM bandwidth, FLOPs / peak FLOP/s of the kernel's precision), "
    "divided by the sum of their ncu durations, in % (100 % = at the roofline); peaks from the report"
)


def bound_seconds(kernel: KernelResult) -> float | None:
    """The kernel's roofline-bound time in seconds, None without the counters."""
    dram_bytes, peak_bandwidth = kernel.value("dram_bytes"), kernel.value("peak_dram_byte_per_s")
    if dram_bytes is None or not peak_bandwidth:
        return None
    bound = dram_bytes / peak_bandwidth
    precision = kernel.roofline.precision
    if precision in PRECISIONS:
        # FP16 by its arithmetic: compiler idioms in ncu's count are no work the kernel had to do.
        flop = flop_counts({name: figure.value for name, figure in kernel.figures.items()})[precision]
        peak = kernel.value(f"peak_{precision}_flop_per_s")
        if peak:
            bound = max(bound, flop / peak)
    return bound


def sol_pct(result: ProfileResult) -> float | None:
    """The SOL score of a profiled call, None when any kernel lacks the counters."""
    bounds, durations = [], []
    for kernel in result.kernels:
        bound, duration = bound_seconds(kernel), kernel.value("duration")
        if bound is None or not duration:
            return None
        bounds.append(bound)
        durations.append(duration * 1e-9)
    if not durations:
        return None
    return 100.0 * sum(bounds) / sum(durations)
