"""Roofline placement, its thresholds table, the chart and the report's roofline line."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ElementTree

import pytest

from profsvc.metrics.analysis import analyze_report
from profsvc.metrics.roofline import (
    RooflineParams,
    RooflineParamsError,
    load_roofline_params,
    parse_roofline_params,
    roofline,
)
from profsvc.report.text import roofline_line
from profsvc_client.models import FigureValue, KernelResult
from tests.conftest import FIXTURES, first_action

SEED = FIXTURES / "seed47_full.ncu-rep"
BIG = FIXTURES / "big_full.ncu-rep"
PARAMS = load_roofline_params()


def _raw(action, name):
    return float(action.metric_by_name(name).value())


def _per_cycle(action, op):
    return _raw(action, f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed")


def _expected(action):
    """The roofline of an FP32 kernel, from ncu_report's raw values and NCU-NOTES.md's section formulas."""
    fp32_per_cycle = _per_cycle(action, "fadd") + _per_cycle(action, "fmul") + 2 * _per_cycle(action, "ffma")
    flop = fp32_per_cycle * _raw(action, "smsp__cycles_elapsed.avg")
    duration = _raw(action, "gpu__time_duration.sum")
    dram_bytes = _raw(action, "dram__bytes_read.sum") + _raw(action, "dram__bytes_write.sum")
    peak = 2 * _raw(action, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained")
    peak *= _raw(action, "sm__cycles_elapsed.avg.per_second")
    peak_dram = _raw(action, "dram__bytes.sum.peak_sustained") * _raw(action, "dram__cycles_elapsed.avg.per_second")
    achieved = fp32_per_cycle * _raw(action, "smsp__cycles_elapsed.avg.per_second")
    intensity = flop / dram_bytes
    l2_bytes = 32 * _raw(action, "lts__lts2xbar_cycles_active.sum.per_second") * duration * 1e-9
    l1_bytes = 128 * _raw(action, "l1tex__lsu_writeback_active_mem_lgds.sum")
    return {
        "achieved_flop_per_s": achieved,
        "peak_flop_per_s": peak,
        "dram_byte_per_s": (
            (_raw(action, "dram__bytes_read.sum") + _raw(action, "dram__bytes_write.sum")) / (duration * 1e-9)
        ),
        "peak_dram_byte_per_s": peak_dram,
        "arithmetic_intensity": intensity,
        "ridge_point": peak / peak_dram,
        "roof_pct": 100 * achieved / min(peak, intensity * peak_dram),
        "l2_arithmetic_intensity": flop / l2_bytes,
        "l1_arithmetic_intensity": flop / l1_bytes,
    }


@pytest.mark.parametrize(("report", "bound"), [(BIG, "memory"), (SEED, "latency")], ids=["big", "seed"])
def test_fixture_roofline_equals_the_formulas_on_ncu_report_values(reader, report, bound):
    action = first_action(reader, report)
    ours = analyze_report(report).kernels[0].roofline
    # Both kernels do FP32 work only: the other precisions count nothing.
    for op in ("dadd", "dmul", "dfma", "hadd", "hmul", "hfma"):
        assert _per_cycle(action, op) == 0.0
    assert ours.precision == "fp32"
    assert ours.bound == bound
    for field, value in _expected(action).items():
        assert getattr(ours, field) == value, field


def test_memory_side_roof_share_is_the_dram_throughput():
    # Below the ridge, % of the roof is DRAM bandwidth / peak: ncu's 81.9 % for relu*2 over 1 GiB.
    kernel = analyze_report(BIG).kernels[0]
    assert kernel.roofline.arithmetic_intensity < kernel.roofline.ridge_point
    assert math.isclose(kernel.roofline.roof_pct, kernel.value("dram_throughput_pct"), rel_tol=1e-9)
    assert 81.8 < kernel.roofline.roof_pct < 82.0


BASE = {
    "fp32_flop": 1e12,
    "fp64_flop": 0.0,
    "fp16_flop": 0.0,
    "tensor_flop": 0.0,
    "fp32_flop_per_s": 5e13,
    "peak_fp32_flop_per_s": 6e13,
    "dram_bytes": 1e9,
    "dram_bandwidth": 1e11,
    "peak_dram_byte_per_s": 4e12,
    "l2_bytes": 2e9,
    "l1_bytes": None,
}


def test_above_the_ridge_near_the_compute_roof_is_compute_bound():
    placed = roofline(BASE, PARAMS)
    assert (placed.precision, placed.arithmetic_intensity, placed.ridge_point) == ("fp32", 1000.0, 15.0)
    assert placed.roof_pct == 100 * 5e13 / 6e13
    assert placed.bound == "compute"
    assert placed.l2_arithmetic_intensity == 500.0
    assert placed.l1_arithmetic_intensity is None


def test_far_from_both_roofs_is_latency_bound():
    assert roofline({**BASE, "fp32_flop_per_s": 1e12}, PARAMS).bound == "latency"
    assert roofline({**BASE, "dram_bytes": 1e12, "fp32_flop_per_s": 1e11}, PARAMS).bound == "latency"


def test_below_the_ridge_near_the_memory_roof_is_memory_bound():
    # Intensity 1 FLOP/byte: the roof there is the DRAM peak, 4e12 FLOP/s.
    placed = roofline({**BASE, "dram_bytes": 1e12, "fp32_flop_per_s": 3.6e12}, PARAMS)
    assert placed.roof_pct == 90.0
    assert placed.bound == "memory"


def test_thresholds_come_from_the_table():
    strict = RooflineParams(memory_roof_pct=95.0, compute_roof_pct=95.0, no_flop_dram_pct=95.0)
    assert roofline({**BASE, "dram_bytes": 1e12, "fp32_flop_per_s": 3.6e12}, strict).bound == "latency"
    assert roofline(BASE, strict).bound == "latency"


def test_the_precision_with_most_flops_wins_and_ties_go_to_the_first():
    tensor = {**BASE, "tensor_flop": 1e13, "tensor_flop_per_s": 4e14, "peak_tensor_flop_per_s": 1e15}
    placed = roofline(tensor, PARAMS)
    assert (placed.precision, placed.peak_flop_per_s, placed.achieved_flop_per_s) == ("tensor", 1e15, 4e14)
    assert roofline({**BASE, "fp64_flop": 1e12}, PARAMS).precision == "fp32"


def test_a_kernel_without_flops_is_classified_by_dram_throughput():
    none = {**BASE, "fp32_flop": 0.0}
    assert roofline({**none, "dram_bandwidth": 3.5e12}, PARAMS).bound == "memory"
    placed = roofline(none, PARAMS)
    assert (placed.precision, placed.bound, placed.roof_pct, placed.arithmetic_intensity) == (
        "none",
        "latency",
        None,
        None,
    )
    assert roofline({**none, "dram_bandwidth": None}, PARAMS).bound == ""


def test_without_flop_counts_the_placement_is_unknown():
    uncollected = {**BASE, **dict.fromkeys(("fp32_flop", "fp64_flop", "fp16_flop", "tensor_flop"))}
    placed = roofline(uncollected, PARAMS)
    assert (placed.precision, placed.bound, placed.dram_byte_per_s) == ("", "", 1e11)
    assert roofline_line(placed) is None


def test_flops_without_dram_traffic_meet_only_the_compute_roof():
    placed = roofline({**BASE, "dram_bytes": 0.0}, PARAMS)
    assert placed.arithmetic_intensity is None
    assert placed.roof_pct == 100 * 5e13 / 6e13
    assert placed.bound == "compute"


def test_shipped_thresholds_load():
    assert load_roofline_params() == RooflineParams(memory_roof_pct=60, compute_roof_pct=60, no_flop_dram_pct=60)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"memory_roof_pct": 0, "compute_roof_pct": 60, "no_flop_dram_pct": 60}, "memory_roof_pct"),
        ({"memory_roof_pct": 60, "compute_roof_pct": 101, "no_flop_dram_pct": 60}, "compute_roof_pct"),
        ({"memory_roof_pct": 60, "compute_roof_pct": 60}, "no_flop_dram_pct"),
        ({"memory_roof_pct": 60, "compute_roof_pct": 60, "no_flop_dram_pct": 60, "extra": 1}, "extra"),
    ],
)
def test_malformed_thresholds_are_rejected_naming_the_field(data, message):
    with pytest.raises(RooflineParamsError, match=message):
        parse_roofline_params(data)


def test_report_roofline_line():
    big, seed = analyze_report(BIG).kernels[0], analyze_report(SEED).kernels[0]
    assert roofline_line(big.roofline).startswith("Roofline (fp32): 0.126 FLOP/byte from DRAM")
    assert "memory-bound at 81.9 % of the roof" in roofline_line(big.roofline)
    assert "latency-bound at 0.3 % of the roof" in roofline_line(seed.roofline)
    assert roofline_line(KernelResult().roofline) is None


def _fixture_kernels():
    seed, big = analyze_report(SEED).kernels[0], analyze_report(BIG).kernels[0]
    return [seed, big.model_copy(update={"launch_index": 1})]


def test_chart_is_a_png_and_an_svg_naming_the_kernels():
    pytest.importorskip("matplotlib")
    from profsvc.report.roofline_chart import render_roofline

    charts = render_roofline(_fixture_kernels())
    assert charts["png"].startswith(b"\x89PNG\r\n\x1a\n")
    svg = ElementTree.fromstring(charts["svg"])
    text = "".join(svg.itertext())
    assert "vga_linear_kernel" in text and "relu2_k" in text
    assert "DRAM roof" in text and "fp32 roof" in text
    assert "10¹²" in text  # decades as plain text, not mathtext paths
    assert render_roofline(_fixture_kernels()) == charts


@pytest.mark.parametrize(
    ("value", "label"), [(1e12, "10¹²"), (1e-3, "10⁻³"), (1.0, "10⁰"), (10.0, "10¹"), (2500.0, "2500"), (0.0, "")]
)
def test_decade_labels(value, label):
    pytest.importorskip("matplotlib")
    from profsvc.report.roofline_chart import power_of_ten_label

    assert power_of_ten_label(value) == label


def test_chart_names_kernels_it_cannot_place():
    pytest.importorskip("matplotlib")
    from profsvc.report.roofline_chart import render_roofline

    copy = KernelResult(name="copy_only", figures={"peak_dram_byte_per_s": FigureValue(value=4e12, unit="byte/s")})
    copy.roofline.precision = "none"
    charts = render_roofline([copy])
    assert charts["png"].startswith(b"\x89PNG")
    assert "copy_only" in "".join(ElementTree.fromstring(charts["svg"]).itertext())
    assert render_roofline([])["png"].startswith(b"\x89PNG")


def test_chart_of_close_points_without_peaks_still_labels_a_decade_on_each_axis():
    pytest.importorskip("matplotlib")
    from profsvc.report.roofline_chart import render_roofline

    kernels = []
    for index, flop_per_s in enumerate((2e11, 3e11)):
        kernel = KernelResult(name=f"k{index}", launch_index=index)
        kernel.roofline.precision, kernel.roofline.arithmetic_intensity = "fp32", 5.0
        kernel.roofline.achieved_flop_per_s = flop_per_s
        kernels.append(kernel)
    text = "".join(ElementTree.fromstring(render_roofline(kernels)["svg"]).itertext())
    assert "10¹¹" in text and "10¹" in text
