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

from profsvc_client import errors
from profsvc_client.models import RuleSeverity, StaticCheckResult, StaticPolicy

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


def policy_label(policy: StaticPolicy) -> str:
    """How a result names its policy: `default`, or `strict (torch_fallback=error, cuda_vendor_library=off)`."""
    name = policy.name or "default"
    if not policy.overrides:
        return name
    return f"{name} ({', '.join(f'{o.rule_id}={o.severity}' for o in policy.overrides)})"


def is_default(policy: StaticPolicy) -> bool:
    """Whether a result's policy is the server's default, unchanged."""
    return policy.name in ("", "default") and not policy.overrides


def static_check_summary(result: StaticCheckResult) -> str:
    """`clean`, `2 warning(s)` or `1 error(s), 2 warning(s)`, and the policy when it is not the default."""
    counts = {level: sum(f.severity == level for f in result.findings) for level in ("error", "warning", "info")}
    summary = ", ".join(f"{n} {level}(s)" for level, n in counts.items() if n) or "clean"
    return summary if is_default(result.policy) else f"{summary} (policy {policy_label(result.policy)})"
