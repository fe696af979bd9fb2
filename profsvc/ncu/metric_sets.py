"""The metric sets of metrics/metric_sets.toml, loaded and validated once."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from profsvc.metrics.catalog import load_catalog
from profsvc.metrics.tables import load_table


class MetricSetSpec(BaseModel):
    """One named collection: the ncu arguments that collect it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    ncu_args: tuple[str, ...]
    catalog_metrics: bool = False
    default: bool = False

    def collection_args(self, extra: Sequence[str] = ()) -> tuple[str, ...]:
        """The arguments given to ncu: `ncu_args`, then one `--metrics` with every catalog metric when asked and
        the `extra` metrics a request names."""
        names = [*(load_catalog().metric_names() if self.catalog_metrics else ()), *extra]
        if not names:
            return self.ncu_args
        return (*self.ncu_args, "--metrics", ",".join(dict.fromkeys(names)))


@lru_cache(maxsize=1)
def metric_sets() -> dict[str, MetricSetSpec]:
    """All metric sets by name; the table must name exactly one default."""
    sets = [MetricSetSpec.model_validate(s) for s in load_table("metric_sets.toml")["set"]]
    defaults = [s.name for s in sets if s.default]
    if len(defaults) != 1:
        raise ValueError(f"metric_sets.toml must mark exactly one default set, found {defaults}")
    return {s.name: s for s in sets}


def default_set() -> MetricSetSpec:
    """The set a request that names none gets."""
    return next(s for s in metric_sets().values() if s.default)


def resolve(name: str) -> MetricSetSpec | None:
    """The set a request names ('' means the default), None when unknown."""
    return metric_sets().get(name) if name else default_set()
