"""The delta view between two results, and the session store that keeps each session's previous result."""

from __future__ import annotations

from pathlib import Path

import pytest

from profsvc.metrics.analysis import analyze_report
from profsvc.metrics.catalog import load_catalog
from profsvc.report.delta import UNCHANGED_RELATIVE_TOLERANCE, compute_delta
from profsvc.scheduler.sessions import SessionKey, SessionStore
from profsvc_contract.models import FigureValue, KernelResult, ProfileResult

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CATALOG = load_catalog()


def _kernel(name: str, **values: float | None) -> KernelResult:
    return KernelResult(name=name, figures={n: FigureValue(value=v, unit=CATALOG[n].unit) for n, v in values.items()})


def _result(*kernels: KernelResult, job_id: str = "") -> ProfileResult:
    return ProfileResult(ok=True, job_id=job_id, kernels=list(kernels))


def _rows(rows):
    return {(r.kernel, r.figure): r for r in rows}


# ---- deltas ------------------------------------------------------------------------------------------------------


def test_verdicts_follow_the_better_direction_not_the_sign():
    before = _result(_kernel("k", duration=100.0, achieved_occupancy_pct=50.0, registers_per_thread=32.0))
    after = _result(_kernel("k", duration=80.0, achieved_occupancy_pct=40.0, registers_per_thread=32.0))
    rows = _rows(compute_delta(before, after, CATALOG))
    duration = rows["k", "duration"]
    assert (duration.before, duration.after, duration.unit) == (100.0, 80.0, "ns")
    assert duration.change_pct == pytest.approx(-20.0) and duration.verdict == "improved"
    occupancy = rows["k", "achieved_occupancy_pct"]
    assert occupancy.change_pct == pytest.approx(-20.0) and occupancy.verdict == "regressed"
    assert rows["k", "registers_per_thread"].verdict == "unchanged"
    total = rows["", "duration"]
    assert (total.before, total.after, total.verdict) == (100.0, 80.0, "improved")


def test_small_changes_are_unchanged_and_figures_without_direction_only_show_when_changed():
    step = UNCHANGED_RELATIVE_TOLERANCE / 2
    before = _result(_kernel("k", duration=1000.0, grid_size=96.0, sm_count=132.0))
    after = _result(_kernel("k", duration=1000.0 * (1 + step), grid_size=192.0, sm_count=132.0))
    rows = _rows(compute_delta(before, after, CATALOG))
    assert rows["k", "duration"].verdict == "unchanged"
    assert rows["k", "grid_size"].verdict == "" and rows["k", "grid_size"].change_pct == pytest.approx(100.0)
    assert ("k", "sm_count") not in rows


def test_missing_values_and_zero_baselines():
    before = _result(_kernel("k", dram_bytes_read=0.0, dram_bytes_write=0.0, l2_hit_rate_pct=None))
    after = _result(_kernel("k", dram_bytes_read=4096.0, dram_bytes_write=0.0, l2_hit_rate_pct=70.0))
    rows = _rows(compute_delta(before, after, CATALOG))
    read = rows["k", "dram_bytes_read"]
    assert read.change_pct is None and read.verdict == "regressed"
    assert rows["k", "dram_bytes_write"].change_pct == 0.0 and rows["k", "dram_bytes_write"].verdict == "unchanged"
    assert ("k", "l2_hit_rate_pct") not in rows
    assert ("", "duration") not in rows  # no kernel has a duration on either side


def test_launches_match_by_name_and_order_among_same_names():
    before = _result(_kernel("gemm", duration=10.0), _kernel("gemm", duration=20.0), _kernel("gone", duration=5.0))
    after = _result(_kernel("gemm", duration=11.0), _kernel("new", duration=7.0), _kernel("gemm", duration=40.0))
    rows = [r for r in compute_delta(before, after, CATALOG) if r.figure == "duration"]
    assert [(r.kernel, r.before, r.after) for r in rows] == [
        ("gemm", 10.0, 11.0),
        ("gemm", 20.0, 40.0),
        ("", 35.0, 58.0),
    ]


def test_delta_between_two_real_reports():
    seed = analyze_report(FIXTURES / "seed47_full.ncu-rep").kernels[0]
    big = analyze_report(FIXTURES / "big_full.ncu-rep").kernels[0]
    before = _result(seed)
    after = _result(big.model_copy(update={"name": seed.name}))
    rows = _rows(compute_delta(before, after, CATALOG))
    name = seed.name
    assert rows[name, "duration"].verdict == "regressed"  # 2.8 us -> 540 us: lower is better
    assert rows[name, "dram_throughput_pct"].verdict == "improved"  # 0.3 % -> 82 % of peak: higher is better
    assert rows[name, "grid_size"].verdict == ""  # 96 -> 1056 blocks: no better direction
    assert (name, "sm_count") not in rows  # the same GPU
    assert rows["", "duration"].after == big.value("duration")
    for row in rows.values():
        assert row.verdict in {"improved", "regressed", "unchanged", ""}
        entry = CATALOG[row.figure]
        assert row.unit == entry.unit
    shared = {n for n in CATALOG.entries if seed.value(n) is not None and big.value(n) is not None}
    directed = {n for n in shared if CATALOG[n].better != "none"}
    assert directed <= {figure for kernel, figure in rows if kernel == name}


# ---- sessions ----------------------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_swap_returns_the_previous_result():
    store = SessionStore()
    first, second = _result(job_id="a" * 32), _result(job_id="b" * 32)
    assert store.swap("s", first) is None
    assert store.swap("s", second) is first
    assert store.swap("other", first) is None
    assert len(store) == 2


def test_results_expire_after_the_ttl():
    clock = FakeClock()
    store = SessionStore(ttl_seconds=60, clock=clock)
    store.swap("s", _result(job_id="a" * 32))
    clock.now += 59
    assert store.swap("s", _result(job_id="b" * 32)).job_id == "a" * 32
    clock.now += 60
    assert store.swap("s", _result(job_id="c" * 32)) is None
    clock.now += 61
    assert len(store) == 0 and store.bytes_used == 0


def test_least_recently_used_session_goes_first():
    store = SessionStore(max_sessions=2)
    store.swap("a", _result(job_id="1" * 32))
    store.swap("b", _result(job_id="2" * 32))
    store.swap("a", _result(job_id="3" * 32))  # a is now more recent than b
    store.swap("c", _result(job_id="4" * 32))  # evicts b
    assert len(store) == 2
    assert store.swap("b", _result()) is None
    assert store.swap("c", _result()).job_id == "4" * 32


def test_byte_budget_evicts_the_oldest_and_skips_results_larger_than_the_budget():
    small = _result(job_id="0" * 32)
    size = len(small.model_dump_json())
    store = SessionStore(max_bytes=int(2.5 * size))
    store.swap("a", small)
    store.swap("b", small)
    assert store.bytes_used == 2 * size
    store.swap("c", small)  # a third would pass the budget: the oldest goes
    assert store.bytes_used == 2 * size
    assert store.swap("a", small) is None
    huge = _result(_kernel("k", duration=1.0), job_id="1" * 32)
    huge.warnings = ["x" * (3 * size)]
    assert store.swap("c", huge).job_id == "0" * 32  # the previous one is still returned
    assert store.swap("c", small) is None  # the oversized result was not kept


def test_one_identity_naming_many_sessions_evicts_only_its_own():
    store = SessionStore(max_sessions=4)
    bob = SessionKey("bob", "bob-run")
    store.swap(bob, _result(job_id="b" * 32))
    for index in range(260):
        store.swap(SessionKey("alice", f"evict-{index}"), _result(job_id="a" * 32))
    assert len(store) == 5  # alice's four latest and bob's
    assert store.swap(bob, _result()).job_id == "b" * 32
    assert store.swap(SessionKey("alice", "evict-0"), _result()) is None


def test_over_the_byte_budget_the_identity_holding_most_gives_up_its_oldest():
    small = _result(job_id="0" * 32)
    size = len(small.model_dump_json())
    store = SessionStore(max_bytes=int(3.5 * size))
    store.swap(SessionKey("bob", "b"), small)  # the oldest of all, but bob holds the least
    store.swap(SessionKey("alice", "a1"), small)
    store.swap(SessionKey("alice", "a2"), small)
    store.swap(SessionKey("alice", "a3"), small)  # four would pass the budget: alice's a1 goes
    assert store.bytes_used == 3 * size
    assert store.swap(SessionKey("bob", "b"), small) is not None
    assert store.swap(SessionKey("alice", "a1"), small) is None


def test_store_rejects_nonsense_bounds():
    with pytest.raises(ValueError, match="positive"):
        SessionStore(max_sessions=0)
