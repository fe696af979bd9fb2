"""Counters, hints and source lines end to end on the H200: the archetypes and the seed through `profsvc serve`."""

from __future__ import annotations

import pytest

from profsvc_client.client import ProfilerClient, load_source
from tests.conftest import FIXTURES
from tests.unit.test_rules import PLANTED

pytestmark = pytest.mark.gpu
ARCHETYPES = FIXTURES.parent.parent / "examples" / "archetypes"
BOUND = {"stream_float4": "dram", "fma_bound": "compute", "tiny_grid": "latency"}


@pytest.fixture(scope="module")
def counters_client(served):
    with ProfilerClient(served, timeout=900) as client:
        yield client


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_archetype_end_to_end(counters_client, name):
    result = counters_client.profile(load_source(ARCHETYPES / f"{name}.cu"))
    assert result.ok, result.report_text
    assert len(result.kernels) == 1 and result.kernels[0].nvtx_range == name
    kernel = result.kernels[0]
    if PLANTED[name]:
        assert PLANTED[name] in [h.rule_id for h in kernel.hints[:2]], [h.rule_id for h in kernel.hints[:5]]
    if name in BOUND:
        assert kernel.roofline.bound == BOUND[name]
    # Lines of the user's file are among the hotspots (inlined CUDA headers, such as WMMA's, may lead).
    assert any(h.file == f"{name}.cu" for h in kernel.hotspots)
    assert {a.name for a in result.artifacts} >= {"report.ncu-rep", "roofline.png", "roofline.svg"}


def test_seed_hints_point_at_the_users_own_line(counters_client, tmp_path):
    result = counters_client.profile(load_source(FIXTURES / "seed47.py"))
    assert result.ok, result.report_text
    kernel = result.kernels[0]
    top = [h.rule_id for h in kernel.hints[:2]]
    assert set(top) == {"stall_long_scoreboard", "small_grid"}, top
    hot = kernel.hotspots[0]
    seed_lines = (FIXTURES / "seed47.py").read_text().splitlines()
    assert hot.file == "seed47.py"
    assert "fmaf" in seed_lines[hot.line - 1] or "x[" in seed_lines[hot.line - 1]
    stall_hint = next(h for h in kernel.hints if h.rule_id == "stall_long_scoreboard")
    assert f"seed47.py:{hot.line}" in stall_hint.source_lines
    assert 0 < hot.sample_share_pct <= 100


# Counts that do not change from run to run for these kernels (clocks, durations and rates do).
RUN_INDEPENDENT = ("grid_size", "block_size", "registers_per_thread", "instructions_executed")


@pytest.mark.parametrize("name", ["bank_conflicts", "strided_read"])
def test_default_set_holds_what_full_holds_in_fewer_passes(counters_client, name):
    source = load_source(ARCHETYPES / f"{name}.cu")
    default = counters_client.profile(source)
    full = counters_client.profile(source, metric_set="full")
    assert default.ok and full.ok
    ours, theirs = default.kernels[0], full.kernels[0]
    present = {n for n, v in theirs.figures.items() if v.value is not None}
    assert present <= {n for n, v in ours.figures.items() if v.value is not None}
    for figure in RUN_INDEPENDENT:
        assert ours.value(figure) == theirs.value(figure), figure
    # Stall shares and PC samples vary a little from run to run: the leading ones agree.
    assert ours.stalls[0].reason in [s.reason for s in theirs.stalls[:2]]
    assert (ours.hotspots[0].file, ours.hotspots[0].line) in {(h.file, h.line) for h in theirs.hotspots[:3]}
    assert ours.roofline.bound == theirs.roofline.bound
    assert max(default.ncu.passes) < max(full.ncu.passes)
