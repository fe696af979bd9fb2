"""The metric catalog: loaded from metrics/catalog.toml and validated at start.

Every figure profsvc reports is one entry: where its value comes from (ncu
metric names with fallbacks, or a formula over named inputs), its unit, which
direction is better, and what it means. The extractor, the text report and the
delta view all read this one table.

Two kinds of entry:
- `[[figure]]` (`Figure`): a scalar ncu metric, or a formula over scalar ones;
- `[[breakdown]]` (`Breakdown`): the sum of selected instances of an instanced
  metric, for quantities ncu stores only per instance (tensor instructions per
  SASS opcode).
"""

from __future__ import annotations

import enum
import re
from functools import cached_property, lru_cache
from typing import Any

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


class Catalog(BaseModel):
    """All entries, in the catalog file's order: scalar figures, then breakdowns."""

    model_config = ConfigDict(frozen=True)

    figures: tuple[Figure, ...]
    breakdowns: tuple[Breakdown, ...] = ()

    @cached_property
    def by_name(self) -> dict[str, Figure]:
        """Scalar figures keyed by name."""
        return {f.name: f for f in self.figures}

    @cached_property
    def entries(self) -> dict[str, Figure | Breakdown]:
        """Every entry, scalar figures and breakdowns, keyed by name in catalog order."""
        return {**self.by_name, **{b.name: b for b in self.breakdowns}}

    def __getitem__(self, name: str) -> Figure | Breakdown:
        return self.entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def metric_names(self) -> list[str]:
        """Every ncu metric any entry may read, without duplicates, in catalog order."""
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
    return Catalog(figures=tuple(figures), breakdowns=tuple(breakdowns))


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalog shipped with profsvc (metrics/catalog.toml), validated once."""
    return parse_catalog(load_table("catalog.toml"))
