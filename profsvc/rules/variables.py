"""The variables rule expressions read, built from one KernelResult.

Besides every catalog entry, scalar figures and breakdowns (None when the kernel
lacks it), a rule may read:

- `stall_<reason>_pct`: the reason's share of all stall cycles (StallReason.share_pct),
  `stall_<reason>_cycles`: its cycles per issued instruction. A reason the kernel
  does not list is 0 when the kernel has stall data at all, None when it has none.
- `stall_share_total_pct`: the shares added up (100 when the stall data is whole), None without stalls.
- `roofline_compute`, `roofline_dram`, `roofline_l2`, `roofline_l1`, `roofline_latency`:
  1.0 for the bound the roofline names, 0.0 for the others, None when it names none;
  `roofline_pct` (% of the DRAM roof), `roofline_bound_pct` (the binding unit's % of its
  peak), `roofline_precision_flop` (the FLOPs of the precision that placed the kernel,
  None when no precision did).
- `l1tex_cost_pct`: what the kernel's L1TEX traffic costs it, for hints about that traffic's causes: the
  warps' waits on the L1TEX queue and its results (long scoreboard and lg throttle cycles over the cycles
  between two issues) or the memory throughput, whichever is larger, at most 100 (the memory throughput
  alone without stall data).
- `limiter_registers`, `limiter_shared_memory`, `limiter_warps`, `limiter_blocks`:
  1.0 for the occupancy limiter KernelResult.occupancy_limiter names, 0.0 for the others,
  None when it names none.
"""

from __future__ import annotations

from profsvc.metrics.catalog import Catalog
from profsvc.metrics.expr import Value
from profsvc.metrics.roofline import PRECISIONS, flop_counts
from profsvc_contract.models import KernelResult

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
ROOFLINE_BOUNDS = ("compute", "dram", "l2", "l1", "latency")
LIMITERS = ("registers", "shared_memory", "warps", "blocks")

# Units of the variables that are not catalog figures (the message renderer formats values with them).
EXTRA_UNITS: dict[str, str] = {
    **{f"stall_{reason}_pct": "%" for reason in STALL_REASONS},
    **{f"stall_{reason}_cycles": "cycle" for reason in STALL_REASONS},
    **{f"roofline_{bound}": "" for bound in ROOFLINE_BOUNDS},
    "stall_share_total_pct": "%",
    "l1tex_cost_pct": "%",
    "roofline_pct": "%",
    "roofline_bound_pct": "%",
    "roofline_precision_flop": "flop",
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
    values["stall_share_total_pct"] = sum(s.share_pct for s in kernel.stalls) if has_stalls else None
    roofline = kernel.roofline
    for name in ROOFLINE_BOUNDS:
        values[f"roofline_{name}"] = (1.0 if roofline.bound == name else 0.0) if roofline.bound else None
    values["roofline_pct"] = roofline.roof_pct
    values["roofline_bound_pct"] = roofline.bound_pct
    values["roofline_precision_flop"] = (
        flop_counts(values)[roofline.precision] if roofline.precision in PRECISIONS else None
    )
    limiter = kernel.occupancy_limiter
    for name in LIMITERS:
        values[f"limiter_{name}"] = (1.0 if name == limiter else 0.0) if limiter else None
    values["l1tex_cost_pct"] = _l1tex_cost(values)
    return values


def _l1tex_cost(values: dict[str, Value]) -> Value:
    memory = values.get("memory_throughput_pct")
    waits, between = values.get("stall_long_scoreboard_cycles"), values.get("warp_cycles_per_issued_instruction")
    lg = values.get("stall_lg_throttle_cycles")
    stalled = 100 * (waits + lg) / between if waits is not None and lg is not None and between else None
    known = [v for v in (memory, stalled) if v is not None]
    return min(100.0, max(known)) if known else None
