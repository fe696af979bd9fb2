"""A static-check policy from a TOML file and command-line overrides, as a request carries it.

    # strict.toml: PyTorch operations next to the candidate's own kernels fail the check
    name = "strict"                 # optional; default: the file's name without .toml
    [rules]
    torch_fallback = "error"
    cuda_torch_fallback = "error"
    cuda_vendor_library = "off"

The server holds the rule table and validates rule names and severities (an unknown
one is INVALID_ARGUMENT naming it); this module reads only the file's shape.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path

from profsvc_contract import errors
from profsvc_contract.models import RuleSeverity, StaticPolicy

SEVERITIES = ("error", "warning", "info", "off")


def _bad(path: Path, what: str) -> errors.InvalidRequest:
    return errors.InvalidRequest(f"policy file {path}: {what}", errors.Reason.BAD_POLICY)


def read_policy_file(path: Path) -> StaticPolicy:
    """The policy a TOML file describes; a file that is not TOML or not shaped as above is a one-line error."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise _bad(path, f"not valid TOML ({error})") from None
    except UnicodeDecodeError:
        raise _bad(path, "not UTF-8 text") from None
    unknown = sorted(set(data) - {"name", "rules"})
    if unknown:
        raise _bad(path, f"unknown key {unknown[0]!r} (name, [rules])")
    name = data.get("name", path.stem)
    rules = data.get("rules", {})
    if not isinstance(name, str):
        raise _bad(path, "name must be a string")
    if not isinstance(rules, dict):
        raise _bad(path, "[rules] must be a table of rule = severity")
    for rule_id, severity in rules.items():
        if not isinstance(severity, str):
            raise _bad(path, f"rule {rule_id!r} needs a severity string ({', '.join(SEVERITIES)})")
    return StaticPolicy(name=name, overrides=[RuleSeverity(rule_id=k, severity=v) for k, v in rules.items()])


def build_policy(path: Path | None, overrides: Iterable[tuple[str, str]] = ()) -> StaticPolicy | None:
    """The file's policy (if any) with per-rule overrides applied on top, later ones winning; None for neither."""
    return with_overrides(read_policy_file(path) if path is not None else None, overrides)


def with_overrides(base: StaticPolicy | None, overrides: Iterable[tuple[str, str]]) -> StaticPolicy | None:
    """`base` with (rule, severity) pairs applied on top, later ones winning; None when there is neither."""
    overrides = list(overrides)
    if base is None and not overrides:
        return None
    base = base or StaticPolicy()
    merged = {o.rule_id: o.severity for o in base.overrides}
    for rule_id, severity in overrides:
        merged.pop(rule_id, None)  # the override's position decides the order shown
        merged[rule_id] = severity
    return StaticPolicy(name=base.name, overrides=[RuleSeverity(rule_id=k, severity=v) for k, v in merged.items()])
