"""Every label of the roofline chart is readable at the default size: inside the figure, overlapping nothing.

Measured on the laid-out figure with matplotlib's Agg renderer (the PNG); the SVG is drawn from the same
layout, in the same inches, and must hold every label as text.
"""

from __future__ import annotations

import functools
import io
import itertools
import xml.etree.ElementTree as ElementTree

import pytest

pytest.importorskip("matplotlib")

from matplotlib.image import imread
from matplotlib.text import Annotation

from profsvc.metrics.analysis import analyze_report
from profsvc.report.roofline_chart import DPI, LABEL_WIDTH, chart_figure, render_roofline
from profsvc_contract.models import FigureValue, KernelResult, Roofline
from tests.conftest import FIXTURES

PEAKS = {"peak_dram_byte_per_s": 4.8e12, "peak_fp32_flop_per_s": 6.7e13, "fp32_flop": 1.0}


def _kernel(index: int, name: str, intensity: float, flop_per_s: float) -> KernelResult:
    return KernelResult(
        name=name,
        launch_index=index,
        figures={n: FigureValue(value=v, unit="") for n, v in PEAKS.items()},
        roofline=Roofline(
            precision="fp32",
            arithmetic_intensity=intensity,
            achieved_flop_per_s=flop_per_s,
            bound="latency",
            bound_pct=12.5,
        ),
    )


@functools.cache
def _fixture_kernels() -> tuple[KernelResult, ...]:
    """The committed H200 reports as one multi-kernel profile: the archetypes, big and the seed."""
    archetypes = sorted((FIXTURES / "archetypes").glob("*.ncu-rep"))
    paths = [*archetypes, FIXTURES / "big_full.ncu-rep", FIXTURES / "seed47_full.ncu-rep"]
    return tuple(analyze_report(p).kernels[0].model_copy(update={"launch_index": i}) for i, p in enumerate(paths))


def _crowd() -> list[KernelResult]:
    """30 kernels with long names, most of them a few pixels apart, one at the chart's right edge."""
    kernels = [
        _kernel(
            i, f"fused_attention_forward_kernel_with_a_very_long_template_name_{i}", 2.0 + 0.01 * i, 1e12 * (1 + i / 50)
        )
        for i in range(28)
    ]
    kernels.append(_kernel(28, "fma_bound_" + "x" * 70, 3.3e4, 6.0e13))  # the widest intensity: right edge
    kernels.append(_kernel(29, "tiny", 2.0, 1e12))  # exactly on kernel 0
    return kernels


CASES = {"fixtures": _fixture_kernels, "crowd": _crowd}


def _drawn(case: str):
    """The case's chart, drawn once so that every label sits where the PNG shows it."""
    figure = chart_figure(CASES[case]())
    figure.canvas.draw()
    return figure, figure.canvas.get_renderer()


@pytest.mark.parametrize("case", sorted(CASES))
def test_everything_drawn_lies_inside_the_figure(case):
    figure, renderer = _drawn(case)
    # The bounding box of every artist drawn (tick labels, axis labels, title, legend, tags, key), in inches.
    drawn = figure.get_tightbbox(renderer)
    assert drawn.x0 >= 0 and drawn.y0 >= 0
    assert drawn.x1 <= figure.get_figwidth() and drawn.y1 <= figure.get_figheight()


@pytest.mark.parametrize("case", sorted(CASES))
def test_point_tags_overlap_nothing_and_name_every_point_once(case):
    kernels = CASES[case]()
    figure, renderer = _drawn(case)
    [axes] = figure.axes
    tags = [t for t in axes.texts if isinstance(t, Annotation)]
    boxes = [t.get_window_extent(renderer) for t in tags]
    for (a, box_a), (b, box_b) in itertools.combinations(zip(tags, boxes, strict=True), 2):
        assert not box_a.overlaps(box_b), (a.get_text(), b.get_text())
    inside = axes.get_window_extent(renderer)
    legend = axes.get_legend().get_window_extent(renderer)
    for tag, box in zip(tags, boxes, strict=True):
        assert not box.overlaps(legend), tag.get_text()
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
    named = [number for tag in tags for number in tag.get_text().split(", ")]
    assert sorted(named) == sorted(f"#{k.launch_index + 1}" for k in kernels if k.roofline.arithmetic_intensity)


@pytest.mark.parametrize("case", sorted(CASES))
def test_key_lines_overlap_neither_each_other_nor_the_axes(case):
    figure, renderer = _drawn(case)
    [axes] = figure.axes
    key = [t.get_window_extent(renderer) for t in figure.texts]
    assert key, "every case has a key"
    for a, b in itertools.combinations(key, 2):
        assert not a.overlaps(b)
    axis_area = axes.get_tightbbox(renderer)  # the axes with their tick labels and axis labels
    assert all(not box.overlaps(axis_area) for box in key)


def test_the_key_names_each_kernel_in_full_in_png_and_svg():
    kernels = _crowd()
    charts = render_roofline(kernels)
    svg_text = "".join(ElementTree.fromstring(charts["svg"]).itertext())
    for kernel in kernels:
        name = kernel.name if len(kernel.name) <= LABEL_WIDTH else kernel.name[: LABEL_WIDTH - 3]
        assert f"#{kernel.launch_index + 1} {name}" in svg_text
    # The PNG is the laid-out figure at the default size: the key made it taller, not smaller.
    figure = chart_figure(kernels)
    png = imread(io.BytesIO(charts["png"]))
    assert png.shape[:2] == (round(figure.get_figheight() * DPI), round(figure.get_figwidth() * DPI))
    assert figure.get_figheight() > chart_figure(kernels[:1]).get_figheight()


def test_a_kernel_whose_fp16_count_is_idioms_gets_no_fp16_roof():
    divergence = analyze_report(FIXTURES / "archetypes" / "warp_divergence.ncu-rep").kernels[0]
    assert divergence.value("fp16_flop") > 0  # ncu's count: HFMA2.MMA constant moves
    legend = "".join(ElementTree.fromstring(render_roofline([divergence])["svg"]).itertext())
    assert "fp32 roof" in legend and "fp16 roof" not in legend
