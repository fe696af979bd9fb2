"""The metric catalog: loaded from metrics/catalog.toml and validated at start.

Every figure profsvc reports is one entry: where its value comes from (ncu
metric names with fallbacks, or a formula over named inputs), its unit, which
direction is better, and what it means. The extractor, the text report and the
delta view all read this one table.

Three kinds of entry:
- `[[figure]]` (`Figure`): a scalar ncu metric, or a formula over scalar ones;
- `[[breakdown]]` (`Breakdown`): the sum of selected instances of an instanced
  metric, for quantities ncu stores only per instance (tensor instructions per
  SASS opcode);
- `[[sass_count]]` (`SassCount`): executions of the SASS instructions that match
  a pattern (opcode, and which source operands read the zero register), added up
  per PC from the source counters: what ncu's opcode counters cannot tell apart,
  such as a half-precision FMA that does math from one nvcc uses to move a constant.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from functools import cached_property, lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from profsvc.metrics.expr import Evaluator, ExpressionError, compile_expr
from profsvc.metrics.tables import load_table

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class Better(enum.StrEnum):
    """Which direction of change is an improvement."""

    HIGHER = "higher"
    LOWER = "lower"
    NONE = "none"


class CatalogError(ValueError):
    """The catalog file is malformed; the message names the entry."""


class _Entry(BaseModel):
    """What every catalog entry declares besides its source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    label: str
    unit: str
    better: Better
    group: str
    meaning: str
    docs: str = ""

    @field_validator("name")
    @classmethod
    def _snake_case(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"figure name {value!r} must be snake_case")
        return value


class Figure(_Entry):
    """One scalar catalog entry: an ncu metric, or a formula over ncu metrics."""

    metric: tuple[str, ...] = ()
    formula: str | None = None
    inputs: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    # A count rebuilt from a rate (rate x cycles): rounded, so that float error does not show in a count.
    whole: bool = False

    @model_validator(mode="after")
    def _one_source(self) -> Figure:
        if bool(self.metric) == bool(self.formula):
            raise ValueError("give exactly one of `metric` or `formula`")
        if self.whole and not self.formula:
            raise ValueError("`whole` rounds a formula's value: a direct metric is ncu's value, unchanged")
        if self.formula:
            if not self.inputs:
                raise ValueError("a formula needs `inputs`")
            compile_expr(self.formula, set(self.inputs))
        return self

    @cached_property
    def evaluator(self) -> Evaluator | None:
        """The compiled formula, None for a direct metric."""
        return compile_expr(self.formula, set(self.inputs)) if self.formula else None

    def metric_names(self) -> tuple[str, ...]:
        """Every ncu metric name this figure may read."""
        if self.metric:
            return self.metric
        return tuple(name for names in self.inputs.values() for name in names)


class Breakdown(_Entry):
    """One catalog entry summed from named instances of an instanced ncu metric.

    `metric` lists the instanced metric's names (first present wins);
    `instances` the correlation ids (e.g. SASS opcodes) whose values are added.
    An instance the metric lacks counts 0, since ncu lists only what occurred.
    """

    metric: tuple[str, ...] = Field(min_length=1)
    instances: frozenset[str] = Field(min_length=1)


class SassMatch(BaseModel):
    """Which SASS instructions a sass_count adds, and what each execution counts for.

    `opcode` is the base opcode ("HFMA2" matches HFMA2, HFMA2.MMA, HFMA2.BF16_V2, ...);
    `modifier`, when given, must be one of the instruction's modifiers. With
    `zero_sources` (1-based positions among the source operands, the destination
    excluded), `zero = "any"` matches when one of them is the zero register RZ
    (negated or not) and `zero = "none"` when none is.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    opcode: str = Field(pattern=r"^[A-Z][A-Z0-9_]*$")
    modifier: str = ""
    zero_sources: tuple[int, ...] = ()
    zero: Literal["any", "none"] = "any"
    weight: float = Field(default=1.0, gt=0)

    @field_validator("zero_sources")
    @classmethod
    def _positions(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(position < 1 for position in value):
            raise ValueError("zero_sources are 1-based source operand positions")
        return value

    def matches(self, opcode: str, modifiers: Sequence[str], sources: Sequence[str]) -> bool:
        """Whether one instruction (base opcode, its modifiers, its source operands) is counted."""
        if opcode != self.opcode or (self.modifier and self.modifier not in modifiers):
            return False
        if not self.zero_sources:
            return True
        zeros = [p <= len(sources) and is_zero_register(sources[p - 1]) for p in self.zero_sources]
        return any(zeros) if self.zero == "any" else not any(zeros)


def is_zero_register(operand: str) -> bool:
    """RZ as a SASS source operand, with or without negation, absolute value or a half selector (-RZ, RZ.H0_H0)."""
    return operand.strip().lstrip("-!|~").rstrip("|").split(".")[0] == "RZ"


class SassCount(_Entry):
    """One catalog entry counted over the kernel's SASS: sum of weight x executions of the matching instructions.

    `count` says which executions: "thread" (predicated-on thread instructions,
    ncu's per-PC `thread_inst_executed_true`) or "warp" (`inst_executed`).
    """

    count: Literal["thread", "warp"]
    match: tuple[SassMatch, ...] = Field(min_length=1)


class Catalog(BaseModel):
    """All entries, in the catalog file's order: scalar figures, then breakdowns, then SASS counts."""

    model_config = ConfigDict(frozen=True)

    figures: tuple[Figure, ...]
    breakdowns: tuple[Breakdown, ...] = ()
    sass_counts: tuple[SassCount, ...] = ()

    @cached_property
    def by_name(self) -> dict[str, Figure]:
        """Scalar figures keyed by name."""
        return {f.name: f for f in self.figures}

    @cached_property
    def entries(self) -> dict[str, Figure | Breakdown | SassCount]:
        """Every entry, scalar figures, breakdowns and SASS counts, keyed by name in catalog order."""
        return {**self.by_name, **{b.name: b for b in self.breakdowns}, **{c.name: c for c in self.sass_counts}}

    def __getitem__(self, name: str) -> Figure | Breakdown | SassCount:
        return self.entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def metric_names(self) -> list[str]:
        """Every ncu metric any entry may read, without duplicates, in catalog order.

        SASS counts read the per-PC source counters, which only ncu's SourceCounters section collects.
        """
        names = [n for f in self.figures for n in f.metric_names()]
        names.extend(n for b in self.breakdowns for n in b.metric)
        return list(dict.fromkeys(names))


def _entries(data: dict[str, Any], key: str, model: type[_Entry], seen: set[str]) -> list[Any]:
    entries = data.get(key, [])
    if not isinstance(entries, list):
        raise CatalogError(f"catalog [[{key}]] must be an array of tables")
    parsed: list[Any] = []
    for index, entry in enumerate(entries):
        label = entry.get("name", f"#{index + 1}") if isinstance(entry, dict) else f"#{index + 1}"
        try:
            item = model.model_validate(entry)
        except (ValueError, ExpressionError) as error:
            raise CatalogError(f"catalog {key} {label!r}: {error}") from None
        if item.name in seen:
            raise CatalogError(f"catalog {key} {item.name!r} is defined twice")
        seen.add(item.name)
        parsed.append(item)
    return parsed


def parse_catalog(data: dict[str, Any]) -> Catalog:
    """Validate parsed TOML into a Catalog; raise CatalogError naming the bad entry."""
    if not isinstance(data.get("figure"), list) or not data["figure"]:
        raise CatalogError("the catalog has no [[figure]] entries")
    seen: set[str] = set()
    figures = _entries(data, "figure", Figure, seen)
    breakdowns = _entries(data, "breakdown", Breakdown, seen)
    sass_counts = _entries(data, "sass_count", SassCount, seen)
    return Catalog(figures=tuple(figures), breakdowns=tuple(breakdowns), sass_counts=tuple(sass_counts))


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalog shipped with profsvc (metrics/catalog.toml), validated once."""
    return parse_catalog(load_table("catalog.toml"))
