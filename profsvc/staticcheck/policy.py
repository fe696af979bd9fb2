"""Static-check policies: the severity each rule has for one request.

The default policy is the rule table's own severities (metrics/static_rules.toml):
a candidate whose forward path runs no kernel of its own fails (no_custom_kernel),
one that runs its own kernels and leaves operations to PyTorch gets torch_fallback
warnings. A request may name its policy and set any rule to "error", "warning",
"info" or "off" (its findings dropped); an unknown rule or severity is rejected
with a one-line error naming it.

    policy = make_policy("strict", {"torch_fallback": "error"})
    findings = policy.apply(check_source(text))
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict

from profsvc.staticcheck.findings import Finding, Severity
from profsvc.staticcheck.rules import RuleTable, load_rules

DEFAULT_NAME = "default"
_NAME = re.compile(r"^[\w.+-]{1,64}$")


class Level(enum.StrEnum):
    """What a policy may make of a rule: one of the finding severities, or off."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    OFF = "off"


class PolicyError(ValueError):
    """A policy names a rule or severity that does not exist; the message is one line naming it."""


class Policy(BaseModel):
    """A validated policy: its name and the rules whose severity differs from the table's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = DEFAULT_NAME
    # rule id -> level, in the order the request gave them
    overrides: dict[str, Level] = {}

    def level(self, rule_id: str, table: RuleTable) -> Level:
        """The level a rule has under this policy."""
        return self.overrides.get(rule_id, Level(table[rule_id].severity.value))

    def apply(self, findings: Iterable[Finding], table: RuleTable | None = None) -> list[Finding]:
        """The findings with this policy's severities; those of rules set to off are dropped."""
        rules = table or load_rules()
        applied: list[Finding] = []
        for finding in findings:
            level = self.level(finding.rule_id, rules)
            if level is Level.OFF:
                continue
            severity = Severity(level.value)
            applied.append(
                finding if severity is finding.severity else finding.model_copy(update={"severity": severity})
            )
        return applied


def make_policy(name: str = "", overrides: Mapping[str, str] | None = None, table: RuleTable | None = None) -> Policy:
    """A policy from a request's name and per-rule severities, validated against the rule table.

    An empty name is "default". Raises PolicyError for an unknown rule or severity, or a malformed name.
    """
    rules = table or load_rules()
    name = name.strip() or DEFAULT_NAME
    if not _NAME.match(name):
        raise PolicyError(f"policy name {name!r} is not allowed (1 to 64 letters, digits, _ . + -)")
    levels: dict[str, Level] = {}
    for rule_id, severity in (overrides or {}).items():
        if rule_id not in rules.by_id:
            raise PolicyError(f"unknown static rule {rule_id!r} in the policy; rules: {', '.join(rules.by_id)}")
        try:
            levels[rule_id] = Level(str(severity).strip().lower())
        except ValueError:
            choices = ", ".join(level.value for level in Level)
            raise PolicyError(f"static rule {rule_id!r}: unknown severity {severity!r} (one of {choices})") from None
    return Policy(name=name, overrides=levels)
