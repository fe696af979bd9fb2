"""The static check in words: its summary line and the policy that applied."""

from __future__ import annotations

from profsvc_contract.models import StaticCheckResult, StaticPolicy


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


def render_static_check(result: StaticCheckResult, file_name: str) -> str:
    """The static check as the CLI and the agent tools show it: each finding located in the file, then the
    summary line."""
    lines = [f"{file_name}:{f.line}:{f.column}: {f.severity}: [{f.rule_id}] {f.message}" for f in result.findings]
    return "\n".join([*lines, f"static check: {static_check_summary(result)}"]) + "\n"
