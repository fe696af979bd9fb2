"""What the committed H200 reports support: idioms are not math, local memory has a cause, bounds name a unit.

Expected values come from ncu_report's raw values (counters, per-PC SASS text) and from the archetype
sources, never from the catalog or rule table under test. Each consistency check has a case that breaks it.
"""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from profsvc.metrics.analysis import analyze_report
from profsvc.metrics.catalog import SassMatch, is_zero_register, load_catalog
from profsvc.metrics.sass import parse_instruction
from profsvc.metrics.sol import bound_seconds
from profsvc.report.text import render_kernel, roofline_line
from profsvc.rules import check_figures, evaluate_rules, load_rules
from profsvc.rules.checks import load_checks
from profsvc_contract.models import FigureValue, KernelResult, Roofline, StallReason
from tests.conftest import FIXTURES, first_action

ARCHETYPES = FIXTURES / "archetypes"
REPORTS = sorted(Path(p) for p in glob.glob(str(FIXTURES / "*.ncu-rep")) + glob.glob(str(ARCHETYPES / "*.ncu-rep")))
SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}


def _kernel(path: Path) -> KernelResult:
    return analyze_report(path).kernels[0]


def _hints(kernel: KernelResult):
    return evaluate_rules(kernel, load_catalog(), load_rules())


# ---- reading SASS --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "opcode", "modifiers", "operands"),
    [
        ("      HFMA2.MMA R4, -RZ, RZ, 0.244873046875, -1.8955078125", "HFMA2", ("MMA",), 5),
        ("@!P0 HFMA2 R8, R8, R4.reuse, R5.reuse ;", "HFMA2", (), 4),
        ("HADD2.F32 R0, -RZ, R2.H0_H0", "HADD2", ("F32",), 3),
        ("  @P1 EXIT ;", "EXIT", (), 0),
        ("LDG.E.CONSTANT R3, desc[UR4][R2.64]", "LDG", ("E", "CONSTANT"), 2),
    ],
)
def test_sass_lines_split_into_opcode_modifiers_and_operands(text, opcode, modifiers, operands):
    parsed = parse_instruction(text)
    assert parsed is not None
    assert (parsed[0], parsed[1], len(parsed[2])) == (opcode, modifiers, operands)


@pytest.mark.parametrize(
    ("operand", "zero"),
    [("RZ", True), ("-RZ", True), ("|RZ|", True), ("RZ.H0_H0", True), ("R2", False), ("R12", False)],
)
def test_the_zero_register_in_any_dress(operand, zero):
    assert is_zero_register(operand) is zero


def test_a_match_reads_opcode_modifier_and_zero_sources():
    idiom = SassMatch(opcode="HFMA2", zero_sources=(1, 2), zero="any", weight=4)
    math = SassMatch(opcode="HFMA2", zero_sources=(1, 2), zero="none", weight=4)
    move = ("HFMA2", ("MMA",), ("-RZ", "RZ", "0", "0"))
    fma = ("HFMA2", ("MMA",), ("R7", "R4.reuse", "R5.reuse"))
    assert idiom.matches(*move) and not math.matches(*move)
    assert math.matches(*fma) and not idiom.matches(*fma)
    assert not idiom.matches("HADD2", (), ("-RZ", "R2"))
    assert SassMatch(opcode="HFMA2", modifier="MMA").matches(*fma)
    assert not SassMatch(opcode="HFMA2", modifier="MMA").matches("HFMA2", (), ("R1", "R2", "R3"))


# ---- compiler idioms on a real report --------------------------------------------------------------------------


def test_warp_divergence_fp16_count_is_all_constant_moves(reader):
    path = ARCHETYPES / "warp_divergence.ncu-rep"
    action = first_action(reader, path)
    hfma_per_cycle = action.metric_by_name("smsp__sass_thread_inst_executed_op_hfma_pred_on.sum.per_cycle_elapsed")
    hfma = hfma_per_cycle.value() * action.metric_by_name("smsp__cycles_elapsed.avg").value()
    executed = action.metric_by_name("inst_executed")
    ids = executed.correlation_ids()
    hfma2 = [action.sass_by_pc(ids.value(i)) for i in range(executed.num_instances())]
    hfma2 = [text for text in hfma2 if text.strip().startswith("HFMA2")]
    # The kernel's source (examples/archetypes/warp_divergence.cu) has no half arithmetic: every HFMA2 is a move.
    assert hfma2 and all(", -RZ, RZ, " in text for text in hfma2)
    kernel = _kernel(path)
    assert kernel.value("fp16_flop") == pytest.approx(4 * hfma, rel=1e-9) and kernel.value("fp16_flop") > 0
    assert kernel.value("fp16_idiom_flop") == kernel.value("fp16_flop")
    assert kernel.value("fp16_math_flop") == 0
    assert kernel.roofline.precision == "fp32"


def test_warp_divergence_tensor_pipe_is_no_tensor_core_use():
    kernel = _kernel(ARCHETYPES / "warp_divergence.ncu-rep")
    # ncu's tensor pipe counts the HFMA2.MMA moves (3.4 % on the H200); the MMA-only counter shows none.
    assert kernel.value("pipe_tensor_pct") > 1 and kernel.value("pipe_tensor_mma_pct") == 0
    assert kernel.value("tensor_instructions") == 0
    compute = next(h for h in _hints(kernel) if h.rule_id == "compute_near_peak")
    assert "tensor MMA 0.0 %" in compute.message
    assert "pipe_tensor_pct" not in {e.figure for e in compute.evidence}


def test_the_wmma_gemm_uses_the_tensor_cores_by_the_mma_counter():
    kernel = _kernel(ARCHETYPES / "tensor_gemm.ncu-rep")
    assert kernel.value("pipe_tensor_mma_pct") == kernel.value("pipe_tensor_pct") > 0
    assert kernel.value("fp16_math_flop") == 0 and kernel.roofline.precision == "tensor"


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.stem)
def test_fp16_arithmetic_and_idioms_add_up_to_ncus_count(path):
    kernel = _kernel(path)
    total = kernel.value("fp16_math_flop") + kernel.value("fp16_idiom_flop")
    assert total == pytest.approx(kernel.value("fp16_flop"), abs=0.5)


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.stem)
def test_l1_throughput_equals_ncus_own_l1tex_throughput(reader, path):
    ncu = first_action(reader, path).metric_by_name("l1tex__throughput.avg.pct_of_peak_sustained_elapsed")
    if ncu is None:
        pytest.skip("the report lacks l1tex__throughput (ncu's default section list)")
    assert _kernel(path).value("l1_throughput_pct") == ncu.value()


# ---- local memory by cause ------------------------------------------------------------------------------------


def test_register_spill_is_named_a_spill_and_ranked_by_local_traffic():
    kernel = _kernel(ARCHETYPES / "register_spill.ncu-rep")
    # The archetype's every local access is a spill or fill (ptxas spills its 64 live floats).
    assert kernel.value("spill_instructions") == kernel.value("local_load_instructions") + kernel.value(
        "local_store_instructions"
    )
    hints = _hints(kernel)
    ids = [h.rule_id for h in hints]
    assert ids[0] == "local_memory_spills" and "local_memory_arrays" not in ids
    assert hints[0].severity == "high" and hints[0].estimated_speedup_pct > 50
    assert "register spills" in hints[0].message and "6.54 GB" in hints[0].message


def test_local_traffic_without_local_instructions_draws_no_local_hint():
    # The contradiction: "0 inst local-memory instructions moving 9.65 GB".
    kernel = _kernel(ARCHETYPES / "register_spill.ncu-rep")
    broken = kernel.model_copy(deep=True)
    for name in ("local_load_instructions", "local_store_instructions", "spill_instructions"):
        broken.figures[name] = FigureValue(value=0.0, unit="inst")
    failed = {i.check for i in check_figures(broken, load_catalog())}
    assert "local_bytes_need_local_instructions" in failed
    ids = {h.rule_id for h in _hints(broken)}
    assert not {"local_memory_spills", "local_memory_arrays"} & ids
    assert "note: figures disagree (local_bytes_need_local_instructions)" in "\n".join(
        render_kernel(
            broken.model_copy(update={"inconsistencies": check_figures(broken, load_catalog())}), load_catalog()
        )
    )


# ---- the bound names a unit -------------------------------------------------------------------------------------


def test_the_wmma_gemm_is_l1_bound_not_latency_bound(reader):
    path = ARCHETYPES / "tensor_gemm.ncu-rep"
    l1 = first_action(reader, path).metric_by_name("l1tex__throughput.avg.pct_of_peak_sustained_elapsed").value()
    kernel = _kernel(path)
    assert l1 > 90 and (kernel.roofline.bound, kernel.roofline.bound_pct) == ("l1", l1)
    assert "on-chip-memory-bound (L1/shared memory at 94.1 % of peak)" in roofline_line(kernel.roofline)


@pytest.mark.parametrize(
    ("name", "bound"),
    [
        ("stream_float4", "dram"),  # L2 is busier (90 %) only carrying DRAM's traffic
        ("fma_bound", "compute"),
        ("strided_read", "l2"),
        ("bank_conflicts", "l1"),
        ("register_spill", "l2"),
        ("tiny_grid", "latency"),
        ("hot_atomic", "latency"),
    ],
)
def test_archetype_bounds(name, bound):
    assert _kernel(ARCHETYPES / f"{name}.ncu-rep").roofline.bound == bound


# ---- labels agree with estimates ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.stem)
def test_no_label_ranks_below_a_lower_one(path):
    hints = _hints(_kernel(path))
    labels = [SEVERITY_ORDER[h.severity] for h in hints]
    assert labels == sorted(labels), [(h.rule_id, h.severity, round(h.estimated_speedup_pct, 1)) for h in hints]


def test_the_wmma_gemm_no_longer_lists_a_6_percent_high_under_49_percent_mediums():
    hints = _hints(_kernel(ARCHETYPES / "tensor_gemm.ncu-rep"))
    stall = next(h for h in hints if h.rule_id == "stall_long_scoreboard")
    assert stall.estimated_speedup_pct < 10 and stall.severity != "high"
    assert all(h.severity == "high" for h in hints if h.estimated_speedup_pct > 40)


# ---- one case per consistency check ----------------------------------------------------------------------------

SOUND = {
    "local_memory_bytes": 6.5e9,
    "local_traffic_pct": 90.0,
    "local_load_instructions": 2.5e7,
    "local_store_instructions": 2.5e7,
    "spill_instructions": 5.0e7,
    "dram_bytes": 2.0e9,
    "dram_bandwidth": 3.9e12,
    "peak_dram_byte_per_s": 4.8e12,
    "duration": 5.0e5,
    "tensor_flop": 1.7e10,
    "tensor_instructions": 1.3e5,
    "fp16_flop": 5.0e8,
    "fp16_math_flop": 1.0e8,
    "fp16_idiom_flop": 4.0e8,
    "fp32_flop": 1.0e9,
}
BREAKS = {
    "local_bytes_need_local_instructions": {
        "local_load_instructions": 0.0,
        "local_store_instructions": 0.0,
        "spill_instructions": 0.0,
    },
    "local_instructions_need_local_bytes": {"local_memory_bytes": 0.0},
    "spills_within_local_instructions": {"spill_instructions": 6.0e7},
    "dram_rate_within_peak": {"dram_bandwidth": 5.5e12},
    "tensor_flop_need_tensor_instructions": {"tensor_instructions": 0.0},
    "fp16_split_adds_up": {"fp16_idiom_flop": 3.0e8},
    "stall_shares_sum_to_100": {},
    "local_share_within_100": {"local_traffic_pct": 101.0},
    "precision_has_flops": {"fp32_flop": 0.0},
}


def _synthetic(values: dict[str, float], stalls: tuple[float, ...] = (60.0, 40.0)) -> KernelResult:
    return KernelResult(
        name="k",
        figures={n: FigureValue(value=v, unit="") for n, v in values.items()},
        stalls=[StallReason(reason=r, share_pct=s) for r, s in zip(("long_scoreboard", "wait"), stalls, strict=False)],
        roofline=Roofline(precision="fp32", bound="dram", bound_pct=81.0),
    )


def test_every_shipped_check_has_a_case():
    assert {c.id for c in load_checks().checks} == set(BREAKS)


def test_the_sound_figures_pass_every_check():
    assert check_figures(_synthetic(SOUND), load_catalog()) == []


@pytest.mark.parametrize("check", sorted(BREAKS))
def test_each_check_catches_its_contradiction(check):
    stalls = (60.0, 30.0) if check == "stall_shares_sum_to_100" else (60.0, 40.0)
    failed = check_figures(_synthetic(SOUND | BREAKS[check], stalls), load_catalog())
    assert [i.check for i in failed] == [check]
    assert failed[0].message and failed[0].figures


def test_a_rule_that_reads_a_contradicted_figure_is_not_drawn():
    # Spills without local instructions: the spill rule would otherwise fire on spill_instructions > 0.
    broken = SOUND | {"local_load_instructions": 0.0, "local_store_instructions": 0.0, "memory_throughput_pct": 90.0}
    assert "local_memory_spills" not in {h.rule_id for h in _hints(_synthetic(broken))}
    sound = SOUND | {"memory_throughput_pct": 90.0}
    assert "local_memory_spills" in {h.rule_id for h in _hints(_synthetic(sound))}


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.stem)
def test_the_committed_reports_are_consistent(path):
    assert check_figures(_kernel(path), load_catalog()) == []


def test_the_sol_bound_counts_fp16_arithmetic_only():
    values = {
        "dram_bytes": 1e6,
        "peak_dram_byte_per_s": 1e12,
        "fp16_flop": 4e12,  # ncu's count, mostly HFMA2.MMA moves
        "fp16_math_flop": 1e9,
        "peak_fp16_flop_per_s": 1e14,
    }
    kernel = KernelResult(
        figures={n: FigureValue(value=v, unit="") for n, v in values.items()}, roofline=Roofline(precision="fp16")
    )
    # max(1e6 B / 1e12 B/s, 1e9 FLOP / 1e14 FLOP/s) = 1e-5 s; the idioms would have made it 4e-2 s.
    assert bound_seconds(kernel) == pytest.approx(1e-5)
