"""Totals over a profile's launches, and the report's per-kernel share table."""

from __future__ import annotations

import math
import re

from profsvc.metrics.analysis import ReportAnalysis, aggregate_kernels, analyze_report
from profsvc.report.text import render_text
from profsvc_contract.models import Aggregate, FigureValue, KernelResult, ProfileResult
from tests.conftest import FIXTURES

SEED = analyze_report(FIXTURES / "seed47_full.ncu-rep")
BIG = analyze_report(FIXTURES / "big_full.ncu-rep")


def _three_launches() -> ReportAnalysis:
    """A report of seed, big, big: two kernel names, one launched twice."""
    seed, big = SEED.kernels[0], BIG.kernels[0]
    kernels = [seed, big.model_copy(update={"launch_index": 1}), big.model_copy(update={"launch_index": 2})]
    return ReportAnalysis(device=SEED.device, kernels=kernels, aggregate=aggregate_kernels(kernels))


def test_totals_and_per_kernel_shares():
    seed_ns, big_ns = SEED.kernels[0].value("duration"), BIG.kernels[0].value("duration")
    aggregate = _three_launches().aggregate
    assert aggregate.launches == 3
    assert aggregate.total_duration_ns == seed_ns + 2 * big_ns
    assert [(k.name, k.launches, k.duration_ns) for k in aggregate.kernels] == [
        ("relu2_k", 2, 2 * big_ns),
        ("vga_linear_kernel", 1, seed_ns),
    ]
    assert aggregate.kernels[0].share_pct == 100 * 2 * big_ns / aggregate.total_duration_ns
    assert math.isclose(sum(k.share_pct for k in aggregate.kernels), 100.0)
    assert all(0.0 <= k.share_pct <= 100.0 for k in aggregate.kernels)


def test_a_single_launch_report_is_all_one_kernel():
    aggregate = SEED.aggregate
    assert (aggregate.launches, aggregate.total_duration_ns) == (1, SEED.kernels[0].value("duration"))
    assert [(k.name, k.launches, k.share_pct) for k in aggregate.kernels] == [("vga_linear_kernel", 1, 100.0)]


def test_launches_without_duration_count_but_add_no_time():
    timed = KernelResult(name="k", figures={"duration": FigureValue(value=10.0, unit="ns")})
    untimed = KernelResult(name="u", figures={"duration": FigureValue(value=None, unit="ns")})
    aggregate = aggregate_kernels([timed, untimed])
    assert (aggregate.launches, aggregate.total_duration_ns) == (2, 10.0)
    assert [(k.name, k.share_pct) for k in aggregate.kernels] == [("k", 100.0), ("u", 0.0)]
    assert aggregate_kernels([untimed]).kernels[0].share_pct == 0.0
    assert aggregate_kernels([]) == Aggregate()


def _report(analysis: ReportAnalysis, **update) -> str:
    result = ProfileResult(ok=True, device=analysis.device, kernels=analysis.kernels, warnings=analysis.warnings)
    return render_text(result.model_copy(update=update))


def test_text_shows_the_share_table_only_for_several_kernels():
    analysis = _three_launches()
    text = _report(analysis, aggregate=analysis.aggregate)
    assert "Kernels: 3 launches" in text
    assert re.search(r"relu2_k\s+2 launches\s+1\.08 ms\s+99\.7 %", text)
    assert re.search(r"vga_linear_kernel\s+1 launch\s+2\.78 μs\s+0\.3 %", text)
    # A result whose aggregate was left empty gets the same table, derived from its kernels.
    assert _report(analysis) == text
    assert "Kernels:" not in _report(SEED)


def test_text_never_prints_a_share_above_100_percent():
    for analysis in (SEED, BIG, _three_launches()):
        text = _report(analysis)
        percentages = [float(p) for p in re.findall(r"(\d+(?:\.\d+)?) ?%", text)]
        assert percentages and max(percentages) <= 100.0
