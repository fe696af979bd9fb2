"""The rule table: loaded from metrics/rules.toml and validated at start.

Each rule is data: a condition and a speedup estimate written in the expression
language of profsvc.metrics.expr over catalog figures and the extra variables of
profsvc.rules.variables, a message template, advice, a docs link, the figures it
quotes as evidence, and named threshold parameters. A malformed rule (missing
field, bad expression, unknown figure, unknown parent, duplicate id) is rejected
here with a message that names it, never later while a kernel is evaluated.
"""

from __future__ import annotations

import ast
import enum
import re
import string
from collections.abc import Mapping
from functools import cached_property, lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from profsvc.metrics.catalog import Catalog, load_catalog
from profsvc.metrics.expr import Evaluator, Value, compile_expr, names_in
from profsvc.metrics.tables import NonBlank, SnakeCaseId, TableError, load_table
from profsvc.rules.variables import EXTRA_UNITS, STALL_REASONS

# "RuleId" covers every message of that ncu rule, "RuleId:Title" only the message with that title.
_NCU_REF = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(:.+)?$")
_DOCS = "https://docs.nvidia.com/"


class Priority(enum.StrEnum):
    """A hint's label, read off its estimated speedup (PriorityThresholds): the label and the estimate agree."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class PriorityThresholds(BaseModel):
    """Estimated runtime reduction (%) from which a hint is labelled high, and medium; below: low."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    high_pct: float = Field(gt=0, le=100)
    medium_pct: float = Field(gt=0, le=100)

    @model_validator(mode="after")
    def _ordered(self) -> PriorityThresholds:
        if self.medium_pct > self.high_pct:
            raise ValueError("medium_pct must not exceed high_pct")
        return self

    def label(self, speedup_pct: float) -> Priority:
        """The label of a hint that estimates `speedup_pct` % less runtime."""
        if speedup_pct >= self.high_pct:
            return Priority.HIGH
        return Priority.MEDIUM if speedup_pct >= self.medium_pct else Priority.LOW


class RuleTableError(TableError):
    """The rule table is malformed; the message names the rule."""


class UnknownFigureError(RuleTableError):
    """Rules read names that are neither catalog figures, extra variables nor their own params."""

    def __init__(self, unknown: dict[str, set[str]]) -> None:
        self.unknown_by_rule = {rule: frozenset(names) for rule, names in unknown.items()}
        self.unknown_names = frozenset(name for names in unknown.values() for name in names)
        super().__init__(
            "; ".join(f"rule {rule!r}: unknown figure(s) {', '.join(sorted(names))}" for rule, names in unknown.items())
        )


def template_fields(template: str) -> tuple[str, ...]:
    """The placeholder names of a message template; only plain `{name}` placeholders are allowed."""
    fields: list[str] = []
    for _, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise ValueError(f"placeholder {{{name}}} must be a plain {{name}} (values are formatted with their unit)")
        fields.append(name)
    return tuple(dict.fromkeys(fields))


class Rule(BaseModel):
    """One entry of the rule table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: SnakeCaseId
    title: NonBlank
    condition: str
    speedup: str
    message: NonBlank
    advice: NonBlank
    docs: str
    evidence: tuple[str, ...] = Field(min_length=1)
    parent: str | None = None
    source_stall: str | None = None
    covers_ncu: tuple[str, ...] = ()
    params: dict[SnakeCaseId, float] = Field(default_factory=dict)

    @field_validator("docs")
    @classmethod
    def _nvidia_docs(cls, value: str) -> str:
        if not value.startswith(_DOCS):
            raise ValueError(f"docs must link NVIDIA documentation ({_DOCS}...), not {value!r}")
        return value

    @field_validator("source_stall")
    @classmethod
    def _known_stall(cls, value: str | None) -> str | None:
        if value is not None and value not in STALL_REASONS:
            raise ValueError(f"source_stall {value!r} is not a stall reason ({', '.join(STALL_REASONS)})")
        return value

    @field_validator("covers_ncu")
    @classmethod
    def _ncu_refs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for ref in value:
            if not _NCU_REF.match(ref):
                raise ValueError(f"covers_ncu entry {ref!r} must be 'RuleId' or 'RuleId:Title'")
        return value

    @model_validator(mode="after")
    def _expressions_parse(self) -> Rule:
        for field, source in (("condition", self.condition), ("speedup", self.speedup)):
            try:
                compile_expr(source)
            except ValueError as error:
                raise ValueError(f"{field}: {error}") from None
        template_fields(self.message)
        return self

    def variable_names(self) -> set[str]:
        """Every variable the rule reads (condition, speedup, message, evidence), its params excluded."""
        names = names_in(self.condition) | names_in(self.speedup) | set(self.message_fields) | set(self.evidence)
        return names - set(self.params)

    @cached_property
    def condition_fn(self) -> Evaluator:
        """The compiled condition, params bound: True fires the rule, False or None (a missing figure) does not."""
        tree = self._bound(self.condition)
        if not (isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And)):
            return compile_expr(ast.unparse(tree))
        return _all_of([compile_expr(ast.unparse(part)) for part in tree.values])

    @cached_property
    def speedup_fn(self) -> Evaluator:
        """The compiled speedup estimate in % of the kernel's runtime, params bound."""
        return compile_expr(ast.unparse(self._bound(self.speedup)))

    def _bound(self, source: str) -> ast.expr:
        # Params become constants once here, so evaluating a rule reads only the kernel's variables.
        return _BindParams(self.params).visit(ast.parse(source, mode="eval").body)

    @cached_property
    def message_fields(self) -> tuple[str, ...]:
        """The placeholders of the message template."""
        return template_fields(self.message)


class _BindParams(ast.NodeTransformer):
    """Replaces the names of params by their values."""

    def __init__(self, params: Mapping[str, float]) -> None:
        self.params = params

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return ast.Constant(self.params[node.id]) if node.id in self.params else node


def _all_of(parts: list[Evaluator]) -> Evaluator:
    """`a and b and ...` with the expression language's three-valued logic, stopping at the first False.

    Most conditions fail on their first clause, so skipping the rest keeps evaluation cheap.
    """

    def evaluate(values: Mapping[str, Value]) -> Value:
        result: Value = True
        for part in parts:
            value = part(values)
            if value is False:
                return False
            if value is None:
                result = None
        return result

    return evaluate


class RuleTable(BaseModel):
    """All rules, parents before their children, and the unit of every variable they may read."""

    model_config = ConfigDict(frozen=True)

    rules: tuple[Rule, ...]
    units: dict[str, str]
    priority: PriorityThresholds
    ncu_informational: frozenset[str] = frozenset()

    @cached_property
    def by_id(self) -> dict[str, Rule]:
        """Rules keyed by id."""
        return {rule.id: rule for rule in self.rules}

    def __getitem__(self, rule_id: str) -> Rule:
        return self.by_id[rule_id]

    @cached_property
    def parents(self) -> frozenset[str]:
        """The ids of rules that are some rule's parent."""
        return frozenset(rule.parent for rule in self.rules if rule.parent)

    @cached_property
    def ancestors(self) -> dict[str, tuple[str, ...]]:
        """For each rule id: its parent, its parent's parent, and so on."""
        return {rule.id: tuple(_chain(rule, self.by_id)) for rule in self.rules}


def _chain(rule: Rule, by_id: dict[str, Rule]) -> list[str]:
    """The ids above a rule, nearest first; a missing parent or a loop is a table error."""
    chain: list[str] = []
    parent = rule.parent
    while parent is not None:
        if parent not in by_id:
            raise RuleTableError(f"rule {rule.id!r}: parent {parent!r} is not in the table")
        if parent == rule.id or parent in chain:
            raise RuleTableError(f"rule {rule.id!r}: its parent chain loops back to {parent!r}")
        chain.append(parent)
        parent = by_id[parent].parent
    return chain


def _parents_first(rules: list[Rule]) -> list[Rule]:
    by_id = {rule.id: rule for rule in rules}
    depth = {rule.id: len(_chain(rule, by_id)) for rule in rules}
    # A stable sort keeps the table's order among rules of the same depth.
    return sorted(rules, key=lambda rule: depth[rule.id])


def _problems(error: ValidationError) -> str:
    """pydantic's errors as one line: 'field: problem; field: problem'."""
    problems = []
    for problem in error.errors():
        where = ".".join(map(str, problem["loc"])) or "rule"
        cause = problem.get("ctx", {}).get("error")
        problems.append(f"{where}: {cause if cause is not None else problem['msg']}")
    return "; ".join(problems)


def parse_rules(data: dict[str, Any], catalog: Catalog) -> RuleTable:
    """Validate parsed TOML into a RuleTable against `catalog`; raise RuleTableError naming the bad rule."""
    entries = data.get("rule")
    if not isinstance(entries, list) or not entries:
        raise RuleTableError("the rule table has no [[rule]] entries")
    units = {name: entry.unit for name, entry in catalog.entries.items()} | EXTRA_UNITS
    rules: list[Rule] = []
    unknown: dict[str, set[str]] = {}
    for index, entry in enumerate(entries):
        label = entry.get("id", f"#{index + 1}") if isinstance(entry, dict) else f"#{index + 1}"
        try:
            rule = Rule.model_validate(entry)
        except ValidationError as error:
            raise RuleTableError(f"rule {label!r}: {_problems(error)}") from None
        if any(r.id == rule.id for r in rules):
            raise RuleTableError(f"rule {rule.id!r} is defined twice")
        if shadowed := sorted(set(rule.params) & units.keys()):
            raise RuleTableError(f"rule {rule.id!r}: param(s) {', '.join(shadowed)} shadow a figure or variable")
        if missing := rule.variable_names() - units.keys():
            unknown[rule.id] = missing
        rules.append(rule)
    ordered = _parents_first(rules)
    if unknown:
        raise UnknownFigureError(unknown)
    informational = data.get("ncu_informational", [])
    if not isinstance(informational, list) or not all(isinstance(i, str) and i for i in informational):
        raise RuleTableError("ncu_informational must be a list of ncu rule ids")
    try:
        priority = PriorityThresholds.model_validate(data.get("priority", {}))
    except ValidationError as error:
        raise RuleTableError(f"[priority]: {_problems(error)}") from None
    return RuleTable(rules=tuple(ordered), units=units, priority=priority, ncu_informational=frozenset(informational))


@lru_cache(maxsize=1)
def load_rules() -> RuleTable:
    """The rule table shipped with profsvc (metrics/rules.toml), validated once against the loaded catalog."""
    return parse_rules(load_table("rules.toml"), load_catalog())
