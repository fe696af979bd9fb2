"""Place a kernel on the roofline and name what bounds it, from catalog figures only.

The precision is the one with the most FLOPs (fp32, fp64, fp16 or tensor; "none"
without floating-point work, "" when ncu collected no FLOP counts). FP16 counts
only arithmetic (`fp16_math_flop`): ncu's FP16 counters also count HFMA2/HADD2
instructions nvcc uses to move constants, and a kernel is never called fp16 on
that evidence alone; where the report lacks the per-instruction counters that
tell them apart, FP16 FLOPs place nothing and the roofline says why. Its achieved FLOP/s, its peak, the DRAM bandwidth
and its peak are the catalog's `<p>_flop_per_s`, `peak_<p>_flop_per_s`,
`dram_bandwidth` and `peak_dram_byte_per_s`; arithmetic intensity is `<p>_flop`
over `dram_bytes` (and over `l2_bytes`, `l1_bytes`).

The bound comes from speed of light, the hierarchical view: the compute units
(`sm_throughput_pct`) and each memory level (`dram_throughput_pct`,
`l2_throughput_pct`, `l1_throughput_pct`), each as % of its own peak. The
threshold that makes a unit binding lives in metrics/roofline.toml.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from profsvc.metrics.tables import load_table
from profsvc_contract.models import Roofline
from profsvc_contract.units import format_value

# Candidate precisions; on equal FLOP counts the first listed wins.
PRECISIONS = ("fp32", "fp64", "fp16", "tensor")
NO_PRECISION = "none"
# Bounds: the compute units, then the memory levels from the outermost in, each with its catalog figure.
COMPUTE_UNIT = ("compute", "sm_throughput_pct")
MEMORY_LEVELS = (("dram", "dram_throughput_pct"), ("l2", "l2_throughput_pct"), ("l1", "l1_throughput_pct"))
LATENCY = "latency"
FP16_UNVERIFIED = (
    "FP16 counters show {flop} that place nothing here: the report lacks the per-instruction source"
    " counters that tell half-precision arithmetic from compiler idioms (HFMA2.MMA constant moves), so the"
    " figure may include those."
)


class RooflineParamsError(ValueError):
    """metrics/roofline.toml is malformed; the message names the field."""


class RooflineParams(BaseModel):
    """The threshold that makes a unit the kernel's bound (a percentage of the unit's peak, in (0, 100])."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    busy_pct: float = Field(gt=0, le=100)


def parse_roofline_params(data: Mapping[str, Any]) -> RooflineParams:
    """Validate parsed TOML; raise RooflineParamsError naming the bad field."""
    try:
        return RooflineParams.model_validate(dict(data))
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise RooflineParamsError(f"roofline.toml: {problems}") from None


@lru_cache(maxsize=1)
def load_roofline_params() -> RooflineParams:
    """The thresholds shipped with profsvc (metrics/roofline.toml), validated once."""
    return parse_roofline_params(load_table("roofline.toml"))


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def flop_counts(values: Mapping[str, float | None]) -> dict[str, float]:
    """FLOPs per precision that can place a kernel: FP16 arithmetic only, 0 where it cannot be told from idioms."""
    counts = {p: values.get(f"{p}_flop") or 0.0 for p in PRECISIONS}
    counts["fp16"] = values.get("fp16_math_flop") or 0.0
    return counts


def dominant_precision(values: Mapping[str, float | None]) -> str:
    """The precision with the most FLOPs, "none" when no precision counted any."""
    counts = flop_counts(values)
    best = max(PRECISIONS, key=lambda p: counts[p])
    return best if counts[best] > 0 else NO_PRECISION


def bound(values: Mapping[str, float | None], params: RooflineParams) -> tuple[str, float | None]:
    """What bounds the kernel, and that unit's % of its peak.

    "compute" when the SM is at least `busy_pct` busy and busier than every memory level;
    otherwise the outermost memory level at `busy_pct` or more ("dram", "l2", "l1": traffic
    from an outer level also passes the inner ones, so the outermost busy one is the cause);
    "latency" when no unit reaches it; "" without speed-of-light figures.
    """
    compute = values.get(COMPUTE_UNIT[1])
    levels = [(name, value) for name, figure in MEMORY_LEVELS if (value := values.get(figure)) is not None]
    known = [value for _, value in levels] + ([compute] if compute is not None else [])
    if not known:
        return "", None
    busiest_memory = max((value for _, value in levels), default=0.0)
    if compute is not None and compute >= params.busy_pct and compute >= busiest_memory:
        return COMPUTE_UNIT[0], compute
    for name, value in levels:
        if value >= params.busy_pct:
            return name, value
    return LATENCY, max(known)


def _fp16_note(values: Mapping[str, float | None]) -> str:
    flop = values.get("fp16_flop")
    if values.get("fp16_math_flop") is None and flop:
        return FP16_UNVERIFIED.format(flop=format_value(flop, "flop"))
    return ""


def roofline(values: Mapping[str, float | None], params: RooflineParams) -> Roofline:
    """The kernel's roofline placement from its catalog figure values (name -> value)."""
    dram_rate = values.get("dram_bandwidth")
    peak_dram = values.get("peak_dram_byte_per_s")
    bound_name, bound_pct = bound(values, params)
    if all(values.get(f"{p}_flop") is None for p in PRECISIONS):
        # ncu collected no FLOP counts (e.g. --set basic): the placement is unknown, not "none".
        return Roofline(
            dram_byte_per_s=dram_rate, peak_dram_byte_per_s=peak_dram, bound=bound_name, bound_pct=bound_pct
        )
    precision = dominant_precision(values)
    note = _fp16_note(values)
    if precision == NO_PRECISION:
        return Roofline(
            precision=precision,
            dram_byte_per_s=dram_rate,
            peak_dram_byte_per_s=peak_dram,
            bound=bound_name,
            bound_pct=bound_pct,
            note=note,
        )
    flop = flop_counts(values)[precision]
    achieved = values.get(f"{precision}_flop_per_s")
    if precision == "fp16" and achieved is not None:
        # ncu's rate counts the idioms too: scale it to the arithmetic share of the count.
        counted = values.get("fp16_flop")
        achieved = achieved * flop / counted if counted else None
    peak = values.get(f"peak_{precision}_flop_per_s")
    dram_bytes = values.get("dram_bytes")
    intensity = _ratio(flop, dram_bytes)
    ridge = _ratio(peak, peak_dram)
    if intensity is not None and peak is not None and peak_dram is not None:
        roof = min(peak, intensity * peak_dram)
    elif dram_bytes == 0:
        # FLOPs without DRAM traffic (the caches served everything): only the compute roof applies.
        roof = peak
    else:
        roof = None
    roof_pct = None if achieved is None or not roof else 100 * achieved / roof
    return Roofline(
        precision=precision,
        achieved_flop_per_s=achieved,
        peak_flop_per_s=peak,
        dram_byte_per_s=dram_rate,
        peak_dram_byte_per_s=peak_dram,
        arithmetic_intensity=intensity,
        ridge_point=ridge,
        bound=bound_name,
        bound_pct=bound_pct,
        roof_pct=roof_pct,
        l2_arithmetic_intensity=_ratio(flop, values.get("l2_bytes")),
        l1_arithmetic_intensity=_ratio(flop, values.get("l1_bytes")),
        note=note,
    )
