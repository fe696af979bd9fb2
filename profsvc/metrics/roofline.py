"""Place a kernel on the roofline, from catalog figures only.

The precision is the one with the most FLOPs (fp32, fp64, fp16 or tensor; "none"
without floating-point work, "" when ncu collected no FLOP counts). Its achieved FLOP/s, its peak, the DRAM bandwidth
and its peak are the catalog's `<p>_flop_per_s`, `peak_<p>_flop_per_s`,
`dram_bandwidth` and `peak_dram_byte_per_s`; arithmetic intensity is `<p>_flop`
over `dram_bytes` (and over `l2_bytes`, `l1_bytes`). The thresholds that name
the bound live in metrics/roofline.toml.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from profsvc.metrics.tables import load_table
from profsvc_client.models import Roofline

# Candidate precisions; on equal FLOP counts the first listed wins.
PRECISIONS = ("fp32", "fp64", "fp16", "tensor")
NO_PRECISION = "none"


class RooflineParamsError(ValueError):
    """metrics/roofline.toml is malformed; the message names the field."""


class RooflineParams(BaseModel):
    """The thresholds that turn a roofline position into a bound (percentages in (0, 100])."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_roof_pct: float = Field(gt=0, le=100)
    compute_roof_pct: float = Field(gt=0, le=100)
    no_flop_dram_pct: float = Field(gt=0, le=100)


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


def dominant_precision(values: Mapping[str, float | None]) -> str:
    """The precision with the most FLOPs, "none" when no precision counted any."""
    counts = {p: values.get(f"{p}_flop") or 0.0 for p in PRECISIONS}
    best = max(PRECISIONS, key=lambda p: counts[p])
    return best if counts[best] > 0 else NO_PRECISION


def _bound(memory_side: bool, roof_pct: float | None, params: RooflineParams) -> str:
    if roof_pct is None:
        return ""
    if memory_side:
        return "memory" if roof_pct >= params.memory_roof_pct else "latency"
    return "compute" if roof_pct >= params.compute_roof_pct else "latency"


def roofline(values: Mapping[str, float | None], params: RooflineParams) -> Roofline:
    """The kernel's roofline placement from its catalog figure values (name -> value)."""
    dram_rate = values.get("dram_bandwidth")
    peak_dram = values.get("peak_dram_byte_per_s")
    if all(values.get(f"{p}_flop") is None for p in PRECISIONS):
        # ncu collected no FLOP counts (e.g. --set basic): the placement is unknown, not "none".
        return Roofline(dram_byte_per_s=dram_rate, peak_dram_byte_per_s=peak_dram)
    precision = dominant_precision(values)
    if precision == NO_PRECISION:
        share = _ratio(dram_rate, peak_dram)
        bound = "" if share is None else ("memory" if 100 * share >= params.no_flop_dram_pct else "latency")
        return Roofline(precision=precision, dram_byte_per_s=dram_rate, peak_dram_byte_per_s=peak_dram, bound=bound)
    flop = values.get(f"{precision}_flop")
    achieved = values.get(f"{precision}_flop_per_s")
    peak = values.get(f"peak_{precision}_flop_per_s")
    dram_bytes = values.get("dram_bytes")
    intensity = _ratio(flop, dram_bytes)
    ridge = _ratio(peak, peak_dram)
    memory_side = intensity is not None and ridge is not None and intensity < ridge
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
        bound=_bound(memory_side, roof_pct, params),
        roof_pct=roof_pct,
        l2_arithmetic_intensity=_ratio(flop, values.get("l2_bytes")),
        l1_arithmetic_intensity=_ratio(flop, values.get("l1_bytes")),
    )
