"""The HTML report: one self-contained file that opens offline in any browser.

Charts are plotly's (its JavaScript embedded once in the file): the roofline with one point per kernel and
memory level (L1, L2, DRAM intensities at the kernel's achieved FLOP/s, hover for the figures) under the DRAM
roof and the precision's peak, and each kernel's warp stall reasons. Tables hold the kernels, the hints with
the figures they quote, the source lines with their stall samples (a heat column), and the delta against a
session's previous result. Every text the user or the report supplies is escaped.
"""

from __future__ import annotations

import html
import math

from profsvc_contract.models import DeltaRow, Hint, KernelResult, ProfileResult, SourceHotspot
from profsvc_contract.units import format_value

# Memory levels of the hierarchical roofline: the Roofline field holding each level's intensity.
LEVELS = (("L1", "l1_arithmetic_intensity"), ("L2", "l2_arithmetic_intensity"), ("DRAM", "arithmetic_intensity"))
LEVEL_SYMBOLS = {"L1": "circle", "L2": "square", "DRAM": "diamond"}
# Hotspot rows shown per kernel, and hints.
TOP_LINES = 20
STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 17px; margin-top: 28px; } h3 { font-size: 15px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font-family: ui-monospace, monospace; font-size: 12px; }
.warn { color: #8a5a00; } .fail { color: #b00020; font-weight: bold; }
.hint { margin: 6px 0 12px 0; } .muted { color: #666; }
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _kernel_title(kernel: KernelResult) -> str:
    return f"#{kernel.launch_index + 1} {kernel.name}"


def _kernels_table(result: ProfileResult) -> str:
    rows = []
    for kernel in result.kernels:
        duration = kernel.figures.get("duration")
        shown = format_value(duration.value, duration.unit) if duration else "n/a"
        top = kernel.hints[0].title if kernel.hints else ""
        rows.append(
            "<tr>"
            f"<td>{kernel.launch_index + 1}</td><td><code>{_e(kernel.name)}</code></td>"
            f"<td>{kernel.grid.x}x{kernel.grid.y}x{kernel.grid.z}</td>"
            f"<td>{kernel.block.x}x{kernel.block.y}x{kernel.block.z}</td>"
            f"<td class='num' data-figure='duration'>{_e(shown)}</td>"
            f"<td>{_e(kernel.roofline.bound_label)}</td><td>{_e(top)}</td>"
            "</tr>"
        )
    head = (
        "<tr><th>#</th><th>kernel</th><th>grid</th><th>block</th><th>duration</th><th>bound</th><th>top hint</th></tr>"
    )
    return f"<table id='kernels'>{head}{''.join(rows)}</table>"


def _roofline_figure(result: ProfileResult) -> str:
    import plotly.graph_objects as go

    figure = go.Figure()
    placed = [k for k in result.kernels if k.roofline.precision and k.roofline.achieved_flop_per_s]
    intensities = [
        getattr(k.roofline, field) for k in placed for _, field in LEVELS if getattr(k.roofline, field) is not None
    ]
    for level, field in LEVELS:
        points = [(k, getattr(k.roofline, field)) for k in placed if getattr(k.roofline, field)]
        if not points:
            continue
        figure.add_trace(
            go.Scatter(
                x=[intensity for _, intensity in points],
                y=[k.roofline.achieved_flop_per_s for k, _ in points],
                mode="markers",
                name=level,
                marker={"symbol": LEVEL_SYMBOLS[level], "size": 11},
                text=[
                    f"{_e(_kernel_title(k))}<br>{level} intensity {i:.3g} FLOP/byte<br>"
                    f"{format_value(k.roofline.achieved_flop_per_s, 'FLOP/s')} ({_e(k.roofline.precision)})<br>"
                    f"{_e(k.roofline.bound_label)}"
                    for k, i in points
                ],
                hoverinfo="text",
            )
        )
    roofs = [k.roofline for k in placed if k.roofline.peak_flop_per_s and k.roofline.peak_dram_byte_per_s]
    if roofs and intensities:
        low, high = min(intensities) / 10, max(intensities) * 10
        xs = [low * (high / low) ** (i / 60) for i in range(61)]
        # One roof per precision: each kernel's peaks come from the clocks measured while it ran, which differ by a
        # few percent between kernels unless ncu locks them; the ceiling is the highest of them.
        ceilings: dict[str, tuple[float, float]] = {}
        for r in roofs:
            assert r.peak_flop_per_s is not None and r.peak_dram_byte_per_s is not None
            peak, bandwidth = ceilings.get(r.precision, (0.0, 0.0))
            ceilings[r.precision] = (max(peak, r.peak_flop_per_s), max(bandwidth, r.peak_dram_byte_per_s))
        for precision, (peak, bandwidth) in ceilings.items():
            figure.add_trace(
                go.Scatter(
                    x=xs,
                    y=[min(peak, bandwidth * x) for x in xs],
                    mode="lines",
                    name=f"DRAM roof, {precision} peak",
                    line={"color": "#555"},
                    hovertemplate=f"DRAM {format_value(bandwidth, 'byte/s')}, peak {format_value(peak, 'FLOP/s')}",
                )
            )
    figure.update_layout(
        title="Roofline (L1, L2 and DRAM intensity at the kernel's achieved FLOP/s)",
        xaxis={"type": "log", "title": "arithmetic intensity (FLOP/byte)"},
        yaxis={"type": "log", "title": "FLOP/s"},
        height=460,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
    )
    return figure.to_html(full_html=False, include_plotlyjs=False, div_id="roofline")


def _stalls_figure(kernel: KernelResult, index: int) -> str:
    import plotly.graph_objects as go

    stalls = list(reversed(kernel.stalls[:12]))
    figure = go.Figure(
        go.Bar(
            x=[s.share_pct for s in stalls],
            y=[s.reason for s in stalls],
            orientation="h",
            hovertemplate="%{y}: %{x:.1f} % of stall cycles<extra></extra>",
        )
    )
    figure.update_layout(
        title=f"Warp stalls: {_kernel_title(kernel)}",
        xaxis={"title": "% of stall cycles"},
        height=80 + 24 * len(stalls),
        margin={"l": 160, "r": 20, "t": 40, "b": 40},
    )
    return figure.to_html(full_html=False, include_plotlyjs=False, div_id=f"stalls-{index}")


def _hint(hint: Hint) -> str:
    origin = " [ncu]" if hint.origin == "ncu" else ""
    evidence = ", ".join(f"{_e(e.figure)} {_e(format_value(e.value, e.unit))}" for e in hint.evidence)
    parts = [
        f"<div class='hint'><b>[{_e(hint.severity)}] {_e(hint.title)}</b>{origin} "
        f"<span class='muted'>(estimated runtime reduction {hint.estimated_speedup_pct:.0f} %)</span>",
        f"<div>{_e(hint.message)}</div>",
    ]
    if hint.advice:
        parts.append(f"<div>fix: {_e(hint.advice)}</div>")
    if evidence:
        parts.append(f"<div class='muted'>evidence: {evidence}</div>")
    if hint.source_lines:
        parts.append(f"<div class='muted'>at: {_e(', '.join(hint.source_lines[:3]))}</div>")
    return "".join(parts) + "</div>"


def _source(hotspots: list[SourceHotspot]) -> str:
    if not hotspots:
        return "<p class='muted'>No source lines: the build lacked -lineinfo, or ncu sampled no stalls.</p>"
    top = max(h.sample_share_pct for h in hotspots) or 1.0
    rows = []
    for spot in hotspots[:TOP_LINES]:
        heat = f"rgba(220, 50, 32, {0.08 + 0.7 * spot.sample_share_pct / top:.2f})"
        rows.append(
            f"<tr><td><code>{_e(spot.file)}:{spot.line}</code></td>"
            f"<td class='num' style='background:{heat}'>{spot.sample_share_pct:.1f} %</td>"
            f"<td>{_e(spot.top_stall)} ({spot.top_stall_share_pct:.0f} %)</td>"
            f"<td><pre>{_e(spot.text)}</pre></td></tr>"
        )
    head = "<tr><th>line</th><th>stall samples</th><th>top stall</th><th>source</th></tr>"
    return f"<table class='source'>{head}{''.join(rows)}</table>"


def _delta(rows: list[DeltaRow]) -> str:
    changed = [row for row in rows if row.verdict in ("improved", "regressed")]
    if not changed:
        return "<p>No figure changed beyond noise.</p>"
    body = "".join(
        f"<tr><td>{_e(r.kernel)}</td><td>{_e(r.figure)}</td><td class='num'>{_e(format_value(r.before, r.unit))}</td>"
        f"<td class='num'>{_e(format_value(r.after, r.unit))}</td>"
        f"<td class='num'>{'' if r.change_pct is None or math.isnan(r.change_pct) else f'{r.change_pct:+.1f} %'}</td>"
        f"<td>{_e(r.verdict)}</td></tr>"
        for r in changed
    )
    head = "<tr><th>kernel</th><th>figure</th><th>before</th><th>after</th><th>change</th><th>verdict</th></tr>"
    return f"<table id='delta'>{head}{body}</table>"


def warm_up_html() -> None:
    """Import the charting library ahead of the first report (nothing happens where it is missing)."""
    try:
        import plotly.graph_objects
        import plotly.offline  # noqa: F401
    except ImportError:
        return


def render_html(result: ProfileResult) -> str:
    """The whole report as one HTML document, plotly's JavaScript embedded."""
    from plotly.offline import get_plotlyjs

    body: list[str] = ["<h1>profsvc profile</h1>"]
    facts = [f"target: {_e(result.target)}" if result.target else "", f"GPU: {_e(result.device.name)}"]
    if result.ncu.version:
        facts.append(f"ncu {_e(result.ncu.version)}")
    body.append(f"<p>{' · '.join(f for f in facts if f)}</p>")
    if not result.ok:
        body.append(f"<p class='fail'>Failed ({_e(result.error.kind)}): {_e(result.error.message)}</p>")
    body.extend(f"<p class='warn'>{_e(w)}</p>" for w in result.warnings)
    if result.kernels:
        body.append("<h2>Kernels</h2>" + _kernels_table(result))
        body.append("<h2>Roofline</h2>" + _roofline_figure(result))
    if result.delta:
        body.append("<h2>Delta against the previous iteration</h2>" + _delta(result.delta))
    for index, kernel in enumerate(result.kernels):
        body.append(f"<h2>{_e(_kernel_title(kernel))}</h2>")
        if kernel.stalls:
            body.append(_stalls_figure(kernel, index))
        if kernel.hints:
            body.append("<h3>Hints</h3>" + "".join(_hint(h) for h in kernel.hints))
        body.append("<h3>Source lines by stall samples</h3>" + _source(kernel.hotspots))
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>profsvc profile</title><style>{STYLE}</style>"
        f"<script>{get_plotlyjs()}</script></head><body>{''.join(body)}</body></html>"
    )
