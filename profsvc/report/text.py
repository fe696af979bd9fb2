"""The short plain-text report: what a kernel engineer (or an agent) reads first."""

from __future__ import annotations

from profsvc.metrics.catalog import Catalog, load_catalog
from profsvc.report.units import format_value
from profsvc_client.models import KernelResult, ProfileResult

# Report sections: (title, catalog group).
SECTIONS = (
    ("Timing", "timing"),
    ("Speed of light", "speed_of_light"),
    ("Memory", "memory"),
    ("Occupancy and scheduling", "occupancy"),
    ("Launch", "launch"),
)
TOP_STALLS = 5
TOP_NCU_RULES = 5
BAR_WIDTH = 20


def _dims(d: object) -> str:
    return f"({d.x}, {d.y}, {d.z})"  # type: ignore[attr-defined]


def render_kernel(kernel: KernelResult, catalog: Catalog) -> list[str]:
    """The lines of one kernel's section."""
    duration = kernel.figures.get("duration")
    lines = [
        f"#{kernel.launch_index + 1} {kernel.name}  grid {_dims(kernel.grid)}  block {_dims(kernel.block)}"
        + (f"  {format_value(duration.value, duration.unit)}" if duration else "")
    ]
    for title, group in SECTIONS:
        figures = [f for f in catalog.figures if f.group == group and f.name in kernel.figures]
        shown = [f for f in figures if kernel.figures[f.name].value is not None]
        if not shown:
            continue
        lines.append(f"--- {title} ---")
        for figure in shown:
            value = kernel.figures[figure.name]
            lines.append(f"{figure.label}: {format_value(value.value, value.unit)}")
    if kernel.stalls:
        lines.append("--- Warp stalls (share of stall cycles; cycles per issued instruction) ---")
        for stall in kernel.stalls[:TOP_STALLS]:
            bar = "#" * max(1, round(stall.share_pct / 100 * BAR_WIDTH))
            lines.append(f"{stall.reason:<20} {stall.share_pct:5.1f} %  {stall.cycles_per_issue:6.2f} cycles  {bar}")
    rules = [r for r in kernel.ncu_rules if r.type in ("OPT", "WRN", "ERR")]
    rules.sort(key=lambda r: r.estimated_speedup_pct or 0.0, reverse=True)
    if rules:
        lines.append("--- Nsight Compute rules (ncu's own guided analysis) ---")
        for rule in rules[:TOP_NCU_RULES]:
            speedup = (
                f" (est. speedup {rule.estimated_speedup_pct:.0f} %, {rule.speedup_type})"
                if rule.estimated_speedup_pct is not None
                else ""
            )
            title = rule.title or rule.rule_id
            lines.append(f"[{rule.type}] {title}{speedup}: {rule.message}")
    return lines


def render_text(result: ProfileResult, catalog: Catalog | None = None) -> str:
    """The whole report for a result."""
    catalog = catalog or load_catalog()
    lines = ["=== profsvc kernel profile ==="]
    if result.device.name:
        lines.append(f"GPU: {result.device.name} (compute capability {result.device.compute_capability})")
    if result.ncu.version:
        passes = sorted(set(result.ncu.passes))
        pass_text = f", {'/'.join(map(str, passes))} replay passes per kernel" if passes else ""
        lines.append(f"ncu {result.ncu.version}{pass_text}, {result.ncu.seconds:.1f} s")
    if not result.ok:
        lines.append(f"FAILED ({result.error.kind}, stage {result.error.stage.value}): {result.error.message}")
        if result.error.detail:
            lines.append(result.error.detail)
        for diagnostic in result.compile.diagnostics[:10]:
            where = f"{diagnostic.file}:{diagnostic.line}:{diagnostic.column}" if diagnostic.file else ""
            lines.append(f"  {where} {diagnostic.severity.value}: {diagnostic.message}".rstrip())
        return "\n".join(lines) + "\n"
    if len(result.kernels) > 1:
        total = sum(k.value("duration") or 0.0 for k in result.kernels)
        lines.append(f"Kernels: {len(result.kernels)} launches, {format_value(total, 'ns')} of GPU time in all")
    for kernel in result.kernels:
        lines.append("")
        lines.extend(render_kernel(kernel, catalog))
    for warning in result.warnings:
        lines.append(f"note: {warning}")
    return "\n".join(lines) + "\n"
