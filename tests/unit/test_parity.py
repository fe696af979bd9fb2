"""Parity: every figure profsvc reports equals what ncu_report gives for the same metric."""

from __future__ import annotations

import math

import pytest

from profsvc.metrics.analysis import analyze_report
from profsvc.metrics.catalog import Figure, load_catalog
from tests.conftest import FIXTURES, REPORTS, first_action

CATALOG = load_catalog()


def _ncu_value(action, names):
    for name in names:
        metric = action.metric_by_name(name)
        if metric is not None and isinstance(metric.value(), int | float):
            return float(metric.value())
    return None


def as_reported(figure: Figure, expected: float | None) -> float | None:
    """A formula's value as the catalog reports it: a `whole` count, whole up to float error, is rounded."""
    if not figure.whole or expected is None:
        return expected
    assert math.isclose(expected, round(expected), rel_tol=1e-9), f"{figure.name}: {expected} is far from whole"
    return round(expected)


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: p.name)
def test_every_catalog_figure_equals_ncu_report(reader, report):
    action = first_action(reader, report)
    kernel = analyze_report(report).kernels[0]
    checked = 0
    for figure in CATALOG.figures:
        ours = kernel.figures[figure.name]
        assert ours.unit == figure.unit
        if figure.metric:
            expected = _ncu_value(action, figure.metric)
        else:
            inputs = {name: _ncu_value(action, names) for name, names in figure.inputs.items()}
            # Python's own arithmetic on ncu's values, independent of profsvc's evaluator.
            expected = eval(figure.formula, {"__builtins__": {}, "min": min, "max": max, "abs": abs}, inputs)
            expected = as_reported(figure, expected)
        assert ours.value == expected, f"{figure.name}: profsvc {ours.value} != ncu_report {expected}"
        checked += expected is not None
    # A fixture that silently lost most of its figures would make this test vacuous.
    assert checked >= len(CATALOG.figures) - 2


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: p.name)
def test_stall_shares_are_normalised(reader, report):
    action = first_action(reader, report)
    stalls = analyze_report(report).kernels[0].stalls
    assert stalls, "a --set full report has warp-state statistics"
    assert math.isclose(sum(s.share_pct for s in stalls), 100.0, rel_tol=1e-9)
    assert all(0.0 < s.share_pct <= 100.0 for s in stalls)
    assert [s.share_pct for s in stalls] == sorted((s.share_pct for s in stalls), reverse=True)
    for stall in stalls:
        metric = action.metric_by_name(f"smsp__average_warps_issue_stalled_{stall.reason}_per_issue_active.ratio")
        assert stall.cycles_per_issue == metric.value()


def test_seed_long_scoreboard_is_a_share_not_the_seed_trace_2441_percent():
    top = analyze_report(REPORTS[[p.name for p in REPORTS].index("seed47_full.ncu-rep")]).kernels[0].stalls[0]
    assert top.reason == "long_scoreboard"
    # ncu: 24.6 cycles per issued instruction out of about 37 stall cycles in all.
    assert 60.0 < top.share_pct < 70.0
    assert math.isclose(top.cycles_per_issue, 24.607522175536882)


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: p.name)
def test_percentages_stay_within_100(report):
    kernel = analyze_report(report).kernels[0]
    for name, figure in kernel.figures.items():
        if figure.unit == "%" and figure.value is not None:
            assert 0.0 <= figure.value <= 100.0, name


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: p.name)
def test_launch_shape_and_names_match_ncu(reader, report):
    action = first_action(reader, report)
    kernel = analyze_report(report).kernels[0]
    assert kernel.name == action.name()
    assert kernel.demangled_name == action.name(reader.IAction.NameBase_DEMANGLED)
    for axis in "xyz":
        assert getattr(kernel.grid, axis) == action.metric_by_name(f"launch__grid_dim_{axis}").value()
        assert getattr(kernel.block, axis) == action.metric_by_name(f"launch__block_dim_{axis}").value()


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: p.name)
def test_ncu_rule_results_are_carried(reader, report):
    action = first_action(reader, report)
    ours = analyze_report(report).kernels[0].ncu_rules
    theirs = [r for r in action.rule_results_as_dicts() if (r.get("rule_message") or {}).get("message")]
    assert [r.rule_id for r in ours] == [r["rule_identifier"] for r in theirs]
    for mine, raw in zip(ours, theirs, strict=True):
        speedup = (raw.get("speedup_estimation") or {}).get("speedup")
        assert mine.estimated_speedup_pct == speedup
        assert "@section:" not in mine.message and "@url:" not in mine.message


def test_seed_report_facts():
    analysis = analyze_report(REPORTS[[p.name for p in REPORTS].index("seed47_full.ncu-rep")])
    kernel = analysis.kernels[0]
    assert analysis.device.name == "NVIDIA H200"
    assert analysis.device.compute_capability == "9.0"
    assert kernel.name == "vga_linear_kernel"
    assert kernel.nvtx_range == "profile"
    assert (kernel.grid.x, kernel.grid.y, kernel.block.x) == (8, 12, 224)


def test_the_default_set_report_holds_every_figure_the_full_report_holds():
    # Both reports are of the seed's kernel on the H200: one with --set full, one with the default set.
    full = analyze_report(FIXTURES / "seed47_full.ncu-rep").kernels[0]
    default = analyze_report(FIXTURES / "seed47_default.ncu-rep").kernels[0]
    assert {n for n, v in full.figures.items() if v.value is not None} == {
        n for n, v in default.figures.items() if v.value is not None
    }
    for name in ("grid_size", "block_size", "registers_per_thread", "instructions_executed", "dram_bytes_read"):
        assert default.value(name) == full.value(name), name
    assert default.stalls and default.stalls[0].reason == full.stalls[0].reason
    assert default.hotspots and default.roofline.bound == full.roofline.bound


def test_the_benchmarks_parity_step_on_two_runs_of_the_seed(tmp_path):
    # The fast-path benchmark's `parity` step, on two real H200 reports of the seed: the default set (warm
    # server) and `ncu --set full` (plain run). Run-independent figures must agree exactly.
    import shutil
    import sys

    sys.path.insert(0, str(FIXTURES.parents[1] / "benchmarks"))
    try:
        import bench_fastpath
    finally:
        sys.path.pop(0)
    shutil.copy(FIXTURES / "seed47_default.ncu-rep", tmp_path / "warm-profile.ncu-rep")
    shutil.copy(FIXTURES / "seed47_full.ncu-rep", tmp_path / "plain.ncu-rep")
    results: dict = {}
    bench_fastpath.parity(tmp_path, results)
    parity = results["parity"]
    assert parity["catalog_figures_missing"] == []
    assert parity["deterministic_figures_mismatched"] == {}
    assert parity["deterministic_figures_checked"] == list(bench_fastpath.DETERMINISTIC_FIGURES)
    assert parity["deterministic_mismatched"] == {}
    assert 0 < parity["catalog_figures_equal"] < parity["catalog_figures_ours"]
