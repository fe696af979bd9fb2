"""Each archetype kernel (examples/archetypes) shows its planted problem in its H200 report, and no other does.

The reports are made by tools/capture_archetypes.sh on a GPU host and committed as
tests/fixtures/archetypes/<name>.ncu-rep; a missing one fails. Figures profsvc's catalog
already has are read through analyze_report; the rest straight from ncu_report, by the
metric names of a real --set full report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from profsvc.metrics.analysis import analyze_report
from profsvc_contract.models import KernelResult
from tests.conftest import FIXTURES, first_action

SOURCES = Path(__file__).parents[2] / "examples" / "archetypes"
CAPTURES = FIXTURES / "archetypes"
# Archetype (file stem and NVTX range) -> the kernel it profiles.
KERNELS = {
    "bank_conflicts": "column_sweep",
    "fma_bound": "fma_chains",
    "hot_atomic": "atomic_sum",
    "register_spill": "rotate_mix",
    "smem_occupancy": "staged_sum",
    "stream_float4": "scale_float4",
    "strided_read": "column_gather",
    "tensor_gemm": "wmma_gemm",
    "tiny_grid": "chase",
    "warp_divergence": "split_lanes",
}
ARCHETYPES = tuple(KERNELS)

BANK_CONFLICTS_LD = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
BANK_CONFLICTS_ST = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
SHARED_LD_INST = "smsp__sass_inst_executed_op_shared_ld.sum"
SHARED_ST_INST = "smsp__sass_inst_executed_op_shared_st.sum"
THREADS_PER_INST = "smsp__thread_inst_executed_per_inst_executed.ratio"
FMA_PIPE_PCT = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
TENSOR_PIPE_PCT = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
HMMA_PIPE_PCT = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
LOCAL_SECTORS = ("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum")
LOCAL_INST = ("smsp__sass_inst_executed_op_local_ld.sum", "smsp__sass_inst_executed_op_local_st.sum")
# atomicAdd whose result is unused compiles to RED, not ATOM: count both.
ATOMIC_REQUESTS = (
    "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum",
)
L2_ATOMIC_BUSY = "lts__d_atomic_input_cycles_active.{}.pct_of_peak_sustained_elapsed"
OCCUPANCY_LIMITS = ("registers", "warps", "blocks", "barriers")


def _report(name: str) -> Path:
    return CAPTURES / f"{name}.ncu-rep"


@dataclass
class Capture:
    """One archetype's report: profsvc's reading and ncu_report's action."""

    name: str
    kernels: list[KernelResult]
    action: Any

    def figure(self, figure: str) -> float | None:
        return self.kernels[0].value(figure)

    def metric(self, metric: str) -> float:
        found = self.action.metric_by_name(metric)
        assert found is not None, f"{metric} is not in the {self.name} report"
        return float(found.value())

    def total(self, metrics: tuple[str, ...]) -> float:
        return sum(self.metric(m) for m in metrics)

    def per_instruction(self, events: str, instructions: str) -> float:
        return self.metric(events) / self.metric(instructions)


@pytest.fixture(scope="module")
def captures(reader) -> dict[str, Capture]:
    return {
        name: Capture(name, analyze_report(_report(name), reader=reader).kernels, first_action(reader, _report(name)))
        for name in ARCHETYPES
    }


def others(captures: dict[str, Capture], name: str) -> list[Capture]:
    return [c for n, c in captures.items() if n != name]


def test_every_program_is_listed_and_pushes_a_range_named_after_its_file():
    assert sorted(p.stem for p in SOURCES.glob("*.cu")) == sorted(ARCHETYPES)
    assert sorted(p.stem for p in CAPTURES.glob("*.ncu-rep")) == sorted(ARCHETYPES), "capture_archetypes.sh's reports"
    readme = (SOURCES / "README.md").read_text()
    for name, kernel in KERNELS.items():
        source = (SOURCES / f"{name}.cu").read_text()
        assert re.findall(r'nvtxRangePushA\("([^"]*)"\)', source) == [name]
        assert re.search(rf"__global__ void (__launch_bounds__\([^)]*\) )?{kernel}\(", source)
        assert "Expected in ncu:" in source
        assert f"| `{name}` |" in readme


@pytest.mark.parametrize("name", ARCHETYPES)
def test_report_holds_the_one_launch_inside_the_range(captures, name):
    kernels = captures[name].kernels
    assert len(kernels) == 1, "the warm-up and the fill kernels run outside the range"
    assert kernels[0].nvtx_range == name
    assert kernels[0].demangled_name.startswith(f"{KERNELS[name]}(")


def test_stream_runs_at_dram_peak_with_full_float4_requests(captures):
    stream = captures["stream_float4"]
    assert stream.figure("dram_throughput_pct") > 60
    assert stream.figure("memory_throughput_pct") > stream.figure("sm_throughput_pct")
    # A warp's float4 load is 32 x 16 B = 512 B = 16 sectors of 32 B.
    assert stream.figure("global_load_sectors_per_request") == pytest.approx(16, abs=0.5)
    assert stream.metric(BANK_CONFLICTS_LD) == 0
    assert stream.metric(BANK_CONFLICTS_ST) == 0
    assert stream.metric(THREADS_PER_INST) > 31


def test_strided_read_alone_fetches_a_sector_per_lane(captures):
    assert captures["strided_read"].figure("global_load_sectors_per_request") > 20
    for other in others(captures, "strided_read"):
        sectors = other.figure("global_load_sectors_per_request")
        assert sectors is None or sectors < 20, other.name


def test_bank_conflicts_alone_replay_shared_accesses(captures):
    tile = captures["bank_conflicts"]
    assert tile.metric(SHARED_LD_INST) > 0
    assert tile.metric(SHARED_ST_INST) > 0
    # 32 lanes on one bank: ~31 extra wavefronts per instruction; more than 15 means at least 16-way.
    assert tile.per_instruction(BANK_CONFLICTS_LD, SHARED_LD_INST) > 15
    assert tile.per_instruction(BANK_CONFLICTS_ST, SHARED_ST_INST) > 15
    # Elsewhere fewer conflicts than shared instructions (and none at all without shared memory).
    for other in others(captures, "bank_conflicts"):
        assert other.metric(BANK_CONFLICTS_LD) < max(other.metric(SHARED_LD_INST), 1), other.name
        assert other.metric(BANK_CONFLICTS_ST) < max(other.metric(SHARED_ST_INST), 1), other.name


def test_warp_divergence_alone_runs_half_warps(captures):
    assert captures["warp_divergence"].metric(THREADS_PER_INST) < 20
    for other in others(captures, "warp_divergence"):
        assert other.metric(THREADS_PER_INST) > 28, other.name


def test_fma_loop_keeps_the_fma_pipe_busiest_and_dram_idle(captures):
    fma = captures["fma_bound"]
    assert fma.metric(FMA_PIPE_PCT) > 40
    assert fma.figure("dram_throughput_pct") < 5
    assert fma.metric(TENSOR_PIPE_PCT) == 0
    assert all(other.metric(FMA_PIPE_PCT) < fma.metric(FMA_PIPE_PCT) for other in others(captures, "fma_bound"))


def test_register_spill_alone_touches_local_memory(captures):
    spill = captures["register_spill"]
    assert spill.total(LOCAL_SECTORS) > 0
    assert all(spill.metric(m) > 0 for m in LOCAL_INST)
    for other in others(captures, "register_spill"):
        assert other.total(LOCAL_SECTORS) == 0, other.name
        assert other.total(LOCAL_INST) == 0, other.name


def test_hot_atomic_alone_queues_on_one_l2_slice(captures):
    hot = captures["hot_atomic"]
    assert hot.total(ATOMIC_REQUESTS) > 0
    for other in others(captures, "hot_atomic"):
        assert other.total(ATOMIC_REQUESTS) == 0, other.name
    # One address lives in one L2 slice: its atomic unit works while the others idle.
    busiest, average = hot.metric(L2_ATOMIC_BUSY.format("max")), hot.metric(L2_ATOMIC_BUSY.format("avg"))
    assert busiest > 5 * average > 0


def test_tiny_grid_fills_a_sliver_of_the_gpu(captures):
    tiny = captures["tiny_grid"]
    assert tiny.figure("waves_per_sm") < 0.01
    assert tiny.figure("sm_throughput_pct") < 20
    assert tiny.figure("memory_throughput_pct") < 20
    assert all(other.figure("waves_per_sm") > tiny.figure("waves_per_sm") for other in others(captures, "tiny_grid"))


def test_shared_memory_is_the_tightest_occupancy_limit(captures):
    smem = captures["smem_occupancy"]
    limit = smem.metric("launch__occupancy_limit_shared_mem")
    assert limit < min(smem.metric(f"launch__occupancy_limit_{other}") for other in OCCUPANCY_LIMITS)
    assert smem.figure("theoretical_occupancy_pct") < 50


def test_tensor_gemm_leads_the_tensor_pipe(captures):
    gemm = captures["tensor_gemm"]
    assert gemm.metric(TENSOR_PIPE_PCT) > 2
    assert gemm.metric(HMMA_PIPE_PCT) > 0
    # Measured on the H200: the divergence kernel also shows 3.4 % on this pipe (no HMMA in its SASS),
    # so the WMMA product must lead by a wide margin rather than be the only one above zero.
    for other in others(captures, "tensor_gemm"):
        assert other.metric(TENSOR_PIPE_PCT) < gemm.metric(TENSOR_PIPE_PCT) / 2, other.name
