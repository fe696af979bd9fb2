"""The variables rule expressions read, built from one KernelResult.

Besides every catalog entry, scalar figures and breakdowns (None when the kernel
lacks it), a rule may read:

- `stall_<reason>_pct`: the reason's share of all stall cycles (StallReason.share_pct),
  `stall_<reason>_cycles`: its cycles per issued instruction. A reason the kernel
  does not list is 0 when the kernel has stall data at all, None when it has none.
- `roofline_memory`, `roofline_compute`, `roofline_latency`: 1.0 for the bound the
  roofline names, 0.0 for the others, None when there is no roofline; `roofline_pct`.
- `limiter_registers`, `limiter_shared_memory`, `limiter_warps`, `limiter_blocks`:
  1.0 for the occupancy limiter KernelResult.occupancy_limiter names, 0.0 for the others,
  None when it names none.
"""

from __future__ import annotations

from profsvc.metrics.catalog import Catalog
from profsvc.metrics.expr import Value
from profsvc_client.models import KernelResult

# Every stall reason ncu 2025.3 reports on sm_90 (`smsp__average_warps_issue_stalled_<reason>_per_issue_active`),
# without `selected`, which is the issuing warp and not a stall.
STALL_REASONS = (
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "gmma",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instruction",
    "not_selected",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
)
ROOFLINE_BOUNDS = ("memory", "compute", "latency")
LIMITERS = ("registers", "shared_memory", "warps", "blocks")

# Units of the variables that are not catalog figures (the message renderer formats values with them).
EXTRA_UNITS: dict[str, str] = {
    **{f"stall_{reason}_pct": "%" for reason in STALL_REASONS},
    **{f"stall_{reason}_cycles": "cycle" for reason in STALL_REASONS},
    **{f"roofline_{bound}": "" for bound in ROOFLINE_BOUNDS},
    "roofline_pct": "%",
    **{f"limiter_{limiter}": "" for limiter in LIMITERS},
}


def kernel_variables(kernel: KernelResult, catalog: Catalog) -> dict[str, Value]:
    """Every variable a rule expression may read, for one kernel."""
    figures = kernel.figures
    values: dict[str, Value] = {name: (f.value if (f := figures.get(name)) else None) for name in catalog.entries}
    has_stalls = bool(kernel.stalls)
    stalls = {s.reason: s for s in kernel.stalls}
    for reason in STALL_REASONS:
        stall = stalls.get(reason)
        absent = 0.0 if has_stalls else None
        values[f"stall_{reason}_pct"] = stall.share_pct if stall else absent
        values[f"stall_{reason}_cycles"] = stall.cycles_per_issue if stall else absent
    bound = kernel.roofline.bound
    for name in ROOFLINE_BOUNDS:
        values[f"roofline_{name}"] = (1.0 if bound == name else 0.0) if bound else None
    values["roofline_pct"] = kernel.roofline.roof_pct
    limiter = kernel.occupancy_limiter
    for name in LIMITERS:
        values[f"limiter_{name}"] = (1.0 if name == limiter else 0.0) if limiter else None
    return values
