"""A Markdown report of a profile, for pull requests (`--format md`)."""

from __future__ import annotations

from profsvc.report.text import requested_value
from profsvc_contract.models import EvaluateResult, KernelResult, ProfileResult
from profsvc_contract.units import format_value

# The figures of the headline table, in order: (catalog name, column title).
HEADLINE = (
    ("duration", "Duration"),
    ("sm_throughput_pct", "Compute SOL"),
    ("memory_throughput_pct", "Memory SOL"),
    ("dram_throughput_pct", "DRAM"),
    ("achieved_occupancy_pct", "Occupancy"),
    ("global_load_sectors_per_request", "Load sectors/req"),
)
TOP_HINTS = 5
TOP_STALLS = 5


def _cell(kernel: KernelResult, figure: str) -> str:
    found = kernel.figures.get(figure)
    return format_value(found.value, found.unit) if found else "n/a"


def _kernel_section(kernel: KernelResult) -> list[str]:
    lines = [f"### `{kernel.name}` (grid {kernel.grid.x}x{kernel.grid.y}x{kernel.grid.z}, block {kernel.block.x})", ""]
    if kernel.roofline.bound:
        roofline = kernel.roofline
        roof = f", {roofline.roof_pct:.1f} % of the DRAM roof" if roofline.roof_pct is not None else ""
        precision = f" ({roofline.precision})" if roofline.precision else ""
        lines += [f"Roofline: **{roofline.bound_label}**{roof}{precision}.", ""]
    if kernel.hints:
        lines.append("**Hints** (estimated runtime reduction):")
        lines.append("")
        for hint in kernel.hints[:TOP_HINTS]:
            origin = " *(Nsight Compute)*" if hint.origin == "ncu" else ""
            where = f" At {', '.join(f'`{s}`' for s in hint.source_lines[:3])}." if hint.source_lines else ""
            lines.append(f"- **{hint.title}** ({hint.estimated_speedup_pct:.0f} %){origin}: {hint.message}{where}")
        lines.append("")
    if kernel.stalls:
        lines += ["| stall reason | share of stalls | cycles per issue |", "| --- | ---: | ---: |"]
        lines += [
            f"| {s.reason} | {s.share_pct:.1f} % | {s.cycles_per_issue:.2f} |" for s in kernel.stalls[:TOP_STALLS]
        ]
        lines.append("")
    if kernel.metrics:
        lines += ["| ncu metric requested | value |", "| --- | ---: |"]
        lines += [f"| `{name}` | {requested_value(m)} |" for name, m in kernel.metrics.items()]
        lines.append("")
    if kernel.hotspots:
        hot = kernel.hotspots[0]
        lines += [
            f"Hottest line: `{hot.file}:{hot.line}` ({hot.sample_share_pct:.1f} % of samples, {hot.top_stall})",
            "",
        ]
        if hot.text:
            lines += ["```cuda", hot.text.strip(), "```", ""]
    return lines


def render_markdown(result: ProfileResult) -> str:
    """The profile as Markdown: headline table, then per kernel hints, stalls and hottest line."""
    lines = ["## profsvc profile", ""]
    if result.device.name:
        lines += [f"GPU: {result.device.name} (sm_{result.device.compute_capability.replace('.', '')})", ""]
    if not result.ok:
        return "\n".join([*lines, f"**Failed** ({result.error.kind}): {result.error.message}", ""])
    lines += ["| kernel | " + " | ".join(title for _, title in HEADLINE) + " |"]
    lines += ["| --- |" + " ---: |" * len(HEADLINE)]
    for kernel in result.kernels:
        lines.append(f"| `{kernel.name}` | " + " | ".join(_cell(kernel, name) for name, _ in HEADLINE) + " |")
    lines.append("")
    for kernel in result.kernels:
        lines += _kernel_section(kernel)
    changed = [row for row in result.delta if row.verdict in ("improved", "regressed")]
    if changed:
        lines += [
            "### Delta vs previous iteration",
            "",
            "| figure | before | after | verdict |",
            "| --- | ---: | ---: | --- |",
        ]
        lines += [
            f"| {row.kernel + ': ' if row.kernel else ''}{row.figure} | {format_value(row.before, row.unit)} | "
            f"{format_value(row.after, row.unit)} | {row.verdict} |"
            for row in changed
        ]
        lines.append("")
    return "\n".join(lines)


def render_evaluation_markdown(result: EvaluateResult) -> str:
    """An evaluation as Markdown: the verdict, the plain report, and the profile's tables."""
    verdict = "PASSED" if result.ok else "FAILED"
    parts = [f"## profsvc evaluate: {verdict}", "", "```text", result.report_text.strip(), "```", ""]
    if result.profile.ok:
        parts.append(render_markdown(result.profile))
    return "\n".join(parts)
