"""Turn the actions of an ncu report into typed kernel results.

Every figure is read from ncu_report: a catalog figure either is one ncu
metric's value, unchanged, or a catalog formula over ncu values, and a
breakdown the sum of named instances of one instanced metric. The roofline
placement and the occupancy limiter are derived from those figures, the
hotspots and the SASS counts from the per-PC metrics. Nothing is estimated here. `action` and
`context` are ncu_report's IAction and IContext.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from profsvc.metrics.catalog import Breakdown, Catalog, Figure
from profsvc.metrics.hotspots import source_hotspots
from profsvc.metrics.nvtx import PROFSVC_DOMAIN, domain_ranges
from profsvc.metrics.roofline import RooflineParams, load_roofline_params, roofline
from profsvc.metrics.sass import kernel_sass, sass_count_value
from profsvc_contract.models import (
    DeviceInfo,
    Dim3,
    FigureValue,
    KernelResult,
    NcuRuleResult,
    NvtxRanges,
    StallReason,
)

_STALL_METRIC = re.compile(r"^smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$")
# `selected` is the state of the warp being issued, not a stall.
_NOT_A_STALL = frozenset({"selected"})
_MESSAGE_TYPES = {0: "NONE", 1: "OK", 2: "OPT", 3: "WRN", 4: "ERR"}
_SPEEDUP_TYPES = {1: "local", 2: "global"}
# ncu renders links and section references as @kind:target:text@ or @kind:text@.
_NCU_MARKUP = re.compile(r"@(?:url|section):(?:[^@]*?:)?([^@:]+)@")
_NCU_URL = re.compile(r"@url:([^:@]+):(https?://[^@]+)@")
# Occupancy limiter -> its catalog figure. On a tie the first listed wins: the
# block-shape limits (warps, blocks) first, because while one of them binds no
# saving of registers or shared memory can raise the occupancy.
OCCUPANCY_LIMITERS = (
    ("warps", "occupancy_limit_warps"),
    ("blocks", "occupancy_limit_blocks"),
    ("registers", "occupancy_limit_registers"),
    ("shared_memory", "occupancy_limit_shared_mem"),
    ("barriers", "occupancy_limit_barriers"),
)


def numeric(action: Any, name: str) -> float | None:
    """The value of one ncu metric as a float, None when absent or not numeric."""
    metric = action.metric_by_name(name)
    return None if metric is None else _number(metric.value())


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def first_numeric(action: Any, names: tuple[str, ...]) -> float | None:
    """The value of the first metric in `names` that the action has."""
    for name in names:
        value = numeric(action, name)
        if value is not None:
            return value
    return None


def figure_value(action: Any, figure: Figure) -> float | None:
    """One catalog figure's value for an action (None when ncu did not collect its inputs)."""
    if figure.evaluator is None:
        return first_numeric(action, figure.metric)
    inputs = {name: first_numeric(action, names) for name, names in figure.inputs.items()}
    value = figure.evaluator(inputs)
    if value is None:
        return None
    return float(round(value)) if figure.whole else float(value)


def breakdown_value(action: Any, breakdown: Breakdown) -> float | None:
    """The sum of a breakdown's instances (None when ncu did not collect the metric)."""
    for name in breakdown.metric:
        metric = action.metric_by_name(name)
        if metric is None:
            continue
        ids = metric.correlation_ids()
        if ids is None:
            return None
        return float(
            sum(metric.value(i) for i in range(metric.num_instances()) if str(ids.value(i)) in breakdown.instances)
        )
    return None


def figures(action: Any, catalog: Catalog) -> dict[str, FigureValue]:
    """Every catalog entry for an action (scalar figures, breakdowns, then SASS counts), with its unit."""
    values = {f.name: FigureValue(value=figure_value(action, f), unit=f.unit) for f in catalog.figures}
    values.update({b.name: FigureValue(value=breakdown_value(action, b), unit=b.unit) for b in catalog.breakdowns})
    if catalog.sass_counts:
        sass = kernel_sass(action)
        values.update({c.name: FigureValue(value=sass_count_value(sass, c), unit=c.unit) for c in catalog.sass_counts})
    return values


def requested_metrics(action: Any, names: Sequence[str]) -> dict[str, FigureValue]:
    """The ncu metrics a request named, as the report holds them (ncu's base units); no value where it lacks one
    or where the metric is not a number (a name, an instanced list)."""
    found: dict[str, FigureValue] = {}
    for name in names:
        metric = action.metric_by_name(name)
        if metric is None:
            found[name] = FigureValue(value=None, unit="")
        else:
            found[name] = FigureValue(value=_number(metric.value()), unit=str(metric.unit()))
    return found


def occupancy_limiter(values: Mapping[str, FigureValue]) -> str:
    """The resource that allows the fewest blocks per SM ("" when ncu reported no limits)."""
    limits = [(values[figure].value, limiter) for limiter, figure in OCCUPANCY_LIMITERS if figure in values]
    known = [(value, limiter) for value, limiter in limits if value is not None]
    if not known:
        return ""
    # min() keeps the first of equal values, so OCCUPANCY_LIMITERS' order breaks ties.
    return min(known, key=lambda pair: pair[0])[1]


def stall_reasons(action: Any) -> list[StallReason]:
    """Warp stall reasons, largest first: share of all stall cycles (sums to 100) and cycles per issue."""
    per_issue: dict[str, float] = {}
    for name in action.metric_names():
        match = _STALL_METRIC.match(name)
        if match and match.group(1) not in _NOT_A_STALL:
            value = numeric(action, name)
            if value is not None:
                per_issue[match.group(1)] = value
    total = sum(per_issue.values())
    if total <= 0:
        return []
    stalls = [
        StallReason(reason=reason, share_pct=100.0 * value / total, cycles_per_issue=value)
        for reason, value in per_issue.items()
        if value > 0
    ]
    return sorted(stalls, key=lambda s: s.share_pct, reverse=True)


def plain_message(text: str) -> str:
    """ncu rule text without its GUI markup: links become 'text (url)', section references their name."""
    text = _NCU_URL.sub(lambda m: f"{m.group(1)} ({m.group(2)})", text)
    return _NCU_MARKUP.sub(lambda m: m.group(1), text)


def ncu_rules(action: Any) -> list[NcuRuleResult]:
    """Nsight Compute's own guided-analysis messages stored in the report."""
    results: list[NcuRuleResult] = []
    for rule in action.rule_results_as_dicts():
        message = rule.get("rule_message") or {}
        if not message.get("message"):
            continue
        speedup = rule.get("speedup_estimation") or {}
        results.append(
            NcuRuleResult(
                rule_id=rule.get("rule_identifier", ""),
                section=rule.get("section_identifier", ""),
                title=message.get("title", ""),
                message=plain_message(message.get("message", "")),
                type=_MESSAGE_TYPES.get(message.get("type", 0), "NONE"),
                estimated_speedup_pct=speedup.get("speedup"),
                speedup_type=_SPEEDUP_TYPES.get(speedup.get("type", 0), ""),
            )
        )
    return results


def _dim3(action: Any, prefix: str) -> Dim3:
    return Dim3(**{axis: int(numeric(action, f"{prefix}_{axis}") or 0) for axis in ("x", "y", "z")})


def nvtx_ranges(action: Any) -> list[NvtxRanges]:
    """The NVTX ranges the launch ran under, one entry per domain ("" the default domain)."""
    return [NvtxRanges(domain=r.domain, push_pop=r.push_pop, start_end=r.start_end) for r in domain_ranges(action)]


def innermost_range(stacks: list[NvtxRanges]) -> str:
    """The innermost push/pop range of the first domain that has one (else its last start/end range),
    'domain@name' outside the default domain; the user's domains before profsvc's."""
    for stack in sorted(stacks, key=lambda s: s.domain == PROFSVC_DOMAIN):
        ranges = stack.push_pop or stack.start_end
        if ranges:
            return f"{stack.domain}@{ranges[-1]}" if stack.domain else ranges[-1]
    return ""


def kernel_result(
    action: Any,
    catalog: Catalog,
    launch_index: int,
    demangled_base: int,
    roofline_params: RooflineParams | None = None,
) -> KernelResult:
    """Everything profsvc reports for one profiled launch."""
    values = figures(action, catalog)
    stacks = nvtx_ranges(action)
    return KernelResult(
        name=action.name(),
        demangled_name=action.name(demangled_base),
        grid=_dim3(action, "launch__grid_dim"),
        block=_dim3(action, "launch__block_dim"),
        figures=values,
        stalls=stall_reasons(action),
        ncu_rules=ncu_rules(action),
        nvtx_range=innermost_range(stacks),
        nvtx=stacks,
        launch_index=launch_index,
        roofline=roofline({name: v.value for name, v in values.items()}, roofline_params or load_roofline_params()),
        hotspots=source_hotspots(action),
        occupancy_limiter=occupancy_limiter(values),
    )


def device_info(action: Any) -> DeviceInfo:
    """The GPU an action ran on."""
    name = action.metric_by_name("device__attribute_display_name")
    major = numeric(action, "device__attribute_compute_capability_major")
    minor = numeric(action, "device__attribute_compute_capability_minor")
    return DeviceInfo(
        name=name.value() if name is not None else "",
        compute_capability=f"{int(major)}.{int(minor)}" if major is not None and minor is not None else "",
        sm_count=int(numeric(action, "device__attribute_multiprocessor_count") or 0),
    )
