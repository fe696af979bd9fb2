"""The roofline chart of a profile, as PNG and SVG bytes drawn with matplotlib.

Log-log axes: arithmetic intensity (FLOP per DRAM byte) against FLOP/s. The
memory roof is the peak DRAM bandwidth times the intensity; every precision a
kernel did floating-point work in adds its compute roof (its peak FLOP/s), from
its ridge point on. Each kernel is a point at its roofline intensity and
achieved FLOP/s, tagged with its launch number; the key under the axes names
each number (kernel, precision, achieved FLOP/s, intensity, bound), and the
kernels without a place (no FLOP counts collected, no floating-point work, or
no DRAM traffic). Tags are placed where they overlap nothing and stay inside
the axes; points closer than a tag's size share one tag. The figure grows
taller with the key, so every label is readable at the default size.

Peaks are the catalog's, measured per launch (peak per cycle times the clock
during that launch); when launches differ, the chart draws the highest.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Iterator, Sequence

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backend_bases import RendererBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator
from matplotlib.transforms import Bbox

from profsvc.metrics.roofline import NO_PRECISION, PRECISIONS, flop_counts
from profsvc_contract.models import KernelResult
from profsvc_contract.units import format_value

LABEL_WIDTH = 48
# Text stays text in the SVG (searchable, selectable); a fixed salt makes the SVG's ids reproducible.
_RC = {"svg.fonttype": "none", "svg.hashsalt": "profsvc-roofline"}
_COLORS = {"fp32": "tab:blue", "fp64": "tab:purple", "fp16": "tab:green", "tensor": "tab:red"}
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
# Layout in inches: the plot keeps its size, the key below it adds a line per entry.
WIDTH_IN, PLOT_IN, DPI = 8.0, 4.4, 100
LEFT_IN, RIGHT_IN, TOP_IN, AXIS_LABELS_IN = 0.9, 0.25, 0.45, 0.6
FONT_PT, LINE_IN, KEY_GAP_IN = 8, 0.16, 0.1
# Characters per key line at FONT_PT in the width between the margins (DejaVu Sans averages ~0.6 em).
KEY_CHARS = int((WIDTH_IN - LEFT_IN - RIGHT_IN) * 72 / (0.6 * FONT_PT))
# Tag offsets from a point, in points: eight directions, then the same further out.
_DIRECTIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1), (0, 1), (0, -1), (1, 0), (-1, 0))
_RINGS = (6, 14, 24, 36, 50)
# Points closer than this (pixels) share one tag.
_CLUSTER_PX = 6.0


def power_of_ten_label(value: float, _position: object = None) -> str:
    """A decade as plain text ("10¹²"): matplotlib's default draws it with mathtext, a third of a chart's time."""
    if value <= 0:
        return ""
    exponent = round(math.log10(value))
    if not math.isclose(value, 10.0**exponent, rel_tol=1e-9):
        return f"{value:g}"
    return "10" + str(exponent).translate(_SUPERSCRIPT)


def _log_axes(axes: Axes) -> None:
    """Log scales on both axes, decades labelled as plain text, no minor ticks (each one is an object to draw)."""
    axes.set_xscale("log")
    axes.set_yscale("log")
    for axis in (axes.xaxis, axes.yaxis):
        axis.set_major_formatter(FuncFormatter(power_of_ten_label))
        axis.set_minor_locator(NullLocator())


def _highest(kernels: Sequence[KernelResult], figure: str) -> float | None:
    values = [v for k in kernels if (v := k.value(figure)) is not None and v > 0]
    return max(values) if values else None


def _name(kernel: KernelResult) -> str:
    return kernel.name if len(kernel.name) <= LABEL_WIDTH else kernel.name[: LABEL_WIDTH - 3] + "..."


def _tag(kernel: KernelResult) -> str:
    return f"#{kernel.launch_index + 1}"


def key_entry(kernel: KernelResult) -> str:
    """A plotted kernel's line in the key: tag, name, precision, achieved FLOP/s, intensity, bound."""
    roofline = kernel.roofline
    achieved = format_value(roofline.achieved_flop_per_s, "flop/s")
    bound = f", {roofline.bound_label}" if roofline.bound else ""
    return (
        f"{_tag(kernel)} {_name(kernel)} ({roofline.precision}): {achieved}"
        f" at {roofline.arithmetic_intensity:.3g} FLOP/byte{bound}"
    )


def _plotted(kernel: KernelResult) -> bool:
    roofline = kernel.roofline
    return (
        roofline.precision not in ("", NO_PRECISION)
        and roofline.arithmetic_intensity is not None
        and roofline.arithmetic_intensity > 0
        and roofline.achieved_flop_per_s is not None
        and roofline.achieved_flop_per_s > 0
    )


def key_lines(kernels: Sequence[KernelResult]) -> list[str]:
    """The key under the axes, wrapped to the figure's width."""
    entries = [key_entry(k) for k in kernels if _plotted(k)]
    unplotted = [f"{_tag(k)} {_name(k)}" for k in kernels if not _plotted(k)]
    if unplotted:
        entries.append("Not on the chart (no FLOP counts, FP work or DRAM traffic): " + ", ".join(unplotted))
    return [
        line
        for entry in entries
        for line in textwrap.wrap(entry, KEY_CHARS, subsequent_indent="    ", break_on_hyphens=False)
    ]


def _draw(axes: Axes, kernels: Sequence[KernelResult], points: Sequence[KernelResult]) -> None:
    """Roofs, points and limits (the points are drawn first so the limits include them)."""
    for kernel in points:
        x, y = kernel.roofline.arithmetic_intensity, kernel.roofline.achieved_flop_per_s
        axes.plot([x], [y], marker="o", linestyle="none", color=_COLORS.get(kernel.roofline.precision, "black"))
    peak_dram = _highest(kernels, "peak_dram_byte_per_s")
    # FP16 counts only its arithmetic: a kernel whose FP16 count is compiler idioms gets no FP16 roof.
    counts = [flop_counts({name: figure.value for name, figure in k.figures.items()}) for k in kernels]
    present = [p for p in PRECISIONS if any(c[p] > 0 for c in counts)]
    peaks = {p: peak for p in present if (peak := _highest(kernels, f"peak_{p}_flop_per_s")) is not None}
    ridges = [peak / peak_dram for peak in peaks.values()] if peak_dram else []
    intensities = [k.roofline.arithmetic_intensity for k in points] + ridges
    low = min(intensities, default=0.1) / 10
    high = max(intensities, default=100.0) * 10
    if peak_dram and peaks:
        top = max(peaks.values())
        axes.plot([low, top / peak_dram], [low * peak_dram, top], color="black", label="DRAM roof")
        for precision, peak in peaks.items():
            axes.plot([peak / peak_dram, high], [peak, peak], color=_COLORS[precision], label=f"{precision} roof")
    _log_axes(axes)
    axes.set_xlim(low, high)
    heights = list(peaks.values()) + [k.roofline.achieved_flop_per_s for k in points]
    if heights:
        axes.set_ylim(top=max(heights) * 3)  # room above the highest roof for its line
        bottom, top = axes.get_ylim()
        # At least two decades: without minor ticks, a narrower axis could show no labelled tick at all.
        axes.set_ylim(bottom=min(bottom, top / 100))


def _clusters(axes: Axes, points: Sequence[KernelResult]) -> list[tuple[tuple[float, float], list[KernelResult]]]:
    """Points grouped when closer than a tag on screen: (data position of the first, its kernels)."""
    groups: list[tuple[tuple[float, float], tuple[float, float], list[KernelResult]]] = []
    for kernel in points:
        xy = (kernel.roofline.arithmetic_intensity, kernel.roofline.achieved_flop_per_s)
        px, py = axes.transData.transform(xy)
        for _, (gx, gy), members in groups:
            if math.hypot(px - gx, py - gy) < _CLUSTER_PX:
                members.append(kernel)
                break
        else:
            groups.append((xy, (px, py), [kernel]))
    return [(xy, members) for xy, _, members in groups]


def _candidates() -> Iterator[tuple[tuple[float, float], str, str]]:
    """(offset in points, horizontal and vertical alignment) around a point, nearest first."""
    for radius in _RINGS:
        for dx, dy in _DIRECTIONS:
            ha = "left" if dx > 0 else "right" if dx < 0 else "center"
            va = "bottom" if dy > 0 else "top" if dy < 0 else "center"
            yield (dx * radius, dy * radius), ha, va


def _place_tags(axes: Axes, renderer: RendererBase, points: Sequence[KernelResult], obstacles: list[Bbox]) -> None:
    """Tag every point group where the tag overlaps no other tag, point or obstacle and stays inside the axes."""
    inside = axes.get_window_extent(renderer)
    marker = 4.0  # half a marker's size in pixels
    markers = [
        Bbox.from_extents(x - marker, y - marker, x + marker, y + marker)
        for x, y in (
            axes.transData.transform((k.roofline.arithmetic_intensity, k.roofline.achieved_flop_per_s)) for k in points
        )
    ]
    placed = list(obstacles) + markers
    for xy, members in _clusters(axes, points):
        text = ", ".join(_tag(k) for k in members)
        free = first_inside = None
        for offset, ha, va in _candidates():
            tag = axes.annotate(text, xy, textcoords="offset points", xytext=offset, ha=ha, va=va, fontsize=FONT_PT)
            box = tag.get_window_extent(renderer)
            tag.remove()
            if not _contains(inside, box):
                continue
            if not any(box.overlaps(other) for other in placed):
                free = (offset, ha, va)
                break
            first_inside = first_inside or (offset, ha, va)
        # No free place (a crowd of points): the nearest place inside the axes.
        chosen = free or first_inside
        if chosen is not None:
            offset, ha, va = chosen
            tag = axes.annotate(text, xy, textcoords="offset points", xytext=offset, ha=ha, va=va, fontsize=FONT_PT)
            placed.append(tag.get_window_extent(renderer))


def _contains(outer: Bbox, inner: Bbox) -> bool:
    return outer.x0 <= inner.x0 and inner.x1 <= outer.x1 and outer.y0 <= inner.y0 and inner.y1 <= outer.y1


def chart_figure(kernels: Sequence[KernelResult]) -> Figure:
    """The laid-out chart: axes with roofs and tagged points, the legend, and the key below."""
    lines = key_lines(kernels)
    key_in = (len(lines) * LINE_IN + KEY_GAP_IN) if lines else 0.0
    height = TOP_IN + PLOT_IN + AXIS_LABELS_IN + key_in
    figure = Figure(figsize=(WIDTH_IN, height), dpi=DPI)
    canvas = FigureCanvasAgg(figure)
    figure.suptitle("Roofline (DRAM)", y=1 - 0.12 / height, va="top")
    axes = figure.add_axes(
        (LEFT_IN / WIDTH_IN, (AXIS_LABELS_IN + key_in) / height, 1 - (LEFT_IN + RIGHT_IN) / WIDTH_IN, PLOT_IN / height)
    )
    points = [k for k in kernels if _plotted(k)]
    _draw(axes, kernels, points)
    axes.set_xlabel("Arithmetic intensity [FLOP/byte of DRAM traffic]")
    axes.set_ylabel("Performance [FLOP/s]")
    axes.grid(True, which="major", linewidth=0.5, alpha=0.5)
    renderer = canvas.get_renderer()
    obstacles = []
    if axes.get_legend_handles_labels()[0]:
        # Upper left lies above the DRAM roof, where no kernel can be.
        legend = axes.legend(loc="upper left", fontsize=FONT_PT)
        obstacles.append(legend.get_window_extent(renderer))
    _place_tags(axes, renderer, points, obstacles)
    for index, line in enumerate(lines):
        top_in = key_in - KEY_GAP_IN / 2 - index * LINE_IN
        figure.text(LEFT_IN / WIDTH_IN, top_in / height, line, fontsize=FONT_PT, va="top", ha="left")
    return figure


def render_roofline(kernels: Sequence[KernelResult]) -> dict[str, bytes]:
    """The roofline chart of `kernels`: {"png": PNG bytes, "svg": SVG bytes}."""
    with matplotlib.rc_context(_RC):
        figure = chart_figure(kernels)
        charts = {}
        for kind in ("png", "svg"):
            buffer = io.BytesIO()
            # No creation date in the files: the same kernels give the same bytes.
            metadata = {"Date": None} if kind == "svg" else {"Software": None}
            figure.savefig(buffer, format=kind, metadata=metadata)
            charts[kind] = buffer.getvalue()
    return charts


def warm_up() -> None:
    """Draw a throwaway chart the way a job does: fonts, text layouts and the renderers get loaded and cached."""
    render_roofline([])
