"""The consistency pass: figures of one kernel that contradict each other, before any hint is drawn.

Each check in metrics/checks.toml states something a kernel's figures must
satisfy (`holds`, in the expression language of profsvc.metrics.expr over the
same variables as the rules): counts against bytes, shares against their whole,
a roofline precision against its FLOPs. A check that evaluates to False is an
Inconsistency naming the figures involved, and no rule that reads one of them
is drawn: a hint whose evidence contradicts itself is worse than none. A check
whose figures are absent (None) is not decided and raises nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cached_property, lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from profsvc.metrics.catalog import Catalog, load_catalog
from profsvc.metrics.expr import Evaluator, Value, compile_expr, names_in
from profsvc.metrics.tables import NonBlank, SnakeCaseId, load_table
from profsvc.rules.table import template_fields
from profsvc.rules.variables import EXTRA_UNITS
from profsvc_contract.models import Inconsistency
from profsvc_contract.units import format_value


class CheckTableError(ValueError):
    """metrics/checks.toml is malformed; the message names the check."""


class Check(BaseModel):
    """One consistency check: an expression the figures must satisfy, and the figures it implicates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: SnakeCaseId
    holds: str
    message: NonBlank
    # Figures and variables no hint may read when the check fails; "name*" covers every name with that prefix.
    figures: tuple[str, ...] = Field(min_length=1)
    params: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _parses(self) -> Check:
        compile_expr(self.holds)
        template_fields(self.message)
        return self

    @cached_property
    def holds_fn(self) -> Evaluator:
        """The compiled expression; its params are read from the scope the check is evaluated in."""
        return compile_expr(self.holds)

    def variable_names(self) -> set[str]:
        """Every variable the check reads, its params excluded."""
        return (names_in(self.holds) | set(template_fields(self.message))) - set(self.params)


class CheckTable(BaseModel):
    """All checks, and the unit of every variable they may quote."""

    model_config = ConfigDict(frozen=True)

    checks: tuple[Check, ...]
    units: dict[str, str]


def parse_checks(data: dict[str, Any], catalog: Catalog) -> CheckTable:
    """Validate parsed TOML into a CheckTable; raise CheckTableError naming the bad check."""
    entries = data.get("check")
    if not isinstance(entries, list) or not entries:
        raise CheckTableError("the check table has no [[check]] entries")
    units = {name: entry.unit for name, entry in catalog.entries.items()} | EXTRA_UNITS
    checks: list[Check] = []
    for index, entry in enumerate(entries):
        label = entry.get("id", f"#{index + 1}") if isinstance(entry, dict) else f"#{index + 1}"
        try:
            check = Check.model_validate(entry)
        except (ValidationError, ValueError) as error:
            raise CheckTableError(f"check {label!r}: {error}") from None
        if any(c.id == check.id for c in checks):
            raise CheckTableError(f"check {check.id!r} is defined twice")
        if unknown := check.variable_names() - units.keys():
            raise CheckTableError(f"check {check.id!r}: unknown figure(s) {', '.join(sorted(unknown))}")
        if unmatched := [f for f in check.figures if not any(_covers(f, name) for name in units)]:
            raise CheckTableError(f"check {check.id!r}: figures {', '.join(unmatched)} name no figure or variable")
        checks.append(check)
    return CheckTable(checks=tuple(checks), units=units)


def _covers(pattern: str, name: str) -> bool:
    return name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern


@lru_cache(maxsize=1)
def load_checks() -> CheckTable:
    """The checks shipped with profsvc (metrics/checks.toml), validated once against the loaded catalog."""
    return parse_checks(load_table("checks.toml"), load_catalog())


def failed_checks(values: Mapping[str, Value], table: CheckTable) -> list[Inconsistency]:
    """Every check that the values contradict, with its message rendered in units."""
    failed = []
    for check in table.checks:
        scope = {**values, **check.params}
        if check.holds_fn(scope) is not False:
            continue
        rendered = {
            name: format_value(None if (v := scope.get(name)) is None else float(v), table.units.get(name, ""))
            for name in template_fields(check.message)
        }
        failed.append(
            Inconsistency(check=check.id, message=check.message.format(**rendered), figures=list(check.figures))
        )
    return failed


def untrusted(names: Iterable[str], inconsistencies: Iterable[Inconsistency]) -> set[str]:
    """The names among `names` that a failed check implicates."""
    patterns = [f for inconsistency in inconsistencies for f in inconsistency.figures]
    return {name for name in names if any(_covers(p, name) for p in patterns)}
