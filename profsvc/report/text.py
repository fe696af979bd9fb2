"""The short plain-text report: what a kernel engineer (or an agent) reads first."""

from __future__ import annotations

from profsvc.metrics.analysis import aggregate_kernels
from profsvc.metrics.catalog import Catalog, load_catalog
from profsvc_contract.models import (
    Aggregate,
    ClockControl,
    DeltaRow,
    FigureValue,
    KernelResult,
    ProfileResult,
    Roofline,
)
from profsvc_contract.units import format_value

# Report sections that list every figure of a catalog group: (title, catalog group).
SECTIONS = (
    ("Timing", "timing"),
    ("Speed of light", "speed_of_light"),
    ("Memory", "memory"),
    ("Occupancy and scheduling", "occupancy"),
    ("Launch", "launch"),
)
# One-line summaries of the other groups, the figures worth reading first:
# (line title, ((short label, figure), ...)). Figures without a value are left out.
COMPACT_LINES = (
    ("Traffic", (("L1", "l1_bytes"), ("L2", "l2_bytes"), ("DRAM", "dram_bytes"))),
    (
        "Shared memory",
        (
            ("bank conflicts", "shared_bank_conflict_pct"),
            ("load wavefronts", "shared_load_wavefronts"),
            ("store wavefronts", "shared_store_wavefronts"),
        ),
    ),
    (
        "Local memory",
        (
            ("traffic", "local_memory_bytes"),
            ("share of L1 traffic", "local_traffic_pct"),
            ("loads", "local_load_instructions"),
            ("stores", "local_store_instructions"),
            ("of them spills", "spill_instructions"),
        ),
    ),
    (
        "Instructions",
        (
            ("executed", "instructions_executed"),
            ("global loads", "global_load_instructions"),
            ("global stores", "global_store_instructions"),
            ("shared loads", "shared_load_instructions"),
            ("shared stores", "shared_store_instructions"),
            ("global atomics", "global_atomic_instructions"),
            ("tensor", "tensor_instructions"),
        ),
    ),
    (
        "FP work",
        (
            ("FP32", "fp32_flop"),
            ("FP32 not fused", "fp32_nonfused_pct"),
            ("FP64", "fp64_flop"),
            ("FP16 (ncu's count)", "fp16_flop"),
            ("of it arithmetic", "fp16_math_flop"),
            ("compiler idioms", "fp16_idiom_flop"),
            ("tensor", "tensor_flop"),
        ),
    ),
    (
        "Pipes",
        (
            ("FMA", "pipe_fma_pct"),
            ("ALU", "pipe_alu_pct"),
            ("FP64", "pipe_fp64_pct"),
            ("tensor MMA", "pipe_tensor_mma_pct"),
            ("tensor incl. HFMA2.MMA moves", "pipe_tensor_pct"),
            ("LSU", "pipe_lsu_pct"),
        ),
    ),
    (
        "Divergence",
        (("active threads/warp", "active_threads_per_warp"), ("branch uniformity", "branch_uniformity_pct")),
    ),
)
# Units a compact line prints; for the others (inst, wavefront, block, ...) the label says what is counted.
_PRINTED_UNITS = frozenset({"%", "ns", "byte", "byte/s", "hz", "flop", "flop/s"})
# Occupancy limiter -> its figure, for the limiter line.
LIMIT_FIGURES = (
    ("registers", "occupancy_limit_registers"),
    ("shared memory", "occupancy_limit_shared_mem"),
    ("warps", "occupancy_limit_warps"),
    ("blocks", "occupancy_limit_blocks"),
    ("barriers", "occupancy_limit_barriers"),
)
TOP_STALLS = 5
TOP_HINTS = 5
TOP_DELTAS = 12
TOP_HOTSPOTS = 5
HOTSPOT_TEXT_WIDTH = 80
BAR_WIDTH = 20


def _dims(d: object) -> str:
    return f"({d.x}, {d.y}, {d.z})"  # type: ignore[attr-defined]


def _number(value: float | None) -> str:
    """A value without a unit ("n/a" when absent): format_value with no unit prints the bare number."""
    return format_value(value, "")


def _brief(value: float, unit: str) -> str:
    return format_value(value, unit if unit in _PRINTED_UNITS else "")


def compact_line(kernel: KernelResult, title: str, items: tuple[tuple[str, str], ...]) -> str | None:
    """'Title: label value, label value' over the figures the kernel has; None when it has none."""
    parts = []
    for label, name in items:
        figure = kernel.figures.get(name)
        if figure is not None and figure.value is not None:
            parts.append(f"{label} {_brief(figure.value, figure.unit)}")
    return f"{title}: {', '.join(parts)}" if parts else None


def roofline_line(roofline: Roofline) -> str | None:
    """The kernel's roofline placement and its bound on one line; None without a roofline."""
    if not roofline.precision:
        return f"Roofline: no FLOP counts; {roofline.bound_label}" if roofline.bound else None
    bound = roofline.bound_label or "bound unknown"
    peak_dram = format_value(roofline.peak_dram_byte_per_s, "byte/s")
    dram = f"DRAM {format_value(roofline.dram_byte_per_s, 'byte/s')} of {peak_dram} peak"
    note = f" ({roofline.note})" if roofline.note else ""
    if roofline.precision == "none":
        return f"Roofline: no floating-point work{note}; {dram}; {bound}"
    levels = ", ".join(
        f"{level} {_number(value)}"
        for level, value in (("L2", roofline.l2_arithmetic_intensity), ("L1", roofline.l1_arithmetic_intensity))
        if value is not None
    )
    intensity, ridge = _number(roofline.arithmetic_intensity), _number(roofline.ridge_point)
    achieved, peak = (format_value(v, "flop/s") for v in (roofline.achieved_flop_per_s, roofline.peak_flop_per_s))
    of_roof = "" if roofline.roof_pct is None else f", {roofline.roof_pct:.1f} % of the DRAM roof"
    return (
        f"Roofline ({roofline.precision}): {intensity} FLOP/byte from DRAM"
        + (f" ({levels})" if levels else "")
        + f", ridge {ridge}; {achieved} of {peak} peak{of_roof}; {dram}; {bound}{note}"
    )


def limiter_line(kernel: KernelResult) -> str | None:
    """'Occupancy limiter: warps (blocks/SM allowed: ...)'; None when ncu reported no limits."""
    if not kernel.occupancy_limiter:
        return None
    limits = ", ".join(
        f"{label} {_number(value)}"
        for label, name in LIMIT_FIGURES
        if (figure := kernel.figures.get(name)) is not None and (value := figure.value) is not None
    )
    return f"Occupancy limiter: {kernel.occupancy_limiter.replace('_', ' ')} (blocks/SM allowed by {limits})"


def hotspot_lines(kernel: KernelResult) -> list[str]:
    """The top source lines by PC samples: 'file:line  share  top_stall  text'."""
    if not kernel.hotspots:
        return []
    lines = ["--- Source hotspots (share of PC samples, top stall on the line and its share) ---"]
    for spot in kernel.hotspots[:TOP_HOTSPOTS]:
        stall = f"{spot.top_stall} {spot.top_stall_share_pct:.0f} %" if spot.top_stall else "-"
        text = spot.text if len(spot.text) <= HOTSPOT_TEXT_WIDTH else spot.text[: HOTSPOT_TEXT_WIDTH - 3] + "..."
        lines.append(f"{spot.file.rsplit('/', 1)[-1]}:{spot.line}  {spot.sample_share_pct:5.1f} %  {stall}  {text}")
    return lines


def nvtx_line(kernel: KernelResult) -> str:
    """The NVTX ranges the launch ran under, per domain: `domain@outer/inner` (no `domain@` for the default
    domain), start/end ranges after `start/end`."""
    labels = []
    for stack in kernel.nvtx:
        parts = ["/".join(stack.push_pop)] if stack.push_pop else []
        if stack.start_end:
            parts.append("start/end " + ",".join(stack.start_end))
        text = " ".join(parts)
        labels.append(f"{stack.domain}@{text}" if stack.domain else text)
    return "NVTX: " + "  |  ".join(labels) if labels else ""


def render_kernel(kernel: KernelResult, catalog: Catalog) -> list[str]:
    """The lines of one kernel's section."""
    duration = kernel.figures.get("duration")
    lines = [
        f"#{kernel.launch_index + 1} {kernel.name}  grid {_dims(kernel.grid)}  block {_dims(kernel.block)}"
        + (f"  {format_value(duration.value, duration.unit)}" if duration else "")
    ]
    if nvtx := nvtx_line(kernel):
        lines.append(nvtx)
    for title, group in SECTIONS:
        figures = [f for f in catalog.figures if f.group == group and f.name in kernel.figures]
        shown = [f for f in figures if kernel.figures[f.name].value is not None]
        if not shown:
            continue
        lines.append(f"--- {title} ---")
        for figure in shown:
            value = kernel.figures[figure.name]
            lines.append(f"{figure.label}: {format_value(value.value, value.unit)}")
        if group == "occupancy" and (limiter := limiter_line(kernel)):
            lines.append(limiter)
    lines.extend(requested_lines(kernel))
    summaries = [roofline_line(kernel.roofline)] + [compact_line(kernel, t, items) for t, items in COMPACT_LINES]
    if any(summaries):
        lines.append("--- Roofline, traffic and instruction mix ---")
        lines.extend(line for line in summaries if line)
    if kernel.stalls:
        lines.append("--- Warp stalls (share of stall cycles; cycles per issued instruction) ---")
        for stall in kernel.stalls[:TOP_STALLS]:
            bar = "#" * max(1, round(stall.share_pct / 100 * BAR_WIDTH))
            lines.append(f"{stall.reason:<20} {stall.share_pct:5.1f} %  {stall.cycles_per_issue:6.2f} cycles  {bar}")
    lines.extend(hotspot_lines(kernel))
    lines.extend(f"note: figures disagree ({i.check}): {i.message}" for i in kernel.inconsistencies)
    lines.extend(hint_lines(kernel))
    return lines


def requested_value(metric: FigureValue) -> str:
    """A requested or derived metric's value as reports show it ('no value' where the report lacks an input)."""
    return format_value(metric.value, metric.unit) if metric.value is not None else "no value"


def requested_lines(kernel: KernelResult) -> list[str]:
    """The ncu metrics the request named, as the report holds them."""
    if not kernel.metrics:
        return []
    return ["--- ncu metrics requested ---", *(f"{name}: {requested_value(m)}" for name, m in kernel.metrics.items())]


def hint_lines(kernel: KernelResult) -> list[str]:
    """The top hints: profsvc's rule table and ncu's own rules (marked), largest estimated speedup first."""
    if not kernel.hints:
        return []
    shown = kernel.hints[:TOP_HINTS]
    lines = [f"--- Optimization hints (top {len(shown)} of {len(kernel.hints)}; estimated runtime reduction) ---"]
    for hint in shown:
        origin = " [ncu]" if hint.origin == "ncu" else ""
        lines.append(f"-> [{hint.severity}] {hint.title} ({hint.estimated_speedup_pct:.0f} %){origin}: {hint.message}")
        if hint.advice:
            lines.append(f"   fix: {hint.advice}")
        if hint.source_lines:
            lines.append(f"   at: {', '.join(hint.source_lines[:3])}")
    return lines


def delta_lines(delta: list[DeltaRow]) -> list[str]:
    """Figures that changed against the session's previous result, largest relative change first."""
    changed = [row for row in delta if row.verdict in ("improved", "regressed")]
    if not changed:
        return ["--- Delta vs previous iteration: no figure changed beyond noise ---"] if delta else []
    changed.sort(key=lambda row: abs(row.change_pct or 0.0), reverse=True)
    lines = ["--- Delta vs previous iteration (judged by each figure's better direction) ---"]
    for row in changed[:TOP_DELTAS]:
        where = f"{row.kernel}: " if row.kernel else ""
        change = f" ({row.change_pct:+.1f} %)" if row.change_pct is not None else ""
        before, after = format_value(row.before, row.unit), format_value(row.after, row.unit)
        lines.append(f"{where}{row.figure}: {before} -> {after}{change} {row.verdict.upper()}")
    return lines


def share_table(aggregate: Aggregate) -> list[str]:
    """Launches and GPU time in all, then one row per kernel name with its share of that time."""
    lines = [
        f"Kernels: {aggregate.launches} launches, {format_value(aggregate.total_duration_ns, 'ns')} of GPU time in all"
    ]
    width = max((len(share.name) for share in aggregate.kernels), default=0)
    for share in aggregate.kernels:
        launches = f"{share.launches} launch{'es' if share.launches != 1 else ''}"
        duration = format_value(share.duration_ns, "ns")
        lines.append(f"  {share.name:<{width}}  {launches:>12}  {duration:>9}  {share.share_pct:5.1f} %")
    return lines


def timings_line(timings: dict[str, float]) -> str:
    """Where a call's time went, in one line: its total, then each stage (not the worker's phases inside)."""
    shown = [(name, seconds) for name, seconds in timings.items() if ":" not in name and name != "total"]
    stages = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in shown)
    total = f"total {timings['total']:.2f} s" if "total" in timings else ""
    return "time: " + "; ".join(part for part in (total, stages) if part)


def _header(result: ProfileResult) -> list[str]:
    """The lines above the kernels: the GPU, how ncu ran, what ran, where the time went."""
    lines = []
    if result.device.name:
        lines.append(f"GPU: {result.device.name} (compute capability {result.device.compute_capability})")
    if result.ncu.version and not result.ncu.command:
        # A report read, not run here: only the version its session records.
        lines.append(f"report written by ncu {result.ncu.version}")
    elif result.ncu.version:
        passes = sorted(set(result.ncu.passes))
        pass_text = f", {'/'.join(map(str, passes))} replay passes per kernel" if passes else ""
        clocks = result.ncu.clock_control
        clock_text = f", clock control {clocks.value}" if clocks is not ClockControl.UNSPECIFIED else ""
        lines.append(f"ncu {result.ncu.version}{pass_text}{clock_text}, {result.ncu.seconds:.1f} s")
    if result.target:
        lines.append(f"target: {result.target}")
    if result.timings:
        lines.append(timings_line(result.timings))
    return lines


def render_text(result: ProfileResult, catalog: Catalog | None = None) -> str:
    """The whole report for a result."""
    catalog = catalog or load_catalog()
    lines = ["=== profsvc kernel profile ===", *_header(result)]
    if not result.ok:
        lines.append(f"FAILED ({result.error.kind}, stage {result.error.stage.value}): {result.error.message}")
        if result.error.detail:
            lines.append(result.error.detail)
        for diagnostic in result.compile.diagnostics[:10]:
            where = f"{diagnostic.file}:{diagnostic.line}:{diagnostic.column}" if diagnostic.file else ""
            lines.append(f"  {where} {diagnostic.severity.value}: {diagnostic.message}".rstrip())
        return "\n".join(lines) + "\n"
    if len(result.kernels) > 1:
        # Whoever built the result may have left its aggregate empty: derive it from the kernels.
        aggregate = result.aggregate if result.aggregate.launches else aggregate_kernels(result.kernels)
        lines.extend(share_table(aggregate))
    for kernel in result.kernels:
        lines.append("")
        lines.extend(render_kernel(kernel, catalog))
    delta = delta_lines(result.delta)
    if delta:
        lines.append("")
        lines.extend(delta)
    for warning in result.warnings:
        lines.append(f"note: {warning}")
    return "\n".join(lines) + "\n"
