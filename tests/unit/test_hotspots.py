"""Source-line hotspots from ncu's PC sampling."""

from __future__ import annotations

import pytest

from profsvc.metrics.analysis import analyze_report
from profsvc.metrics.hotspots import PcCounters, aggregate_hotspots, lacks_line_info, pc_counters, source_line
from profsvc.report.text import hotspot_lines
from profsvc_contract.models import KernelResult
from tests.conftest import FIXTURES, first_action

WITHOUT_LINEINFO = [FIXTURES / "seed47_full.ncu-rep", FIXTURES / "big_full.ncu-rep"]
LINEINFO = FIXTURES / "seed47_lineinfo.ncu-rep"


@pytest.mark.parametrize("report", WITHOUT_LINEINFO, ids=lambda p: p.name)
def test_without_lineinfo_there_are_no_hotspots_and_a_warning_says_why(reader, report):
    analysis = analyze_report(report)
    assert analysis.kernels[0].hotspots == []
    assert lacks_line_info(first_action(reader, report))
    assert any("-lineinfo" in w and analysis.kernels[0].name in w for w in analysis.warnings)


@pytest.mark.parametrize("report", WITHOUT_LINEINFO, ids=lambda p: p.name)
def test_pc_counters_carry_ncu_report_values(reader, report):
    action = first_action(reader, report)
    pcs = pc_counters(action)
    assert sum(c.samples for c in pcs.values()) == action.metric_by_name("smsp__pcsamp_sample_count").value()
    # Every sample is in exactly one warp state, `selected` included.
    for counters in pcs.values():
        assert sum(counters.stalls.values()) == counters.samples
    # Global memory instructions over all PCs = the kernel's global loads + stores.
    kernel = analyze_report(report).kernels[0]
    global_total = kernel.value("global_load_instructions") + kernel.value("global_store_instructions")
    assert sum(c.global_instructions for c in pcs.values()) == global_total
    excess = action.metric_by_name("derived__memory_l2_theoretical_sectors_global_excessive")
    assert sum(c.excess_sectors for c in pcs.values()) == sum(excess.value(i) for i in range(excess.num_instances()))


FILE = "/tmp/build/kernel.cu"
PCS = {
    0x10: PcCounters(samples=30, stalls={"long_scoreboard": 20, "selected": 10}, global_instructions=8.0),
    0x20: PcCounters(samples=10, stalls={"long_scoreboard": 4, "wait": 6}, global_instructions=4.0, excess_sectors=2.0),
    0x30: PcCounters(samples=40, stalls={"selected": 25, "math_pipe_throttle": 15}, global_instructions=0.0),
    0x40: PcCounters(samples=20, stalls={"no_instruction": 20}),
    0x50: PcCounters(samples=0, global_instructions=100.0),
}
LINES = {0x10: (FILE, 7), 0x20: (FILE, 7), 0x30: (FILE, 9), 0x50: (FILE, 3)}


def _text(file, line):
    return f"line {line} of {file}"


def test_samples_add_up_per_line_with_shares_of_all_samples():
    spots = aggregate_hotspots(PCS, LINES.get, _text)
    assert [(s.line, s.samples) for s in spots] == [(7, 40), (9, 40)]
    # 0x40 has no source line: it counts in the total (100 samples), not as a hotspot.
    assert [s.sample_share_pct for s in spots] == [40.0, 40.0]
    first, second = spots
    assert (first.top_stall, first.top_stall_share_pct) == ("long_scoreboard", 60.0)
    # `selected` is the issuing warp, not a stall.
    assert (second.top_stall, second.top_stall_share_pct) == ("math_pipe_throttle", 37.5)
    assert (first.global_memory_instructions, first.excess_sectors) == (12.0, 2.0)
    assert first.text == f"line 7 of {FILE}"


def test_only_the_top_lines_are_kept():
    assert [s.line for s in aggregate_hotspots(PCS, LINES.get, _text, top=1)] == [7]
    assert aggregate_hotspots(PCS, lambda pc: None, _text) == []
    assert aggregate_hotspots({}, LINES.get, _text) == []


def test_source_line_text_by_name_or_base_name():
    files = {"/home/u/kernel.cu": "a\n  b = x[i];  \nc", "other.cu": ""}
    assert source_line(files, "/home/u/kernel.cu", 2) == "b = x[i];"
    assert source_line(files, "/tmp/elsewhere/kernel.cu", 1) == "a"
    assert source_line(files, "/home/u/kernel.cu", 9) == ""
    assert source_line(files, "other.cu", 1) == ""
    assert source_line({}, "kernel.cu", 1) == ""


def test_report_shows_the_top_hotspots_compactly():
    kernel = KernelResult(hotspots=aggregate_hotspots(PCS, LINES.get, _text))
    lines = hotspot_lines(kernel)
    assert lines[1].startswith("kernel.cu:7   40.0 %  long_scoreboard 60 %  line 7 of")
    assert hotspot_lines(KernelResult()) == []


def test_lineinfo_capture_maps_samples_to_the_seed_source():
    kernel = analyze_report(LINEINFO).kernels[0]
    assert kernel.hotspots
    assert sum(s.sample_share_pct for s in kernel.hotspots) <= 100.0 + 1e-9
    for spot in kernel.hotspots:
        assert spot.line > 0
        assert 0.0 < spot.sample_share_pct <= 100.0
        assert 0.0 <= spot.top_stall_share_pct <= 100.0
    assert "fmaf" in kernel.hotspots[0].text or "x[" in kernel.hotspots[0].text


def test_hotspots_in_generated_cuda_move_into_the_users_file():
    from profsvc.build.python_problem import source_map
    from profsvc.metrics.hotspots import relocate
    from profsvc_contract.models import SourceHotspot

    builds = [{"build_directory": "/cache/abc", "cuda_first_line": 30}, {"build_directory": "/cache/x"}]
    mapping = source_map(builds, "seed47.py")
    assert mapping == {"/cache/abc/cuda.cu": ("seed47.py", 26)}
    hotspots = [SourceHotspot(file="/cache/abc/cuda.cu", line=10), SourceHotspot(file="/other/k.cu", line=3)]
    moved = relocate(hotspots, mapping)
    # cuda.cu line 4 is the string's first line, which sits on line 30 of the user's file.
    assert [(h.file, h.line) for h in moved] == [("seed47.py", 36), ("/other/k.cu", 3)]
