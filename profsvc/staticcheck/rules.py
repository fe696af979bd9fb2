"""The static-check rule table: loaded from metrics/static_rules.toml and validated at start.

The analyzer decides *whether* a rule fires; the table says what the rule is
called, how severe it is and what to tell the author. The table must hold
exactly the ids in RuleId, so a rule can neither fire without metadata nor
sit in the table with no code behind it.
"""

from __future__ import annotations

import enum
import string
from functools import cached_property, lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from profsvc.metrics.tables import NonBlank, SnakeCaseId, TableError, load_table
from profsvc.staticcheck.findings import Finding, Hit, Severity


class RuleId(enum.StrEnum):
    """Every rule id the analyzer reports."""

    SYNTAX_ERROR = "syntax_error"
    MISSING_MODEL_NEW = "missing_model_new"
    NO_CUSTOM_KERNEL = "no_custom_kernel"
    REFERENCE_FALLBACK = "reference_fallback"
    TORCH_FALLBACK = "torch_fallback"
    TRY_EXCEPT_FALLBACK = "try_except_fallback"
    MONKEYPATCHING = "monkeypatching"
    SIDE_STREAM = "side_stream"
    THREAD_OR_PROCESS = "thread_or_process"
    RESULT_CACHING = "result_caching"
    INPUT_MUTATION = "input_mutation"
    HARNESS_INTROSPECTION = "harness_introspection"
    TENSOR_SUBCLASS = "tensor_subclass"
    PRECISION_DOWNCAST = "precision_downcast"
    WARMUP_DIVERGENCE = "warmup_divergence"
    PACKAGE_INSTALL = "package_install"
    DYNAMIC_CODE = "dynamic_code"
    CUDA_TORCH_FALLBACK = "cuda_torch_fallback"
    CUDA_VENDOR_LIBRARY = "cuda_vendor_library"


class RuleTableError(TableError):
    """The static-check rule table is malformed; the message names the rule."""


class Rule(BaseModel):
    """One entry of the rule table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: SnakeCaseId
    severity: Severity
    title: NonBlank
    reason: str
    advice: NonBlank

    @field_validator("reason")
    @classmethod
    def _one_line_with_detail(cls, value: str) -> str:
        # Findings are shown one per line to a model with a small budget: the reason must stay one line.
        if "\n" in value:
            raise ValueError("reason must be one line")
        fields = [name for _, name, _, _ in string.Formatter().parse(value) if name is not None]
        if fields != ["detail"]:
            raise ValueError(f"reason must use the placeholder {{detail}} exactly once and no other, found {fields}")
        return value

    def message(self, detail: str) -> str:
        """The one-line reason with the detail filled in."""
        return self.reason.format(detail=detail)


class RuleTable(BaseModel):
    """All rules, in the table's order."""

    model_config = ConfigDict(frozen=True)

    rules: tuple[Rule, ...]

    @cached_property
    def by_id(self) -> dict[str, Rule]:
        """Rules keyed by id."""
        return {rule.id: rule for rule in self.rules}

    def __getitem__(self, rule_id: str) -> Rule:
        return self.by_id[rule_id]

    def finding(self, hit: Hit) -> Finding:
        """The public finding for a detector's hit."""
        rule = self.by_id[hit.rule_id]
        return Finding(
            rule_id=rule.id, severity=rule.severity, line=hit.line, column=hit.column, message=rule.message(hit.detail)
        )


def parse_rules(data: dict[str, Any]) -> RuleTable:
    """Validate parsed TOML into a RuleTable; raise RuleTableError naming the bad rule."""
    entries = data.get("rule")
    if not isinstance(entries, list) or not entries:
        raise RuleTableError("the rule table has no [[rule]] entries")
    rules: list[Rule] = []
    for index, entry in enumerate(entries):
        label = entry.get("id", f"#{index + 1}") if isinstance(entry, dict) else f"#{index + 1}"
        try:
            rule = Rule.model_validate(entry)
        except ValidationError as error:
            raise RuleTableError(f"static rule {label!r}: {error}") from None
        if any(r.id == rule.id for r in rules):
            raise RuleTableError(f"static rule {rule.id!r} is defined twice")
        rules.append(rule)
    _check_matches_code({r.id for r in rules})
    return RuleTable(rules=tuple(rules))


def _check_matches_code(table_ids: set[str]) -> None:
    code_ids = {str(rule_id) for rule_id in RuleId}
    if missing := sorted(code_ids - table_ids):
        raise RuleTableError(
            f"static rule(s) {', '.join(map(repr, missing))} reported by the analyzer but not in the table"
        )
    if unknown := sorted(table_ids - code_ids):
        raise RuleTableError(
            f"static rule(s) {', '.join(map(repr, unknown))} in the table but reported by no analyzer code"
        )


@lru_cache(maxsize=1)
def load_rules() -> RuleTable:
    """The rule table shipped with profsvc (metrics/static_rules.toml), validated once."""
    return parse_rules(load_table("static_rules.toml"))
