"""The roofline chart of a profile, as PNG and SVG bytes drawn with matplotlib.

Log-log axes: arithmetic intensity (FLOP per DRAM byte) against FLOP/s. The
memory roof is the peak DRAM bandwidth times the intensity; every precision a
kernel did floating-point work in adds its compute roof (its peak FLOP/s), from
its ridge point on. Each kernel is a point at its roofline intensity and
achieved FLOP/s, labelled with its launch number, name and precision. Kernels
without a place (no FLOP counts collected, no floating-point work, or no DRAM
traffic) are named in a note.

Peaks are the catalog's, measured per launch (peak per cycle times the clock
during that launch); when launches differ, the chart draws the highest.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

from profsvc.metrics.roofline import NO_PRECISION, PRECISIONS
from profsvc_client.models import KernelResult

LABEL_WIDTH = 40
# Text stays text in the SVG (searchable, selectable); a fixed salt makes the SVG's ids reproducible.
_RC = {"svg.fonttype": "none", "svg.hashsalt": "profsvc-roofline"}
_MARGINS = {"left": 0.11, "right": 0.97, "bottom": 0.1, "top": 0.9}
_COLORS = {"fp32": "tab:blue", "fp64": "tab:purple", "fp16": "tab:green", "tensor": "tab:red"}
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


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


def _label(kernel: KernelResult) -> str:
    name = kernel.name if len(kernel.name) <= LABEL_WIDTH else kernel.name[: LABEL_WIDTH - 3] + "..."
    return f"#{kernel.launch_index + 1} {name} ({kernel.roofline.precision})"


def _plotted(kernel: KernelResult) -> bool:
    roofline = kernel.roofline
    return (
        roofline.precision not in ("", NO_PRECISION)
        and roofline.arithmetic_intensity is not None
        and roofline.arithmetic_intensity > 0
        and roofline.achieved_flop_per_s is not None
        and roofline.achieved_flop_per_s > 0
    )


def _draw(axes: Axes, kernels: Sequence[KernelResult]) -> None:
    peak_dram = _highest(kernels, "peak_dram_byte_per_s")
    present = [p for p in PRECISIONS if any((k.value(f"{p}_flop") or 0) > 0 for k in kernels)]
    peaks = {p: peak for p in present if (peak := _highest(kernels, f"peak_{p}_flop_per_s")) is not None}
    points = [k for k in kernels if _plotted(k)]
    ridges = [peak / peak_dram for peak in peaks.values()] if peak_dram else []
    intensities = [k.roofline.arithmetic_intensity for k in points] + ridges
    low = min(intensities, default=0.1) / 10
    high = max(intensities, default=100.0) * 10
    if peak_dram and peaks:
        top = max(peaks.values())
        axes.plot([low, top / peak_dram], [low * peak_dram, top], color="black", label="DRAM roof")
        for precision, peak in peaks.items():
            axes.plot([peak / peak_dram, high], [peak, peak], color=_COLORS[precision], label=f"{precision} roof")
    for kernel in points:
        x, y = kernel.roofline.arithmetic_intensity, kernel.roofline.achieved_flop_per_s
        axes.plot([x], [y], marker="o", linestyle="none", color=_COLORS.get(kernel.roofline.precision, "black"))
        axes.annotate(_label(kernel), (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)
    _log_axes(axes)
    axes.set_xlim(low, high)
    heights = list(peaks.values()) + [k.roofline.achieved_flop_per_s for k in points]
    if heights:
        axes.set_ylim(top=max(heights) * 3)  # room above the highest roof for its line
        bottom, top = axes.get_ylim()
        # At least two decades: without minor ticks, a narrower axis could show no labelled tick at all.
        axes.set_ylim(bottom=min(bottom, top / 100))
    axes.set_xlabel("Arithmetic intensity [FLOP/byte of DRAM traffic]")
    axes.set_ylabel("Performance [FLOP/s]")
    axes.grid(True, which="major", linewidth=0.5, alpha=0.5)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(loc="lower right", fontsize=8)
    unplotted = [k for k in kernels if not _plotted(k)]
    if unplotted:
        names = ", ".join(f"#{k.launch_index + 1} {k.name}" for k in unplotted)
        axes.set_title(f"Not on the chart (no FLOP counts, FP work or DRAM traffic): {names}", fontsize=8)


def render_roofline(kernels: Sequence[KernelResult]) -> dict[str, bytes]:
    """The roofline chart of `kernels`: {"png": PNG bytes, "svg": SVG bytes}."""
    with matplotlib.rc_context(_RC):
        figure = Figure(figsize=(8, 5.5), dpi=100)
        FigureCanvasAgg(figure)
        figure.suptitle("Roofline (DRAM)")
        _draw(figure.add_subplot(), kernels)
        # Fixed margins, wide enough for the axis labels: tight_layout measured every label (0.4 s a chart).
        figure.subplots_adjust(**_MARGINS)
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
