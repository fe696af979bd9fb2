"""Evaluate the rule table on one kernel, merge Nsight Compute's own rule results, rank the hints.

Semantics (see metrics/rules.toml for the table itself):
- A rule fires when its condition is True; None (a figure it needs is absent) does not fire.
- Its speedup is clamped to 0..100 and capped by its parent's speedup, which is evaluated
  whether or not the parent fires: like ncu's rule tree, a parent bounds what its children
  can win (100 % minus the busiest unit's throughput bounds every latency fix).
- A parent that fires is not reported when one of its descendants fires: the parent is the
  general diagnosis, the child names the cause and carries the (capped) estimate.
- ncu's OPT and WRN results join as hints of origin "ncu", except those a fired profsvc rule
  (reported or not) declares in `covers_ncu`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from profsvc.metrics.catalog import Catalog
from profsvc.metrics.expr import Value
from profsvc.rules.table import Rule, RuleTable, Severity
from profsvc.rules.variables import kernel_variables
from profsvc_client.models import Evidence, Hint, KernelResult, NcuRuleResult
from profsvc_client.units import format_value

ORIGIN_PROFSVC = "profsvc"
ORIGIN_NCU = "ncu"
# Hotspot lines a hint cites at most: the top few are where to look, the rest is noise in a short report.
MAX_SOURCE_LINES = 5
# ncu message types that become hints, and the severity they get (WRN is mostly about the measurement itself).
NCU_SEVERITY = {"OPT": Severity.MEDIUM, "WRN": Severity.LOW}
NCU_DOCS = "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html#sections-and-rules"
NO_ESTIMATE = " (No runtime estimate: a figure the estimate needs was not collected.)"
_SEVERITY_RANK = {Severity.HIGH.value: 0, Severity.MEDIUM.value: 1, Severity.LOW.value: 2}
_ORIGIN_RANK = {ORIGIN_PROFSVC: 0, ORIGIN_NCU: 1}
_URL = re.compile(r"https://[^\s)]+")


def _percent(value: Value) -> float | None:
    """A speedup as a number in 0..100; None when it cannot be computed."""
    if value is None or (number := float(value)) != number:  # NaN compares unequal to itself
        return None
    return min(100.0, max(0.0, number))


def evaluate_rules(kernel: KernelResult, catalog: Catalog, rules: RuleTable) -> list[Hint]:
    """All hints for one kernel, profsvc's and ncu's uncovered ones, ranked (see rank_hints)."""
    values = kernel_variables(kernel, catalog)
    speedups: dict[str, float | None] = {}
    fired: list[Rule] = []
    for rule in rules.rules:  # parents come before their children
        if rule.condition_fn(values) is True:
            fired.append(rule)
        elif rule.id not in rules.parents:
            continue  # nobody reads the speedup of a rule that neither fires nor caps a child
        speedup = _percent(rule.speedup_fn(values))
        cap = speedups.get(rule.parent) if rule.parent else None
        speedups[rule.id] = min(speedup, cap) if speedup is not None and cap is not None else speedup
    explained = {ancestor for rule in fired for ancestor in rules.ancestors[rule.id]}
    hints = [_hint(rule, values, speedups[rule.id], rules.units, kernel) for rule in fired if rule.id not in explained]
    return rank_hints(hints + ncu_hints(kernel, fired, rules.ncu_informational))


def _hint(
    rule: Rule, values: Mapping[str, Value], speedup: float | None, units: Mapping[str, str], kernel: KernelResult
) -> Hint:
    scope = {**values, **rule.params}
    rendered = {name: format_value(_number(scope.get(name)), units.get(name, "")) for name in rule.message_fields}
    evidence = [
        Evidence(figure=name, value=value, unit=units.get(name, ""))
        for name in rule.evidence
        if (value := _number(scope.get(name))) is not None
    ]
    return Hint(
        rule_id=rule.id,
        origin=ORIGIN_PROFSVC,
        severity=rule.severity.value,
        title=rule.title,
        message=rule.message.format(**rendered) + ("" if speedup is not None else NO_ESTIMATE),
        advice=rule.advice,
        estimated_speedup_pct=speedup or 0.0,
        evidence=evidence,
        source_lines=source_lines(kernel, rule.source_stall) if rule.source_stall else [],
        docs=rule.docs,
    )


def _number(value: Value) -> float | None:
    return None if value is None else float(value)


def source_lines(kernel: KernelResult, stall: str) -> list[str]:
    """'file:line' of the kernel's hotspots whose top stall is `stall`, hottest first."""
    lines = [f"{h.file}:{h.line}" for h in kernel.hotspots if h.file and h.top_stall == stall]
    return lines[:MAX_SOURCE_LINES]


def ncu_hints(
    kernel: KernelResult, covering: Iterable[Rule], informational: frozenset[str] = frozenset()
) -> list[Hint]:
    """Nsight Compute's OPT and WRN results as hints, without those a fired profsvc rule covers.

    Results of `informational` rules are kept but ranked as 0 %: their lever is not in the kernel's code.
    """
    covered = {ref for rule in covering for ref in rule.covers_ncu}
    return [
        _ncu_hint(result, result.rule_id in informational)
        for result in kernel.ncu_rules
        if result.type in NCU_SEVERITY
        and result.rule_id not in covered
        and f"{result.rule_id}:{result.title}" not in covered
    ]


def _ncu_hint(result: NcuRuleResult, informational: bool) -> Hint:
    message = result.message
    speedup = 0.0
    if result.estimated_speedup_pct is not None and math.isfinite(result.estimated_speedup_pct):
        if informational:
            message += f" (ncu estimates {result.estimated_speedup_pct:.0f} %; the lever is outside the kernel's code.)"
        elif result.speedup_type == "global":
            speedup = min(100.0, max(0.0, result.estimated_speedup_pct))
        else:
            # A local estimate is the gain of one unit, not of the runtime: quote it, rank it as unknown.
            local = result.estimated_speedup_pct
            message += f" (ncu estimates {local:.0f} % for that unit alone, not for the runtime.)"
    url = _URL.search(result.message)
    return Hint(
        rule_id=result.rule_id,
        origin=ORIGIN_NCU,
        severity=NCU_SEVERITY[result.type].value,
        title=result.title or result.rule_id,
        message=message,
        estimated_speedup_pct=speedup,
        docs=url.group(0) if url else NCU_DOCS,
    )


def rank_hints(hints: Iterable[Hint], limit: int | None = None) -> list[Hint]:
    """Hints by estimated speedup, largest first; ties by severity, then profsvc before ncu, then input order.

    The text report shows `rank_hints(kernel.hints, 5)`, JSON all of them.
    """
    ranked = sorted(
        hints,
        key=lambda h: (-h.estimated_speedup_pct, _SEVERITY_RANK.get(h.severity, 3), _ORIGIN_RANK.get(h.origin, 2)),
    )
    return ranked if limit is None else ranked[:limit]
