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
- Before any rule, the consistency checks (metrics/checks.toml) run over the same variables:
  a rule that reads a figure a failed check implicates neither fires nor caps a child.
- Every hint's priority label (its `severity` field) is read off its estimate (the table's [priority] thresholds),
  so a [high] hint never ranks below a [medium] one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from profsvc.metrics.catalog import Catalog
from profsvc.metrics.expr import Value
from profsvc.rules.checks import CheckTable, failed_checks, load_checks, untrusted
from profsvc.rules.table import PriorityThresholds, Rule, RuleTable
from profsvc.rules.variables import kernel_variables
from profsvc_contract.models import Evidence, Hint, Inconsistency, KernelResult, NcuRuleResult
from profsvc_contract.units import format_value

ORIGIN_PROFSVC = "profsvc"
ORIGIN_NCU = "ncu"
# Hotspot lines a hint cites at most: the top few are where to look, the rest is noise in a short report.
MAX_SOURCE_LINES = 5
# ncu message types that become hints (WRN is mostly about the measurement itself).
NCU_TYPES = frozenset({"OPT", "WRN"})
NCU_DOCS = "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html#sections-and-rules"
NO_ESTIMATE = " (No runtime estimate: a figure the estimate needs was not collected.)"
_ORIGIN_RANK = {ORIGIN_PROFSVC: 0, ORIGIN_NCU: 1}
_URL = re.compile(r"https://[^\s)]+")


def _percent(value: Value) -> float | None:
    """A speedup as a number in 0..100; None when it cannot be computed."""
    if value is None or (number := float(value)) != number:  # NaN compares unequal to itself
        return None
    return min(100.0, max(0.0, number))


def check_figures(kernel: KernelResult, catalog: Catalog, checks: CheckTable | None = None) -> list[Inconsistency]:
    """The consistency checks the kernel's figures fail (store them on the kernel: the report shows them)."""
    return failed_checks(kernel_variables(kernel, catalog), checks or load_checks())


def evaluate_rules(
    kernel: KernelResult, catalog: Catalog, rules: RuleTable, checks: CheckTable | None = None
) -> list[Hint]:
    """All hints for one kernel, profsvc's and ncu's uncovered ones, ranked (see rank_hints)."""
    values = kernel_variables(kernel, catalog)
    inconsistencies = failed_checks(values, checks or load_checks())
    speedups: dict[str, float | None] = {}
    fired: list[Rule] = []
    for rule in rules.rules:  # parents come before their children
        if untrusted(rule.variable_names(), inconsistencies):
            speedups[rule.id] = None  # its evidence contradicts itself: no hint, and no cap on a child
            continue
        if rule.condition_fn(values) is True:
            fired.append(rule)
        elif rule.id not in rules.parents:
            continue  # nobody reads the speedup of a rule that neither fires nor caps a child
        speedup = _percent(rule.speedup_fn(values))
        cap = speedups.get(rule.parent) if rule.parent else None
        speedups[rule.id] = min(speedup, cap) if speedup is not None and cap is not None else speedup
    explained = {ancestor for rule in fired for ancestor in rules.ancestors[rule.id]}
    hints = [
        _hint(rule, values, speedups[rule.id], rules.units, kernel, rules.priority)
        for rule in fired
        if rule.id not in explained
    ]
    return rank_hints(hints + ncu_hints(kernel, fired, rules.priority, rules.ncu_informational))


def _hint(
    rule: Rule,
    values: Mapping[str, Value],
    speedup: float | None,
    units: Mapping[str, str],
    kernel: KernelResult,
    priority: PriorityThresholds,
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
        severity=priority.label(speedup or 0.0).value,
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
    kernel: KernelResult,
    covering: Iterable[Rule],
    priority: PriorityThresholds,
    informational: frozenset[str] = frozenset(),
) -> list[Hint]:
    """Nsight Compute's OPT and WRN results as hints, without those a fired profsvc rule covers.

    Results of `informational` rules are kept but ranked as 0 %: their lever is not in the kernel's code.
    """
    covered = {ref for rule in covering for ref in rule.covers_ncu}
    return [
        _ncu_hint(result, result.rule_id in informational, priority)
        for result in kernel.ncu_rules
        if result.type in NCU_TYPES
        and result.rule_id not in covered
        and f"{result.rule_id}:{result.title}" not in covered
    ]


def _ncu_hint(result: NcuRuleResult, informational: bool, priority: PriorityThresholds) -> Hint:
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
        severity=priority.label(speedup).value,
        title=result.title or result.rule_id,
        message=message,
        estimated_speedup_pct=speedup,
        docs=url.group(0) if url else NCU_DOCS,
    )


def rank_hints(hints: Iterable[Hint], limit: int | None = None) -> list[Hint]:
    """Hints by estimated speedup, largest first; ties profsvc before ncu, then input order.

    Priority labels follow the estimate, so this order never puts a higher label below a lower one.
    The text report shows `rank_hints(kernel.hints, 5)`, JSON all of them.
    """
    ranked = sorted(hints, key=lambda h: (-h.estimated_speedup_pct, _ORIGIN_RANK.get(h.origin, 2)))
    return ranked if limit is None else ranked[:limit]
