"""The static check in words: its findings, its summary line and the policy that applied."""

from __future__ import annotations

from profsvc_contract.models import StaticCheckResult


def static_check_summary(result: StaticCheckResult) -> str:
    """`clean`, `2 warning(s)` or `1 error(s), 2 warning(s)`, and the policy when it is not the default."""
    counts = {level: sum(f.severity == level for f in result.findings) for level in ("error", "warning", "info")}
    summary = ", ".join(f"{n} {level}(s)" for level, n in counts.items() if n) or "clean"
    return summary if result.policy.is_default else f"{summary} (policy {result.policy.label()})"


def render_static_check(result: StaticCheckResult, file_name: str) -> str:
    """The static check as the CLI and the agent tools show it: each finding located in the file, then the
    summary line."""
    lines = [f"{file_name}:{f.line}:{f.column}: {f.severity}: [{f.rule_id}] {f.message}" for f in result.findings]
    return "\n".join([*lines, f"static check: {static_check_summary(result)}"]) + "\n"
