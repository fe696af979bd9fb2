"""Derived metrics a request defines: `NAME=FORMULA` over ncu metrics, in the catalog's expression language.

A formula names ncu metrics as ncu spells them (`dram__bytes_read.sum / gpu__time_duration.sum`); the dots
would read as attribute access in the expression language, so each metric name stands for a variable of its
own while the formula is compiled. The value is in whatever unit the formula makes of the metrics' base
units; none is claimed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from profsvc.metrics.expr import Evaluator, ExpressionError, compile_expr

# An ncu metric name: lower-case words joined by "__", then "." suffixes (dram__bytes_read.sum.per_second).
METRIC_NAME = re.compile(r"[a-z0-9_]+__[a-z0-9_]+(?:\.[a-z0-9_]+)*")
_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Derived:
    """One derived metric: its name, its formula, the ncu metrics it reads."""

    name: str
    formula: str
    metrics: tuple[str, ...]
    evaluator: Evaluator

    def value(self, values: dict[str, float | None]) -> float | None:
        """Its value from the metrics' values (None where one is missing, or on a division by zero)."""
        result = self.evaluator({f"m{i}": values.get(name) for i, name in enumerate(self.metrics)})
        return None if result is None or isinstance(result, bool) else float(result)


def parse_derived(text: str) -> Derived:
    """`NAME=FORMULA` as a Derived; ValueError naming what is wrong."""
    name, equals, formula = text.partition("=")
    name, formula = name.strip(), formula.strip()
    if not equals or not _NAME.fullmatch(name) or "__" in name:
        raise ValueError(f"{text!r}: a derived metric is NAME=FORMULA, NAME in snake_case without '__'")
    metrics = tuple(dict.fromkeys(m.group(0) for m in METRIC_NAME.finditer(formula)))
    if not metrics:
        raise ValueError(f"{text!r}: the formula names no ncu metric (like dram__bytes_read.sum)")
    variables = {name: f"m{i}" for i, name in enumerate(metrics)}
    rewritten = METRIC_NAME.sub(lambda m: variables[m.group(0)], formula)
    try:
        evaluator = compile_expr(rewritten, set(variables.values()))
    except ExpressionError as error:
        raise ValueError(f"{text!r}: {error}") from None
    return Derived(name, formula, metrics, evaluator)


def derived_values(definitions: list[Derived], read: Any) -> dict[str, float | None]:
    """Each definition's value; `read(name)` gives an ncu metric's value (None when absent)."""
    needed = {m for d in definitions for m in d.metrics}
    values = {name: read(name) for name in needed}
    return {d.name: d.value(values) for d in definitions}
