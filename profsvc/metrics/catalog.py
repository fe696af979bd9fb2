"""The metric catalog: loaded from metrics/catalog.toml and validated at start.

Every figure profsvc reports is one entry: where its value comes from (ncu
metric names with fallbacks, or a formula over named inputs), its unit, which
direction is better, and what it means. The extractor, the text report and the
delta view all read this one table.
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


class Figure(BaseModel):
    """One catalog entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    label: str
    unit: str
    better: Better
    group: str
    meaning: str
    metric: tuple[str, ...] = ()
    formula: str | None = None
    inputs: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    docs: str = ""

    @field_validator("name")
    @classmethod
    def _snake_case(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"figure name {value!r} must be snake_case")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> Figure:
        if bool(self.metric) == bool(self.formula):
            raise ValueError("give exactly one of `metric` or `formula`")
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


class Catalog(BaseModel):
    """All figures, in the catalog file's order."""

    model_config = ConfigDict(frozen=True)

    figures: tuple[Figure, ...]

    @cached_property
    def by_name(self) -> dict[str, Figure]:
        """Figures keyed by name."""
        return {f.name: f for f in self.figures}

    def __getitem__(self, name: str) -> Figure:
        return self.by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self.by_name

    def metric_names(self) -> list[str]:
        """Every ncu metric any figure may read, without duplicates, in catalog order."""
        return list(dict.fromkeys(n for f in self.figures for n in f.metric_names()))


def parse_catalog(data: dict[str, Any]) -> Catalog:
    """Validate parsed TOML into a Catalog; raise CatalogError naming the bad entry."""
    entries = data.get("figure")
    if not isinstance(entries, list) or not entries:
        raise CatalogError("the catalog has no [[figure]] entries")
    figures: list[Figure] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        label = entry.get("name", f"#{index + 1}") if isinstance(entry, dict) else f"#{index + 1}"
        try:
            figure = Figure.model_validate(entry)
        except (ValueError, ExpressionError) as error:
            raise CatalogError(f"catalog figure {label!r}: {error}") from None
        if figure.name in seen:
            raise CatalogError(f"catalog figure {figure.name!r} is defined twice")
        seen.add(figure.name)
        figures.append(figure)
    return Catalog(figures=tuple(figures))


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalog shipped with profsvc (metrics/catalog.toml), validated once."""
    return parse_catalog(load_table("catalog.toml"))
