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
from profsvc_contract.models import FigureValue, KernelResult
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


# The bound comes from speed of light: the busiest unit at 60 % of its peak or more (ncu's SOLBottleneck).
@pytest.mark.parametrize(("report", "bound"), [(BIG, "dram"), (SEED, "latency")], ids=["big", "seed"])
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
    "fp16_math_flop": 0.0,
    "tensor_flop": 0.0,
    "fp32_flop_per_s": 5e13,
    "peak_fp32_flop_per_s": 6e13,
    "dram_bytes": 1e9,
    "dram_bandwidth": 1e11,
    "peak_dram_byte_per_s": 4e12,
    "l2_bytes": 2e9,
    "l1_bytes": None,
    "sm_throughput_pct": 30.0,
    "dram_throughput_pct": 10.0,
    "l2_throughput_pct": 20.0,
    "l1_throughput_pct": 25.0,
}


def test_the_placement_on_the_dram_roofline():
    placed = roofline(BASE, PARAMS)
    assert (placed.precision, placed.arithmetic_intensity, placed.ridge_point) == ("fp32", 1000.0, 15.0)
    assert placed.roof_pct == 100 * 5e13 / 6e13
    assert placed.l2_arithmetic_intensity == 500.0
    assert placed.l1_arithmetic_intensity is None
    # Intensity 1 FLOP/byte: the roof there is the DRAM peak, 4e12 FLOP/s.
    assert roofline({**BASE, "dram_bytes": 1e12, "fp32_flop_per_s": 3.6e12}, PARAMS).roof_pct == 90.0


@pytest.mark.parametrize(
    ("throughputs", "bound", "bound_pct"),
    [
        # No unit at 60 % of its peak: latency-bound, quoting the busiest unit.
        ({}, "latency", 30.0),
        ({"sm_throughput_pct": 98.0}, "compute", 98.0),
        ({"dram_throughput_pct": 82.0}, "dram", 82.0),
        # A DRAM stream keeps L2 busier than DRAM (90 % against 81 % on the H200): still DRAM-bound.
        ({"dram_throughput_pct": 81.0, "l2_throughput_pct": 90.0}, "dram", 81.0),
        ({"l2_throughput_pct": 88.0, "l1_throughput_pct": 54.0}, "l2", 88.0),
        # The WMMA GEMM fixture's case: L1/shared at 94 %, DRAM at 1.3 %, SM at 12 %.
        ({"l1_throughput_pct": 94.0, "dram_throughput_pct": 1.3, "sm_throughput_pct": 12.0}, "l1", 94.0),
        # Compute and memory both busy: the busier one.
        ({"sm_throughput_pct": 90.0, "l1_throughput_pct": 70.0}, "compute", 90.0),
        ({"sm_throughput_pct": 70.0, "l1_throughput_pct": 90.0}, "l1", 90.0),
        # Exactly at the threshold binds.
        ({"l2_throughput_pct": 60.0}, "l2", 60.0),
    ],
)
def test_the_bound_is_the_busiest_unit_or_latency(throughputs, bound, bound_pct):
    placed = roofline({**BASE, **throughputs}, PARAMS)
    assert (placed.bound, placed.bound_pct) == (bound, bound_pct)


def test_without_speed_of_light_figures_the_bound_is_unknown():
    bare = {k: v for k, v in BASE.items() if not k.endswith("_throughput_pct")}
    assert (roofline(bare, PARAMS).bound, roofline(bare, PARAMS).bound_pct) == ("", None)
    # One unit is enough to judge by.
    assert roofline({**bare, "l2_throughput_pct": 75.0}, PARAMS).bound == "l2"


def test_threshold_comes_from_the_table():
    strict = RooflineParams(busy_pct=95.0)
    assert roofline({**BASE, "sm_throughput_pct": 90.0}, strict).bound == "latency"
    assert roofline({**BASE, "sm_throughput_pct": 90.0}, PARAMS).bound == "compute"


def test_the_precision_with_most_flops_wins_and_ties_go_to_the_first():
    tensor = {**BASE, "tensor_flop": 1e13, "tensor_flop_per_s": 4e14, "peak_tensor_flop_per_s": 1e15}
    placed = roofline(tensor, PARAMS)
    assert (placed.precision, placed.peak_flop_per_s, placed.achieved_flop_per_s) == ("tensor", 1e15, 4e14)
    assert roofline({**BASE, "fp64_flop": 1e12}, PARAMS).precision == "fp32"


def test_fp16_places_a_kernel_only_by_its_arithmetic():
    # ncu counts 4e12 FP16 FLOP, of which 3e12 are HFMA2.MMA constant moves: 1e12 of arithmetic.
    half = {**BASE, "fp32_flop": 5e11, "fp16_flop": 4e12, "fp16_math_flop": 1e12, "fp16_idiom_flop": 3e12}
    half |= {"fp16_flop_per_s": 8e13, "peak_fp16_flop_per_s": 1.2e14}
    placed = roofline(half, PARAMS)
    assert placed.precision == "fp16"
    assert placed.achieved_flop_per_s == 8e13 / 4  # the rate of the arithmetic alone
    assert placed.arithmetic_intensity == 1e12 / 1e9
    # All of it idioms: the FP32 work places the kernel.
    assert roofline({**half, "fp16_math_flop": 0.0}, PARAMS).precision == "fp32"


def test_fp16_counts_without_the_instruction_data_place_nothing_and_say_why():
    counted = {**BASE, "fp32_flop": 0.0, "fp16_flop": 4e9, "fp16_math_flop": None}
    placed = roofline(counted, PARAMS)
    assert placed.precision == "none"
    assert "4 GFLOP" in placed.note and "may include" in placed.note
    with_fp32 = roofline({**counted, "fp32_flop": 1e9}, PARAMS)
    assert with_fp32.precision == "fp32" and with_fp32.note == placed.note
    assert roofline(BASE, PARAMS).note == ""


def test_a_kernel_without_flops_has_no_placement_but_a_bound():
    none = {**BASE, "fp32_flop": 0.0, "dram_throughput_pct": 85.0}
    placed = roofline(none, PARAMS)
    assert (placed.precision, placed.bound, placed.roof_pct, placed.arithmetic_intensity) == (
        "none",
        "dram",
        None,
        None,
    )


def test_without_flop_counts_the_placement_is_unknown():
    uncollected = {**BASE, **dict.fromkeys(("fp32_flop", "fp64_flop", "fp16_flop", "fp16_math_flop", "tensor_flop"))}
    placed = roofline(uncollected, PARAMS)
    assert (placed.precision, placed.bound, placed.dram_byte_per_s) == ("", "latency", 1e11)
    assert roofline_line(placed) == "Roofline: no FLOP counts; latency-bound (the busiest unit at 30.0 % of peak)"
    assert roofline_line(roofline({k: None for k in uncollected}, PARAMS)) is None


def test_flops_without_dram_traffic_meet_only_the_compute_roof():
    placed = roofline({**BASE, "dram_bytes": 0.0}, PARAMS)
    assert placed.arithmetic_intensity is None
    assert placed.roof_pct == 100 * 5e13 / 6e13


def test_shipped_threshold_loads():
    assert load_roofline_params() == RooflineParams(busy_pct=60)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"busy_pct": 0}, "busy_pct"),
        ({"busy_pct": 101}, "busy_pct"),
        ({}, "busy_pct"),
        ({"busy_pct": 60, "memory_roof_pct": 60}, "memory_roof_pct"),
    ],
)
def test_malformed_thresholds_are_rejected_naming_the_field(data, message):
    with pytest.raises(RooflineParamsError, match=message):
        parse_roofline_params(data)


def test_report_roofline_line():
    big, seed = analyze_report(BIG).kernels[0], analyze_report(SEED).kernels[0]
    assert roofline_line(big.roofline).startswith("Roofline (fp32): 0.126 FLOP/byte from DRAM")
    assert "81.9 % of the DRAM roof" in roofline_line(big.roofline)
    assert roofline_line(big.roofline).endswith("DRAM-bound (DRAM at 81.9 % of peak)")
    assert "0.3 % of the DRAM roof" in roofline_line(seed.roofline)
    assert roofline_line(seed.roofline).endswith("latency-bound (the busiest unit at 2.5 % of peak)")
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
