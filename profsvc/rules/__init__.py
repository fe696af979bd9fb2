"""Optimization hints from a declarative rule table (metrics/rules.toml) over a kernel's figures.

A pure layer: it reads a KernelResult and the catalog, runs no process and imports
nothing of the server, scheduler or worker.

    from profsvc.metrics.catalog import load_catalog
    from profsvc.rules import evaluate_rules, load_rules, rank_hints
    kernel.inconsistencies = check_figures(kernel, load_catalog())
    kernel.hints = evaluate_rules(kernel, load_catalog(), load_rules())
    top_five = rank_hints(kernel.hints, 5)
"""

from profsvc.rules.engine import check_figures, evaluate_rules, ncu_hints, rank_hints
from profsvc.rules.table import (
    Priority,
    PriorityThresholds,
    Rule,
    RuleTable,
    RuleTableError,
    UnknownFigureError,
    load_rules,
    parse_rules,
)

__all__ = [
    "Priority",
    "PriorityThresholds",
    "Rule",
    "RuleTable",
    "RuleTableError",
    "UnknownFigureError",
    "check_figures",
    "evaluate_rules",
    "load_rules",
    "ncu_hints",
    "parse_rules",
    "rank_hints",
]
