"""The hint rules: the table is strict at load, the engine follows its semantics, and the hints fit the real kernels.

Acceptance on the committed H200 reports: seed47 (96 blocks for 132 SMs, waiting on
global loads) leads with the small grid and the long-scoreboard stall; big (a float4
relu stream at 82 % of DRAM peak, 16 sectors per request) leads with DRAM near peak and
has no coalescing or bank-conflict hint. Archetype reports (tests/fixtures/archetypes/),
one planted problem each, are checked the same way.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profsvc.metrics.analysis import analyze_report
from profsvc.metrics.catalog import Catalog, load_catalog, parse_catalog
from profsvc.metrics.tables import load_table
from profsvc.rules import (
    RuleTable,
    RuleTableError,
    UnknownFigureError,
    evaluate_rules,
    load_rules,
    parse_rules,
    rank_hints,
)
from profsvc.rules.engine import NO_ESTIMATE
from profsvc.rules.variables import STALL_REASONS, kernel_variables
from profsvc_contract.models import FigureValue, Hint, KernelResult, NcuRuleResult, Roofline, SourceHotspot, StallReason
from tests.conftest import kernel_actions

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ARCHETYPES = FIXTURES / "archetypes"

# Archetype report -> the rule that names its planted problem (examples/archetypes/README.md); None: nothing
# planted. The float4 stream's lever is the same as big's: it runs at the DRAM roof.
PLANTED = {
    "stream_float4": "dram_near_peak",
    "strided_read": "uncoalesced_global_loads",
    "bank_conflicts": "shared_bank_conflicts",
    "warp_divergence": "warp_divergence",
    "fma_bound": "compute_near_peak",
    "register_spill": "local_memory_spills",
    "hot_atomic": "atomic_contention",
    "tiny_grid": "small_grid",
    "smem_occupancy": "occupancy_shared_memory",
    "tensor_gemm": None,
}
UNCOALESCED = {
    "uncoalesced_global_loads",
    "uncoalesced_global_stores",
    "UncoalescedGlobalAccess",
    "MemoryCacheAccessPattern",
}
BANK_CONFLICTS = {"shared_bank_conflicts", "SharedMemoryConflicts", "UncoalescedSharedAccess"}


@pytest.fixture(scope="module")
def rules() -> RuleTable:
    """The shipped rule table: one naming a figure the catalog lacks fails to load, and every test using it fails."""
    return load_rules()


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _kernel(path: Path) -> KernelResult:
    """The launch that ran longest: the kernel a fixture was made to profile."""
    kernels = analyze_report(path).kernels
    return max(kernels, key=lambda k: k.value("duration") or 0.0)


def _kernel_and_action(reader, path: Path) -> tuple[KernelResult, Any]:
    """The longest launch with ncu_report's action of it."""
    return max(kernel_actions(reader, path), key=lambda pair: pair[0].value("duration") or 0.0)


@pytest.fixture(scope="module")
def seed47() -> KernelResult:
    return _kernel(FIXTURES / "seed47_full.ncu-rep")


@pytest.fixture(scope="module")
def big() -> KernelResult:
    return _kernel(FIXTURES / "big_full.ncu-rep")


# ---- the table is strict ---------------------------------------------------------------------------------------

TINY_CATALOG = parse_catalog(
    {
        "figure": [
            {"name": n, "label": n, "unit": u, "better": "none", "group": "g", "meaning": n, "metric": [f"m_{n}"]}
            for n, u in (("alpha", "%"), ("beta", "byte"), ("gamma", "cycle"))
        ]
    }
)
DOCS = "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html#roofline"


def _rule(**change) -> dict:
    rule = {
        "id": "alpha_high",
        "title": "Alpha is high",
        "condition": "alpha > limit",
        "speedup": "alpha - limit",
        "message": "alpha is {alpha} (limit {limit}) with {beta}",
        "advice": "Lower alpha.",
        "docs": DOCS,
        "evidence": ["alpha", "beta"],
        "params": {"limit": 50},
    }
    rule.update(change)
    return rule


SEVERITY = {"high_pct": 20, "medium_pct": 5}


def _table(*entries: dict, catalog: Catalog = TINY_CATALOG) -> RuleTable:
    return parse_rules({"rule": list(entries), "priority": SEVERITY}, catalog)


def test_a_small_table_loads_parents_first():
    table = _table(_rule(id="child", parent="parent"), _rule(id="parent"))
    assert [r.id for r in table.rules] == ["parent", "child"]
    assert table.ancestors["child"] == ("parent",)
    assert table.units["alpha"] == "%" and table.units["stall_wait_pct"] == "%"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"condition": "alpha >"}, "cannot parse"),
        ({"speedup": "alpha ** 2"}, "unsupported syntax"),
        ({"severity": "high"}, "severity"),  # the label is read off the estimate, never declared
        ({"id": "Not Snake"}, "snake_case"),
        ({"docs": "https://example.com/blog"}, "NVIDIA documentation"),
        ({"evidence": []}, "evidence"),
        ({"message": "alpha is {alpha:.1f}"}, "plain"),
        ({"source_stall": "coffee_break"}, "not a stall reason"),
        ({"covers_ncu": [":Title only"]}, "RuleId"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_malformed_rule_is_rejected_naming_it(change, message):
    with pytest.raises(RuleTableError, match=message) as caught:
        _table(_rule(**change))
    assert repr(_rule(**change)["id"]) in str(caught.value)


@pytest.mark.parametrize("field", ["title", "condition", "speedup", "message", "advice", "docs", "evidence"])
def test_missing_field_is_rejected_naming_the_rule(field):
    entry = _rule()
    del entry[field]
    with pytest.raises(RuleTableError, match=f"rule 'alpha_high': {field}: Field required"):
        _table(entry)


def test_unknown_figures_are_collected_per_rule():
    with pytest.raises(UnknownFigureError) as caught:
        _table(_rule(condition="alpha > limit and delta > 1"), _rule(id="other", evidence=["epsilon"]))
    error = caught.value
    assert error.unknown_names == {"delta", "epsilon"}
    assert error.unknown_by_rule == {"alpha_high": {"delta"}, "other": {"epsilon"}}
    assert "rule 'alpha_high': unknown figure(s) delta" in str(error)


def test_a_message_placeholder_must_be_known():
    with pytest.raises(UnknownFigureError, match=r"'alpha_high'.*zeta"):
        _table(_rule(message="alpha is {zeta}"))


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([_rule(), _rule()], "'alpha_high' is defined twice"),
        ([_rule(parent="nobody")], "'alpha_high': parent 'nobody' is not in the table"),
        ([_rule(id="a", parent="b"), _rule(id="b", parent="a")], "loops back"),
        ([_rule(params={"alpha": 1})], "'alpha_high': param.*alpha.*shadow"),
        ([], "no \\[\\[rule\\]\\] entries"),
    ],
)
def test_table_level_errors_name_the_rule(entries, message):
    with pytest.raises(RuleTableError, match=message):
        _table(*entries)


@pytest.mark.parametrize(
    ("severity", "message"),
    [
        ({"high_pct": 5, "medium_pct": 20}, "medium_pct must not exceed high_pct"),
        ({"high_pct": 20}, "medium_pct"),
        ({"high_pct": 0, "medium_pct": 0}, "high_pct"),
        ({"high_pct": 20, "medium_pct": 5, "low_pct": 1}, "low_pct"),
    ],
)
def test_malformed_severity_thresholds_are_named(severity, message):
    with pytest.raises(RuleTableError, match=message):
        parse_rules({"rule": [_rule()], "priority": severity}, TINY_CATALOG)


def test_shipped_table_loads_against_the_loaded_catalog(rules, catalog):
    assert len(rules.rules) >= 25
    for rule in rules.rules:
        assert rule.variable_names() <= set(catalog.entries) | set(rules.units), rule.id


def test_shipped_table_covers_ncu_guided_analysis(rules):
    expected = {
        "latency_bound",
        "small_grid",
        "grid_under_one_wave",
        "tail_effect",
        "dram_near_peak",
        "compute_near_peak",
        "issue_slot_utilization",
        "achieved_occupancy_gap",
        "occupancy_registers",
        "occupancy_shared_memory",
        "occupancy_block_size",
        *(f"stall_{r}" for r in ("long_scoreboard", "short_scoreboard", "mio_throttle", "barrier")),
        *(f"stall_{r}" for r in ("branch_resolving", "math_pipe_throttle", "lg_throttle", "not_selected", "wait")),
        "uncoalesced_global_loads",
        "uncoalesced_global_stores",
        "shared_bank_conflicts",
        "local_memory_spills",
        "fp32_non_fused",
        "tensor_cores_idle",
        "low_l2_hit_rate",
        "atomic_contention",
        "warp_divergence",
    }
    assert expected <= set(rules.by_id)


def test_shipped_table_has_no_magic_thresholds_in_conditions(rules):
    # Thresholds are named params; the only numbers left in conditions are 0, 1 (flags, ceil) and 100 (percent scale).
    for rule in rules.rules:
        numbers = {
            node.value
            for node in ast.walk(ast.parse(rule.condition, mode="eval"))
            if isinstance(node, ast.Constant) and isinstance(node.value, int | float)
        }
        assert numbers <= {0, 1, 100}, f"{rule.id}: {numbers}"


# ---- the engine ------------------------------------------------------------------------------------------------


def _synthetic(figures: dict[str, float | None], **fields) -> KernelResult:
    return KernelResult(name="k", figures={n: FigureValue(value=v, unit="") for n, v in figures.items()}, **fields)


def test_variables_from_stalls_roofline_and_limiter(catalog):
    bare = kernel_variables(_synthetic({}), catalog)
    assert all(bare[f"stall_{r}_pct"] is None for r in STALL_REASONS)
    assert bare["roofline_dram"] is None and bare["limiter_registers"] is None
    assert bare["stall_share_total_pct"] is None and bare["roofline_precision_flop"] is None
    assert all(bare[name] is None for name in catalog.entries)

    kernel = _synthetic(
        {},
        stalls=[StallReason(reason="long_scoreboard", share_pct=70.0, cycles_per_issue=7.0)],
        roofline=Roofline(bound="dram", roof_pct=81.0, bound_pct=83.0, precision="fp32"),
        occupancy_limiter="shared_memory",
    )
    values = kernel_variables(kernel, catalog)
    assert values["stall_long_scoreboard_pct"] == 70.0 and values["stall_long_scoreboard_cycles"] == 7.0
    assert values["stall_barrier_pct"] == 0.0  # the kernel has stall data: an unlisted reason did not occur
    assert (values["roofline_dram"], values["roofline_compute"], values["roofline_pct"]) == (1.0, 0.0, 81.0)
    assert values["roofline_bound_pct"] == 83.0 and values["stall_share_total_pct"] == 70.0
    assert values["roofline_precision_flop"] == 0.0  # fp32 placed it, and the kernel has no fp32_flop figure
    assert (values["limiter_shared_memory"], values["limiter_registers"]) == (1.0, 0.0)


def test_missing_figures_never_fire_and_never_crash(rules, catalog):
    assert evaluate_rules(_synthetic({}), catalog, rules) == []
    every_figure_none = _synthetic(dict.fromkeys(catalog.entries))
    assert evaluate_rules(every_figure_none, catalog, rules) == []


def test_zero_denominators_do_not_crash(rules, catalog):
    zeros = _synthetic(dict.fromkeys(catalog.entries, 0.0), stalls=[StallReason(reason="wait", share_pct=100.0)])
    for hint in evaluate_rules(zeros, catalog, rules):
        assert 0.0 <= hint.estimated_speedup_pct <= 100.0


FAMILY = (
    _rule(id="root", condition="alpha > 50", speedup="100 - alpha", message="{alpha}", evidence=["alpha"], params={}),
    _rule(
        id="mid", parent="root", condition="beta > 0", speedup="beta", message="{beta}", evidence=["beta"], params={}
    ),
    _rule(
        id="leaf",
        parent="mid",
        condition="gamma > 0",
        speedup="gamma",
        message="{gamma}",
        evidence=["gamma"],
        params={},
    ),
)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # Only the root fires: it is reported with its own estimate.
        ({"alpha": 60.0, "beta": 0.0, "gamma": 0.0}, [("root", 40.0)]),
        # A child fires: the parent is folded into it, and the child's estimate is capped by the parent's.
        ({"alpha": 60.0, "beta": 90.0, "gamma": 0.0}, [("mid", 40.0)]),
        # The cap holds down the chain, and a parent caps its children even when it does not fire itself.
        ({"alpha": 20.0, "beta": 90.0, "gamma": 85.0}, [("leaf", 80.0)]),
        ({"alpha": 20.0, "beta": 30.0, "gamma": 85.0}, [("leaf", 30.0)]),
        # Estimates are clamped to 0..100.
        ({"alpha": 400.0, "beta": 0.0, "gamma": 0.0}, [("root", 0.0)]),
    ],
)
def test_parent_caps_and_folds(values, expected):
    table = _table(*FAMILY)
    hints = evaluate_rules(_synthetic(values), TINY_CATALOG, table)
    assert [(h.rule_id, h.estimated_speedup_pct) for h in hints] == expected


# Rules no committed report triggers: a synthetic kernel that shows the problem, and a near miss that does not.
SYNTHETIC = {
    "tensor_cores_idle": (
        {"pipe_fma_pct": 85.0, "fp32_flop": 1e12, "fp16_math_flop": 0.0, "tensor_instructions": 0.0},
        {"tensor_instructions": 4096.0},
    ),
    "low_l2_hit_rate": (
        {"l2_hit_rate_pct": 30.0, "dram_throughput_pct": 70.0, "l1_bytes": 8e9, "dram_bytes_read": 1e9},
        {"l1_bytes": 1e9},  # a stream consumes each byte once: nothing to reuse, so no claim
    ),
    "fp32_non_fused": ({"fp32_nonfused_pct": 60.0, "pipe_fma_pct": 70.0}, {"pipe_fma_pct": 5.0}),
    "tail_effect": ({"waves_per_sm": 1.25, "tail_effect_pct": 75.0}, {"waves_per_sm": 8.25}),
    "uncoalesced_global_stores": (
        {"global_store_sectors_per_request": 32.0},
        {"global_store_sectors_per_request": 16.0},
    ),
    "local_memory_arrays": (
        {
            "local_load_instructions": 4e6,
            "local_store_instructions": 1e6,
            "spill_instructions": 0.0,
            "local_memory_bytes": 3.2e9,
            "local_traffic_pct": 60.0,
        },
        {"spill_instructions": 5e6},  # every local access a spill or fill: the spill rule's case, not this one
    ),
}
SYNTHETIC_BASE = {"shared_load_instructions": 1e6, "memory_throughput_pct": 50.0, "sm_throughput_pct": 70.0}


@pytest.mark.parametrize("rule_id", sorted(SYNTHETIC))
def test_rule_fires_on_its_problem_and_not_on_a_near_miss(rules, catalog, rule_id):
    shows, near_miss = SYNTHETIC[rule_id]
    fired = {h.rule_id: h for h in evaluate_rules(_synthetic(SYNTHETIC_BASE | shows), catalog, rules)}
    assert rule_id in fired and fired[rule_id].estimated_speedup_pct > 0
    missed = evaluate_rules(_synthetic(SYNTHETIC_BASE | shows | near_miss), catalog, rules)
    assert rule_id not in {h.rule_id for h in missed}


def test_hint_quotes_figures_with_units_and_cites_source_lines():
    table = _table(_rule(source_stall="long_scoreboard"))
    hotspots = [
        SourceHotspot(file="k.cu", line=12, top_stall="long_scoreboard"),
        SourceHotspot(file="k.cu", line=30, top_stall="barrier"),
        SourceHotspot(file="k.cu", line=14, top_stall="long_scoreboard"),
    ]
    kernel = _synthetic({"alpha": 72.5, "beta": 38400.0}, hotspots=hotspots)
    [hint] = evaluate_rules(kernel, TINY_CATALOG, table)
    assert hint.origin == "profsvc" and hint.severity == "high" and hint.docs == DOCS
    assert hint.message == "alpha is 72.5 % (limit 50) with 38.4 kB"
    assert [(e.figure, e.value, e.unit) for e in hint.evidence] == [("alpha", 72.5, "%"), ("beta", 38400.0, "byte")]
    assert hint.source_lines == ["k.cu:12", "k.cu:14"]
    assert hint.estimated_speedup_pct == pytest.approx(22.5)


def test_a_rule_without_an_estimate_still_fires_and_says_so():
    table = _table(_rule(speedup="gamma"))
    [hint] = evaluate_rules(_synthetic({"alpha": 60.0}), TINY_CATALOG, table)
    assert hint.estimated_speedup_pct == 0.0 and hint.message.endswith(NO_ESTIMATE)


def test_ncu_results_merge_without_duplicates():
    table = _table(_rule(covers_ncu=["CPIStall:Long Scoreboard Stalls", "AchievedOccupancy"]))
    ncu = [
        NcuRuleResult(
            rule_id="CPIStall",
            title="Long Scoreboard Stalls",
            type="OPT",
            estimated_speedup_pct=56.0,
            speedup_type="global",
        ),
        NcuRuleResult(
            rule_id="CPIStall",
            title="Lg Throttle Stalls",
            type="OPT",
            estimated_speedup_pct=30.0,
            speedup_type="global",
            message="See https://docs.nvidia.com/x for more.",
        ),
        NcuRuleResult(rule_id="AchievedOccupancy", type="OPT", estimated_speedup_pct=80.0, speedup_type="global"),
        NcuRuleResult(
            rule_id="IssueSlotUtilization",
            type="OPT",
            estimated_speedup_pct=96.0,
            speedup_type="local",
            message="Issues rarely.",
        ),
        NcuRuleResult(rule_id="PMSamplingData", type="WRN", message="Few samples."),
        NcuRuleResult(rule_id="SOLBottleneck", title="High Throughput", type="OK", message="Fine."),
    ]
    hints = evaluate_rules(_synthetic({"alpha": 60.0}, ncu_rules=ncu), TINY_CATALOG, table)
    assert [(h.origin, h.rule_id, h.title) for h in hints] == [
        ("ncu", "CPIStall", "Lg Throttle Stalls"),
        ("profsvc", "alpha_high", "Alpha is high"),
        ("ncu", "IssueSlotUtilization", "IssueSlotUtilization"),
        ("ncu", "PMSamplingData", "PMSamplingData"),
    ]
    lg, _, issue, _ = hints
    assert lg.docs == "https://docs.nvidia.com/x"
    # A local estimate is no runtime reduction: it ranks as unknown and the message says what it was.
    assert issue.estimated_speedup_pct == 0.0 and "96 % for that unit alone" in issue.message
    # Labels follow the estimates: 30 % is high (>= 20), 10 % medium (alpha 60 against 50), 0 % low.
    assert [h.severity for h in hints] == ["high", "medium", "low", "low"]


def test_rank_hints_orders_by_speedup_then_origin_then_input_order():
    hints = [
        Hint(rule_id="a", origin="ncu", estimated_speedup_pct=10.0),
        Hint(rule_id="b", origin="profsvc", estimated_speedup_pct=10.0),
        Hint(rule_id="c", origin="profsvc", estimated_speedup_pct=10.0),
        Hint(rule_id="d", origin="profsvc", estimated_speedup_pct=50.0),
    ]
    assert [h.rule_id for h in rank_hints(hints)] == ["d", "b", "c", "a"]
    assert [h.rule_id for h in rank_hints(hints, 2)] == ["d", "b"]


# ---- acceptance on the real reports ------------------------------------------------------------------------------


def test_seed47_leads_with_the_small_grid_and_the_long_scoreboard_stall(rules, catalog, seed47):
    hints = evaluate_rules(seed47, catalog, rules)
    assert {h.rule_id for h in hints[:2]} == {"small_grid", "stall_long_scoreboard"}
    small_grid = next(h for h in hints if h.rule_id == "small_grid")
    assert "96 block" in small_grid.message and "132 SM" in small_grid.message
    assert small_grid.estimated_speedup_pct == pytest.approx(100 * 36 / 132)
    stall = next(h for h in hints if h.rule_id == "stall_long_scoreboard")
    # ncu's own CPIStall estimate for the same stall (24.6 of 43.6 cycles), which the merge dropped as covered.
    assert stall.estimated_speedup_pct == pytest.approx(56.4, abs=0.1)
    assert not any(h.origin == "ncu" and h.title == "Long Scoreboard Stalls" for h in hints)
    # The generic parents (latency-bound, issue slots) are folded into their specific children.
    assert not {"latency_bound", "issue_slot_utilization"} & {h.rule_id for h in hints}


def test_big_leads_with_dram_near_peak_and_claims_no_access_problem(rules, catalog, big):
    hints = evaluate_rules(big, catalog, rules)
    assert hints[0].rule_id == "dram_near_peak"
    assert hints[0].evidence[0].figure == "dram_throughput_pct" and hints[0].evidence[0].value > 80
    assert not UNCOALESCED & {h.rule_id for h in hints}
    assert not BANK_CONFLICTS & {h.rule_id for h in hints}


def test_hints_are_json_ready(rules, catalog, seed47, big):
    for kernel in (seed47, big):
        for hint in evaluate_rules(kernel, catalog, rules):
            assert Hint.model_validate_json(hint.model_dump_json()) == hint
            assert hint.title and hint.message and hint.docs.startswith("https://")


@pytest.mark.parametrize("name", sorted(n for n, rule in PLANTED.items() if rule))
def test_archetype_planted_problem_ranks_first_or_second(rules, catalog, name):
    path = ARCHETYPES / f"{name}.ncu-rep"
    hints = evaluate_rules(_kernel(path), catalog, rules)
    assert PLANTED[name] in [h.rule_id for h in hints[:2]], [h.rule_id for h in hints[:5]]


class Raw:
    """ncu_report's counters of one launch by name: the claims below read these, never the figure the rule read."""

    def __init__(self, action: Any) -> None:
        self._action = action

    def get(self, name: str) -> float | None:
        metric = self._action.metric_by_name(name)
        return None if metric is None else float(metric.value())

    def __call__(self, name: str) -> float:
        value = self.get(name)
        assert value is not None, f"the report has no {name}"
        return value


def _onchip_pcts(m: Raw) -> tuple[float, float, float]:
    """% of peak over the elapsed cycles: L1/TEX (ncu shows it over its active cycles), L2 tag lookups, L2 input."""
    l1 = m("l1tex__throughput.avg.pct_of_peak_sustained_active") * m("l1tex__cycles_active.avg")
    return (
        l1 / m("l1tex__cycles_elapsed.avg"),
        m("lts__t_tag_requests.avg.pct_of_peak_sustained_elapsed"),
        m("lts__xbar2lts_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    )


def _dram_pct(m: Raw) -> float:
    """DRAM bytes per second as % of the DRAM's peak."""
    peak = m("dram__bytes.sum.peak_sustained") * m("dram__cycles_elapsed.avg.per_second")
    return 100 * m("dram__bytes.sum.per_second") / peak


# What each problem hint asserts about the kernel, checked on other counters than the figures the rule reads.
CLAIMS: dict[str, Callable[[Raw], bool]] = {
    # More L1 data-stage passes per warp load than the 4 a coalesced warp of 16-byte loads needs.
    "uncoalesced_global_loads": lambda m: (
        m("l1tex__t_output_wavefronts_pipe_lsu_mem_global_op_ld.sum")
        > 4 * m("smsp__sass_inst_executed_op_global_ld.sum")
    ),
    # L2 took more 32-byte write sectors per warp store than a warp of 16-byte stores fills (16).
    "uncoalesced_global_stores": lambda m: (
        m("lts__t_sectors_srcunit_tex_op_write.sum") > 16 * m("smsp__sass_inst_executed_op_global_st.sum")
    ),
    # ncu's bank-conflict total over all shared-memory operations.
    "shared_bank_conflicts": lambda m: m("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum") > 0,
    # Registers went to local memory: ncu's Memory Workload Analysis counts spilling requests, and local stores ran.
    "local_memory_spills": lambda m: (
        m("derived__local_spilling_requests") > 0 and m("smsp__sass_inst_executed_op_local_st.sum") > 0
    ),
    # More local loads and stores ran than ncu counts as spilling requests (one request per warp instruction).
    "local_memory_arrays": lambda m: (
        m("smsp__sass_inst_executed_op_local_ld.sum") + m("smsp__sass_inst_executed_op_local_st.sum")
        > m("derived__local_spilling_requests")
    ),
    # An on-chip unit, not DRAM, is the busiest and near its peak: L1/TEX or the L2's tag lookups or crossbar input.
    "onchip_memory_near_peak": lambda m: max(_onchip_pcts(m)) >= 60 and max(_onchip_pcts(m)) > _dram_pct(m),
    # Some branch sent the threads of a warp different ways.
    "warp_divergence": lambda m: m("smsp__sass_branch_targets_threads_divergent.sum") > 0,
    # The tensor pipe ran no MMA of any kind.
    "tensor_cores_idle": lambda m: (
        m("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed")
        + m("sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_elapsed")
        == 0
    ),
    # L2 served atomic or reduction requests.
    "atomic_contention": lambda m: (
        m("lts__t_requests_srcunit_tex_op_red.sum")
        + m("lts__t_requests_srcunit_tex_op_atom_dot_alu.sum")
        + m("lts__t_requests_srcunit_tex_op_atom_dot_cas.sum")
        > 0
    ),
    # Some SM had no block at all.
    "small_grid": lambda m: m("sm__cycles_active.min") == 0,
    # DRAM bytes over the duration at 60 % or more of the DRAM peak (ncu's speed-of-light bar for "near").
    "dram_near_peak": lambda m: (
        m("dram__bytes.sum.per_second")
        >= 0.6 * m("dram__bytes.sum.peak_sustained") * m("dram__cycles_elapsed.avg.per_second")
    ),
}
ALL_REPORTS = sorted(FIXTURES.rglob("*.ncu-rep"))


def test_every_claim_reads_counters_a_full_report_has(reader):
    # Some claims guard rules no committed report triggers: their counters must still exist, or they prove nothing.
    raw = Raw(_kernel_and_action(reader, FIXTURES / "seed47_full.ncu-rep")[1])
    assert {rule_id: isinstance(claim(raw), bool) for rule_id, claim in CLAIMS.items()} == dict.fromkeys(CLAIMS, True)


def test_every_committed_archetype_has_a_planted_problem_entry():
    assert {p.stem for p in ARCHETYPES.glob("*.ncu-rep")} == set(PLANTED)


@pytest.mark.parametrize("path", ALL_REPORTS, ids=lambda p: p.stem)
def test_hints_claim_only_problems_the_kernel_has(reader, rules, catalog, path):
    kernel, action = _kernel_and_action(reader, path)
    raw = Raw(action)
    hints = evaluate_rules(kernel, catalog, rules)
    for hint in hints:
        claim = CLAIMS.get(hint.rule_id)
        assert claim is None or claim(raw), f"{hint.rule_id} fired on {path.stem}"
    ids = {h.rule_id for h in hints}
    if path.stem in ("stream_float4", "big_full"):  # 16-byte accesses: 16 sectors per request is ideal
        assert not UNCOALESCED & ids
    # The default metric set lacks ncu's all-operations total: its load and store parts then.
    conflicts = raw.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum")
    if conflicts is None:
        conflicts = sum(raw(f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum") for op in ("ld", "st"))
    if conflicts == 0:
        assert not BANK_CONFLICTS & ids


def test_a_broken_rule_in_the_shipped_file_is_named(catalog):
    data = copy.deepcopy(load_table("rules.toml"))
    data["rule"][0]["condition"] += " and"
    with pytest.raises(RuleTableError, match=repr(data["rule"][0]["id"])):
        parse_rules(data, catalog)


def test_informational_ncu_results_stay_but_rank_last(catalog, rules):
    kernel = analyze_report(FIXTURES / "big_full.ncu-rep").kernels[0]
    hints = evaluate_rules(kernel, catalog, rules)
    compression = next(h for h in hints if h.rule_id == "MemoryL2Compression")
    assert compression.origin == "ncu" and compression.estimated_speedup_pct == 0.0
    assert "outside the kernel's code" in compression.message
    assert [h.rule_id for h in hints[:2]] != ["dram_near_peak", "MemoryL2Compression"]
