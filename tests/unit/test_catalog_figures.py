"""The catalog's figures: declared with their units, formulas evaluated right at their edges, fixture facts.

Whether each figure equals what ncu shows is tests/unit/test_parity.py's job.
"""

from __future__ import annotations

import math

import pytest

from profsvc.metrics.analysis import analyze_report
from profsvc.metrics.catalog import CatalogError, Figure, load_catalog, parse_catalog
from profsvc.metrics.expr import compile_expr
from profsvc.metrics.extract import breakdown_value, occupancy_limiter
from profsvc_contract.models import FigureValue
from tests.conftest import FIXTURES, REPORTS, kernel_actions, report_id

CATALOG = load_catalog()
SEED = FIXTURES / "seed47_full.ncu-rep"
BIG = FIXTURES / "big_full.ncu-rep"
# A report from a primed warm ncu worker (H200): its own warm-up kernel first, then the seed's (its warm-up range
# in the default domain: test_warm_ncu_run).
PRIMED = FIXTURES / "primed" / "seed47_primed.ncu-rep"
# The names other code (the rule table) is written against, with the unit each must carry.
REQUIRED = {
    "l1_hit_rate_pct": "%",
    "l1_bytes": "byte",
    "l2_bytes": "byte",
    "dram_bytes": "byte",
    "shared_load_bank_conflicts": "wavefront",
    "shared_store_bank_conflicts": "wavefront",
    "shared_load_wavefronts": "wavefront",
    "shared_store_wavefronts": "wavefront",
    "shared_bank_conflict_pct": "%",
    "local_memory_bytes": "byte",
    "spill_instructions": "inst",
    "branch_uniformity_pct": "%",
    "active_threads_per_warp": "thread/warp",
    "pipe_fma_pct": "%",
    "pipe_alu_pct": "%",
    "pipe_fp64_pct": "%",
    "pipe_tensor_pct": "%",
    "pipe_lsu_pct": "%",
    "tensor_instructions": "inst",
    "tensor_hmma_instructions": "inst",
    "tensor_gmma_instructions": "inst",
    "tensor_imma_instructions": "inst",
    "instructions_executed": "inst",
    "global_load_instructions": "inst",
    "global_store_instructions": "inst",
    "shared_load_instructions": "inst",
    "shared_store_instructions": "inst",
    "global_atomic_instructions": "inst",
    "fp32_nonfused_pct": "%",
    "tail_effect_pct": "%",
    "occupancy_limit_registers": "block",
    "occupancy_limit_shared_mem": "block",
    "occupancy_limit_warps": "block",
    "occupancy_limit_blocks": "block",
    "fp32_flop": "flop",
    "fp64_flop": "flop",
    "fp16_flop": "flop",
    "tensor_flop": "flop",
    "fp32_flop_per_s": "flop/s",
    "fp64_flop_per_s": "flop/s",
    "fp16_flop_per_s": "flop/s",
    "tensor_flop_per_s": "flop/s",
    "peak_fp32_flop_per_s": "flop/s",
    "peak_fp64_flop_per_s": "flop/s",
    "peak_fp16_flop_per_s": "flop/s",
    "peak_tensor_flop_per_s": "flop/s",
    "peak_dram_byte_per_s": "byte/s",
}
SCALAR = [name for name in REQUIRED if isinstance(CATALOG[name], Figure)]


def _python_eval(formula, inputs):
    """Python's own arithmetic on the inputs; no value where Python divides by zero or an input is missing."""
    if any(value is None for value in inputs.values()):
        return None
    try:
        return eval(formula, {"__builtins__": {}, "min": min, "max": max, "abs": abs}, inputs)
    except ZeroDivisionError:
        return None


def test_every_requested_name_is_declared_with_unit_meaning_and_group():
    for name, unit in REQUIRED.items():
        entry = CATALOG[name]
        assert entry.unit == unit, name
        assert entry.meaning and entry.group and entry.label, name


# Reports of profsvc's default metric set, which leaves out the GMMA cross-check counter (--set full has it).
DEFAULT_SET = {"seed47_default.ncu-rep", "seed47_primed.ncu-rep"}


@pytest.mark.parametrize("report", REPORTS, ids=report_id)
def test_the_opcode_breakdown_is_complete_and_agrees_with_the_gmma_counter(reader, report):
    for kernel, action in kernel_actions(reader, report):
        per_opcode = action.metric_by_name("sass__inst_executed_per_opcode")
        # ncu lists every opcode that ran, so the instances add up to all instructions executed.
        total = sum(per_opcode.value(i) for i in range(per_opcode.num_instances()))
        assert total == action.metric_by_name("smsp__inst_executed.sum").value()
        gmma = action.metric_by_name("smsp__sass_inst_executed_op_shared_gmma.sum")
        assert (gmma is None) == (report.name in DEFAULT_SET), report.name
        if gmma is not None:
            assert kernel.value("tensor_gmma_instructions") == gmma.value()


def test_fixture_facts_the_figures_must_show():
    seed, big = analyze_report(SEED).kernels[0], analyze_report(BIG).kernels[0]
    # relu(x) * 2 over 2^28 floats: one FADD (x + x) per element, no other FP32 add, mul or fma.
    assert big.value("fp32_flop") == 2**28
    assert big.value("fp32_nonfused_pct") == 100.0
    assert big.value("dram_bytes") == big.value("dram_bytes_read") + big.value("dram_bytes_write")
    # 1056 blocks at 4 blocks/SM on 132 SMs: exactly 2 waves, nothing idle; the seed's 96 blocks fill 8 % of one.
    assert big.value("tail_effect_pct") == 0.0
    assert math.isclose(seed.value("tail_effect_pct"), 100 * (1 - 96 / (132 * 9)))
    # FADD + FMUL + 2 FFMA thread instructions as ncu counted them per opcode.
    assert math.isclose(seed.value("fp32_flop"), 87360 + 2 * 86016)
    for kernel in (seed, big):
        assert kernel.value("tensor_instructions") == 0.0
        assert kernel.value("branch_uniformity_pct") == 100.0
        assert kernel.value("shared_bank_conflict_pct") == 0.0
        assert 0 < kernel.value("active_threads_per_warp") <= 32
        # L2 traffic is 32 bytes per lts2xbar cycle: a whole number of sectors up to float rounding.
        assert math.isclose(kernel.value("l2_bytes") / 32, round(kernel.value("l2_bytes") / 32), abs_tol=1e-3)


# Synthetic inputs that exercise each formula's edges: zero denominators, whole and partial waves.
SYNTHETIC = [
    {"ld_conflicts": 0.0, "st_conflicts": 0.0, "ld_wavefronts": 0.0, "st_wavefronts": 0.0},
    {"ld_conflicts": 30.0, "st_conflicts": 10.0, "ld_wavefronts": 100.0, "st_wavefronts": 60.0},
    {"ld_conflicts": 90.0, "st_conflicts": 0.0, "ld_wavefronts": 50.0, "st_wavefronts": 0.0},
    {"branches": 0.0, "divergent": 0.0},
    {"branches": 200.0, "divergent": 50.0},
    {"fadd": 0.0, "fmul": 0.0, "ffma": 0.0},
    {"fadd": 1.0, "fmul": 1.0, "ffma": 2.0},
    {"waves": 2.0},
    {"waves": 2.25},
    {"waves": 0.5},
]


FORMULAS = [name for name in SCALAR if CATALOG[name].formula]
CASES = [
    (name, values)
    for name in FORMULAS
    for values in (
        *(v for v in SYNTHETIC if set(v) == set(CATALOG[name].inputs)),
        dict.fromkeys(CATALOG[name].inputs, 0.0),
        dict.fromkeys(CATALOG[name].inputs, 3.0),
    )
]


@pytest.mark.parametrize(("name", "values"), CASES)
def test_formulas_match_python_on_synthetic_edges(name, values):
    figure = CATALOG[name]
    ours = figure.evaluator(values)
    assert ours == _python_eval(figure.formula, values)
    if figure.unit == "%" and ours is not None:
        assert 0.0 <= ours <= 100.0


def test_percentage_edge_values():
    assert CATALOG["shared_bank_conflict_pct"].evaluator(SYNTHETIC[1]) == 25.0
    assert CATALOG["shared_bank_conflict_pct"].evaluator(SYNTHETIC[2]) == 100.0
    assert CATALOG["branch_uniformity_pct"].evaluator(SYNTHETIC[3]) == 100.0
    assert CATALOG["branch_uniformity_pct"].evaluator(SYNTHETIC[4]) == 75.0
    assert CATALOG["fp32_nonfused_pct"].evaluator(SYNTHETIC[5]) is None
    assert CATALOG["fp32_nonfused_pct"].evaluator(SYNTHETIC[6]) == 50.0
    tail = CATALOG["tail_effect_pct"].evaluator
    assert [tail(v) for v in SYNTHETIC[7:]] == [0.0, 75.0, 50.0]


def test_modulo_and_floor_division():
    assert compile_expr("x // 1")({"x": 2.5}) == 2.0
    assert compile_expr("-(-x // 1)")({"x": 2.5}) == 3.0
    assert compile_expr("x % 1")({"x": 2.25}) == 0.25
    assert compile_expr("x % y")({"x": 1.0, "y": 0.0}) is None
    assert compile_expr("x // y")({"x": 1.0, "y": 0.0}) is None
    assert compile_expr("x % y")({"x": None, "y": 2.0}) is None


class _Ids:
    def __init__(self, ids):
        self._ids = ids

    def value(self, index):
        return self._ids[index]


class _Metric:
    def __init__(self, instances):
        self._ids, self._values = list(instances), list(instances.values())

    def correlation_ids(self):
        return _Ids(self._ids)

    def num_instances(self):
        return len(self._values)

    def value(self, index=None):
        return sum(self._values) if index is None else self._values[index]


class _Action:
    def __init__(self, metrics):
        self._metrics = metrics

    def metric_by_name(self, name):
        return self._metrics.get(name)


def test_breakdown_sums_listed_instances_and_counts_absent_ones_as_zero():
    action = _Action({"sass__inst_executed_per_opcode": _Metric({"HGMMA": 64.0, "HMMA": 8.0, "FFMA": 1000.0})})
    assert breakdown_value(action, CATALOG["tensor_instructions"]) == 72.0
    assert breakdown_value(action, CATALOG["tensor_gmma_instructions"]) == 64.0
    assert breakdown_value(action, CATALOG["tensor_hmma_instructions"]) == 8.0
    assert breakdown_value(action, CATALOG["tensor_imma_instructions"]) == 0.0
    assert breakdown_value(_Action({}), CATALOG["tensor_instructions"]) is None


BREAKDOWN = {
    "name": "hmma",
    "label": "HMMA",
    "unit": "inst",
    "better": "none",
    "group": "instructions",
    "meaning": "HMMA instructions",
    "metric": ["sass__inst_executed_per_opcode"],
    "instances": ["HMMA"],
}
FIGURE = {
    "name": "hmma",
    "label": "x",
    "unit": "1",
    "better": "none",
    "group": "g",
    "meaning": "m",
    "metric": ["m"],
}


@pytest.mark.parametrize(
    ("change", "message"),
    [({"instances": []}, "instances"), ({"metric": []}, "metric"), ({"formula": "a"}, "formula")],
)
def test_malformed_breakdown_is_rejected_naming_it(change, message):
    with pytest.raises(CatalogError, match=message) as caught:
        parse_catalog({"figure": [{**FIGURE, "name": "other"}], "breakdown": [{**BREAKDOWN, **change}]})
    assert "'hmma'" in str(caught.value)


def test_whole_is_refused_on_a_direct_metric():
    with pytest.raises(CatalogError, match="whole"):
        parse_catalog({"figure": [{**FIGURE, "whole": True}]})


def test_a_count_rebuilt_from_a_rate_is_whole_and_the_same_in_every_report_of_the_kernel():
    # The primed worker's report (H200) gives (fadd + fmul + 2 ffma) per cycle x cycles = 259392.00000000003,
    # the plain ncu runs 259392: a count is a whole number, and one kernel's count does not vary by run.
    reports = [FIXTURES / f"seed47_{name}.ncu-rep" for name in ("default", "full", "lineinfo")] + [PRIMED]
    values = {
        next(k for k in analyze_report(report).kernels if k.name == "vga_linear_kernel").value("fp32_flop")
        for report in reports
    }
    assert len(values) == 1 and next(iter(values)).is_integer(), values


def test_a_breakdown_cannot_reuse_a_figure_name():
    with pytest.raises(CatalogError, match="defined twice"):
        parse_catalog({"figure": [FIGURE], "breakdown": [BREAKDOWN]})


def test_catalog_lookup_covers_figures_and_breakdowns():
    assert "tensor_instructions" in CATALOG and "duration" in CATALOG
    assert list(CATALOG.entries)[: len(CATALOG.figures)] == [f.name for f in CATALOG.figures]
    assert "sass__inst_executed_per_opcode" in CATALOG.metric_names()


def _limits(**values):
    names = {
        "registers": "occupancy_limit_registers",
        "shared_memory": "occupancy_limit_shared_mem",
        "warps": "occupancy_limit_warps",
        "blocks": "occupancy_limit_blocks",
        "barriers": "occupancy_limit_barriers",
    }
    return {names[k]: FigureValue(value=v, unit="block") for k, v in values.items()}


def test_occupancy_limiter_is_the_smallest_limit_with_documented_ties():
    assert occupancy_limiter(_limits(registers=2, shared_memory=3, warps=8, blocks=32, barriers=32)) == "registers"
    assert occupancy_limiter(_limits(registers=9, shared_memory=1, warps=8, blocks=32, barriers=32)) == "shared_memory"
    assert occupancy_limiter(_limits(registers=9, shared_memory=9, warps=8, blocks=32, barriers=2)) == "barriers"
    # Ties: warps before blocks before registers before shared memory before barriers.
    assert occupancy_limiter(_limits(registers=4, shared_memory=4, warps=4, blocks=4, barriers=4)) == "warps"
    assert occupancy_limiter(_limits(registers=4, shared_memory=4, warps=8, blocks=4, barriers=4)) == "blocks"
    assert occupancy_limiter(_limits(registers=4, shared_memory=4, warps=8, blocks=8, barriers=4)) == "registers"
    assert occupancy_limiter(_limits(registers=None, warps=None)) == ""
    assert occupancy_limiter({}) == ""


def test_fixture_occupancy_limiters():
    # seed: 224-thread blocks fit 9 times in 64 warps, registers allow 12; big: warps and registers both allow 4.
    assert analyze_report(SEED).kernels[0].occupancy_limiter == "warps"
    assert analyze_report(BIG).kernels[0].occupancy_limiter == "warps"
