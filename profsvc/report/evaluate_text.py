"""The short text report of Evaluate (the agent's submit_kernel answer)."""

from __future__ import annotations

from profsvc.report.static_text import static_check_summary
from profsvc.report.tool_text import render_benchmark_lines, render_correctness_lines
from profsvc_contract.models import EvaluateResult


def render_evaluation(result: EvaluateResult) -> str:
    """The whole Evaluate report."""
    lines = [f"=== profsvc evaluate: {'PASSED' if result.ok else 'FAILED'} ==="]
    lines.append(f"static check: {static_check_summary(result.static_check)}")
    lines.extend(f"  line {f.line}: [{f.rule_id}] {f.message}" for f in result.static_check.findings[:10])
    lines.extend(render_correctness_lines(result.correctness))
    lines.extend(render_benchmark_lines(result.benchmark))
    if result.sol_pct is not None:
        lines.append(f"SOL: {result.sol_pct:.1f} % of the roofline bound ({result.sol_definition})")
    if result.profile.ok:
        lines.append("")
        lines.append(result.profile.report_text.strip())
    return "\n".join(lines) + "\n"
