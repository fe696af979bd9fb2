"""What a static check reports: a raw hit from a detector and the public Finding built from it."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from profsvc_contract.models import Severity


class Finding(BaseModel):
    """One rule that fired, where, and why (the message is one line)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule_id: str
    severity: Severity
    line: int = Field(ge=1, description="1-based line in the candidate source")
    column: int = Field(ge=1, description="1-based column in that line")
    message: str


@dataclass(frozen=True)
class Hit:
    """A detector's raw result: the rule, the place, and what was found there (the reason's {detail})."""

    rule_id: str
    line: int
    column: int
    detail: str


def hit_at(rule_id: str, node: ast.AST, detail: str) -> Hit:
    """A hit located at an AST node (ast columns are 0-based, findings 1-based)."""
    return Hit(rule_id, getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1, detail)
