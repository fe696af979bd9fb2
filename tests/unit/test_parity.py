"""Parity: every catalog figure, on every committed report, against what Nsight Compute itself shows.

No expected value here comes from metrics/catalog.toml:

- ncu's details page (`ncu --import R --page details --csv`, kept beside each report as <stem>_details.csv by
  tools/capture_ncu_pages.sh): SHOWN names the section and label under which ncu shows a figure, and
  _from_the_page rebuilds a few more from what the page shows (the shared memory parts, waves from the block
  limits, DRAM bytes from bandwidth and duration);
- the raw counters by the names written here (RAW), for every figure, those no page shows included, read with
  NVIDIA's ncu_report; where a report's raw page is captured, ncu's own printing of each of those counters
  must agree with the reader;
- first principles for what ncu prints nowhere: the H200's per-SM rates for the peaks (NVIDIA's Hopper
  whitepaper), whole counts, and fixture facts from the kernels' sources.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from profsvc.metrics.catalog import load_catalog
from profsvc_contract.models import KernelResult
from tests.conftest import FIXTURES, REPORTS, analysis_of, kernel_actions, report_id
from tests.ncu_pages import KernelPage, Reading, details_page, pages_of, raw_page

CATALOG = load_catalog()

SOL = "GPU Speed Of Light Throughput"
MEMORY = "Memory Workload Analysis"
SCHEDULER = "Scheduler Statistics"
WARP_STATE = "Warp State Statistics"
INSTRUCTIONS = "Instruction Statistics"
LAUNCH = "Launch Statistics"
OCCUPANCY = "Occupancy"
SOURCE = "Source Counters"
WORKLOAD = "GPU and Memory Workload Distribution"

# Figure -> (section, label, the base unit of the page's value) as ncu 2025.3.1 prints them. Where the page
# states a different unit than the figure, the label says the rest ("per scheduler" is per cycle).
SHOWN: dict[str, tuple[str, str, str]] = {
    "duration": (SOL, "Duration", "ns"),
    "elapsed_cycles": (SOL, "Elapsed Cycles", "cycle"),
    "sm_frequency": (SOL, "SM Frequency", "hz"),
    "sm_throughput_pct": (SOL, "Compute (SM) Throughput", "%"),
    "memory_throughput_pct": (SOL, "Memory Throughput", "%"),
    "dram_throughput_pct": (SOL, "DRAM Throughput", "%"),
    "l2_throughput_pct": (SOL, "L2 Cache Throughput", "%"),
    "l1_hit_rate_pct": (MEMORY, "L1/TEX Hit Rate", "%"),
    "l2_hit_rate_pct": (MEMORY, "L2 Hit Rate", "%"),
    "dram_bandwidth": (MEMORY, "Memory Throughput", "byte/s"),
    "eligible_warps_per_cycle": (SCHEDULER, "Eligible Warps Per Scheduler", "warp"),
    "issued_ipc_per_scheduler": (SCHEDULER, "Issued Warp Per Scheduler", ""),
    "warp_cycles_per_issued_instruction": (WARP_STATE, "Warp Cycles Per Issued Instruction", "cycle"),
    "active_threads_per_warp": (WARP_STATE, "Avg. Active Threads Per Warp", ""),
    "instructions_executed": (INSTRUCTIONS, "Executed Instructions", "inst"),
    "grid_size": (LAUNCH, "Grid Size", ""),
    "block_size": (LAUNCH, "Block Size", ""),
    "registers_per_thread": (LAUNCH, "Registers Per Thread", "register/thread"),
    "shared_mem_static_per_block": (LAUNCH, "Static Shared Memory Per Block", "byte/block"),
    "shared_mem_dynamic_per_block": (LAUNCH, "Dynamic Shared Memory Per Block", "byte/block"),
    "sm_count": (LAUNCH, "# SMs", "SM"),
    "waves_per_sm": (LAUNCH, "Waves Per SM", ""),
    "occupancy_limit_registers": (OCCUPANCY, "Block Limit Registers", "block"),
    "occupancy_limit_shared_mem": (OCCUPANCY, "Block Limit Shared Mem", "block"),
    "occupancy_limit_warps": (OCCUPANCY, "Block Limit Warps", "block"),
    "occupancy_limit_blocks": (OCCUPANCY, "Block Limit SM", "block"),
    "occupancy_limit_barriers": (OCCUPANCY, "Block Limit Barriers", "block"),
    "theoretical_occupancy_pct": (OCCUPANCY, "Theoretical Occupancy", "%"),
    "achieved_occupancy_pct": (OCCUPANCY, "Achieved Occupancy", "%"),
}
# Sub-partitions (schedulers) per SM on sm_90: ncu's "Avg." source counters are averages over them.
SMSP_PER_SM = 4
BLOCK_LIMITS = ("Registers", "Shared Mem", "Warps", "SM", "Barriers")


def _from_the_page(page: KernelPage) -> dict[str, Reading]:
    """Figures ncu shows no label for, rebuilt by their definitions from values it does show."""
    shared = page.get(LAUNCH, "Driver Shared Memory Per Block") + page.get(LAUNCH, "Dynamic Shared Memory Per Block")
    derived = {
        "shared_mem_per_block": shared + page.get(LAUNCH, "Static Shared Memory Per Block"),
        # ncu's memory throughput in byte/s is DRAM bytes over the duration.
        "dram_bytes": page.get(MEMORY, "Memory Throughput") * page.get(SOL, "Duration") * 1e-9,
    }
    # Waves: the grid over the blocks all SMs hold at once, the tightest block limit per SM (all whole numbers).
    grid, sms = page.whole(LAUNCH, "Grid Size"), page.whole(LAUNCH, "# SMs")
    waves = grid / (sms * min(page.whole(OCCUPANCY, f"Block Limit {limit}") for limit in BLOCK_LIMITS))
    derived["tail_effect_pct"] = Reading.exact(100 * (math.ceil(waves) - waves), "%")
    # L1/TEX throughput: the page shows it over the L1's active cycles; over the elapsed cycles it is scaled by
    # active / elapsed, the cycles --set full's workload distribution shows (one L1 per SM: the total over the
    # SMs is the average).
    if (WORKLOAD, "Average L1 Active Cycles") in page.rows:
        elapsed = page.get(WORKLOAD, "Total L1 Elapsed Cycles") / sms
        active = page.get(WORKLOAD, "Average L1 Active Cycles")
        derived["l1_throughput_pct"] = page.get(SOL, "L1/TEX Cache Throughput") * active / elapsed
    # Branch uniformity: branches whose threads all went one way, of all branches (100 % without branches).
    branches = page.whole(SOURCE, "Branch Instructions")
    divergent = page.get(SOURCE, "Avg. Divergent Branches") * (SMSP_PER_SM * sms)
    if branches:
        low, high = (min(max(d, 0.0), branches) for d in (divergent.low, divergent.high))
        text = f"{divergent.text} divergent of {branches} branches"
        derived["branch_uniformity_pct"] = Reading(100 * (1 - high / branches), 100 * (1 - low / branches), "%", text)
    else:
        derived["branch_uniformity_pct"] = Reading.exact(100.0, "%")
    return derived


class Counters:
    """ncu_report's raw values of one launch by metric name; a name the report lacks fails, naming it."""

    def __init__(self, action: Any) -> None:
        self._action = action
        self.asked: set[str] = set()
        self._sass: list[Executed] | None = None

    def __call__(self, name: str) -> float:
        self.asked.add(name)
        metric = self._action.metric_by_name(name)
        assert metric is not None, f"the report has no {name}"
        value = metric.value()
        assert isinstance(value, int | float), f"{name} is {value!r}"
        return float(value)

    def opcodes(self, *opcodes: str) -> float:
        """Warp instructions executed of these SASS opcodes (ncu lists only the opcodes that ran)."""
        metric = self._action.metric_by_name("sass__inst_executed_per_opcode")
        assert metric is not None, "the report has no sass__inst_executed_per_opcode"
        ids = metric.correlation_ids()
        return float(sum(metric.value(i) for i in range(metric.num_instances()) if ids.value(i) in opcodes))

    def sass(self) -> list[Executed] | None:
        """Every executed PC's SASS with how often it ran (ncu's source counters); None where the report has none.

        Like the opcode helper, not a counter of the raw page: ncu prints the source counters per PC elsewhere.
        """
        if self._sass is not None:
            return self._sass
        warps, threads = _per_pc(self._action, "inst_executed"), _per_pc(self._action, "thread_inst_executed_true")
        if warps is None or threads is None:
            return None
        self._sass = []
        for pc, count in warps.items():
            text = self._action.sass_by_pc(pc)
            assert text, f"PC {pc:#x} ran {count:g} times but the report holds no SASS there"
            self._sass.append(Executed(*_split_sass(text), warps=count, threads=threads.get(pc, 0.0)))
        return self._sass


@dataclass(frozen=True)
class Executed:
    """One PC of the kernel's SASS: its base opcode, source operands, warp and predicated-on thread executions."""

    opcode: str
    sources: tuple[str, ...]
    warps: float
    threads: float


def _per_pc(action: Any, name: str) -> dict[int, float] | None:
    metric = action.metric_by_name(name)
    if metric is None:
        return None
    ids = metric.correlation_ids()
    return {int(ids.value(i)): float(metric.value(i)) for i in range(metric.num_instances())}


def _split_sass(text: str) -> tuple[str, tuple[str, ...]]:
    """("HFMA2", ("-RZ", "RZ", "0.5", "-1.5")) of "@P0 HFMA2.MMA R4, -RZ, RZ, 0.5, -1.5 ;": no destination."""
    words = text.replace(";", " ").split(None, 1)
    if words[0].startswith("@"):  # a guard predicate
        words = words[1].split(None, 1)
    operands = [part.strip() for part in words[1].split(",")] if len(words) > 1 else []
    return words[0].split(".")[0], tuple(operands[1:])


def _ratio(numerator: float, denominator: float) -> float | None:
    return None if denominator == 0 else numerator / denominator


def _waves(c: Counters) -> float:
    limits = ("registers", "shared_mem", "warps", "blocks", "barriers")
    per_sm = min(c(f"launch__occupancy_limit_{limit}") for limit in limits)
    return c("launch__grid_size") / (c("device__attribute_multiprocessor_count") * per_sm)


def _tail_pct(c: Counters) -> float:
    waves = _waves(c)
    return 100 * (math.ceil(waves) - waves)


def _flop_per_cycle(c: Counters, precision: str) -> float:
    """Thread-level FLOPs per elapsed cycle: an add or a multiply is 1 (2 for half2), a fused multiply-add 2 (4)."""
    ops = {
        "fp32": ("fadd", "fmul", "ffma", 1),
        "fp64": ("dadd", "dmul", "dfma", 1),
        "fp16": ("hadd", "hmul", "hfma", 2),
    }
    add, mul, fma, lanes = ops[precision]
    rate = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
    return lanes * (c(rate.format(add)) + c(rate.format(mul)) + 2 * c(rate.format(fma)))


# FLOPs the tensor cores did, by source type (integer MMA is no FLOP): sm__ops_path_tensor_src_<type>.
TENSOR_SOURCES = ("fp64", "tf32_dst_fp32", "bf16_dst_fp32", "fp16", "fp8_sparsity_off", "fp8_sparsity_on")


def _tensor_ops(c: Counters, suffix: str) -> float:
    return sum(c(f"sm__ops_path_tensor_src_{source}.sum{suffix}") for source in TENSOR_SOURCES)


def _nonfused_pct(c: Counters) -> float | None:
    rate = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
    unfused = c(rate.format("fadd")) + c(rate.format("fmul"))
    return _ratio(100 * unfused, unfused + c(rate.format("ffma")))


def _bank_conflict_pct(c: Counters) -> float:
    conflicts = sum(c(f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum") for op in ("ld", "st"))
    wavefronts = sum(c(f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum") for op in ("ld", "st"))
    # A conflict is an extra wavefront: the share is of all wavefronts, 0 % without shared accesses.
    return 0.0 if wavefronts == 0 else 100 * min(conflicts, wavefronts) / wavefronts


def _branch_uniformity_pct(c: Counters) -> float:
    branches = c("smsp__inst_executed_op_branch.sum")
    divergent = min(c("smsp__sass_branch_targets_threads_divergent.sum"), branches)
    return 100.0 if branches == 0 else 100 * (1 - divergent / branches)


def _local_traffic_pct(c: Counters) -> float | None:
    local = sum(c(f"l1tex__t_sectors_pipe_lsu_mem_local_op_{op}.sum") for op in ("ld", "st"))
    global_ = sum(c(f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum") for op in ("ld", "st"))
    ratio = _ratio(local, local + global_)
    return None if ratio is None else 100 * ratio


def _l1_throughput_pct(c: Counters) -> float:
    # ncu's L1/TEX throughput as its Speed Of Light page shows it is a share of the peak over the L1's active
    # cycles; over the elapsed cycles the same work is that share scaled by active / elapsed.
    active = c("l1tex__throughput.avg.pct_of_peak_sustained_active")
    return active * c("l1tex__cycles_active.avg") / c("l1tex__cycles_elapsed.avg")


def _sass_warps(c: Counters, opcode: str) -> float | None:
    """Warp instructions executed at the PCs whose SASS is this opcode (any modifiers)."""
    sass = c.sass()
    return None if sass is None else sum(pc.warps for pc in sass if pc.opcode == opcode)


# FP16 operations per predicated-on thread instruction as ncu counts them (see _flop_per_cycle): two halves each,
# an FMA twice.
FP16_FLOP_PER_INST = {"HADD2": 2, "HMUL2": 2, "HFMA2": 4}
ZERO_REGISTER = re.compile(r"-?\|?RZ\|?(\.\w+)*")


def _fp16_idiom_flop(c: Counters) -> float | None:
    """ncu's FP16 operations that do no arithmetic: a product with a zero factor, a sum with a zero term.

    HFMA2 d = a * b + c with a or b the zero register moves c into d (nvcc's HFMA2.MMA Rd, -RZ, RZ, constant);
    HADD2 d = a + b with a zero term is a move or a conversion; HMUL2 d = a * b by zero is zero.
    """
    sass = c.sass()
    if sass is None:
        return None
    return sum(
        FP16_FLOP_PER_INST[pc.opcode] * pc.threads
        for pc in sass
        if pc.opcode in FP16_FLOP_PER_INST and any(ZERO_REGISTER.fullmatch(s) for s in pc.sources[:2])
    )


def _fp16_math_flop(c: Counters) -> float | None:
    # ncu's FP16 count (its opcode counters, which cannot see operands) less the idioms the SASS shows.
    idioms = _fp16_idiom_flop(c)
    return None if idioms is None else round(_flop_per_cycle(c, "fp16") * c(ELAPSED)) - idioms


# Per SM and cycle on the H100/H200 SM (Hopper whitepaper): 128 FP32 lanes, 64 FP64 lanes, 128 half2 FMA
# lanes (4 FLOPs each), and 4096 dense FP16 tensor-core FLOPs (1024 per tensor core).
FLOP_PER_SM_CYCLE = {"fp32": 2 * 128, "fp64": 2 * 64, "fp16": 4 * 128, "tensor": 4096}


def _peak(c: Counters, precision: str) -> float:
    return FLOP_PER_SM_CYCLE[precision] * c("device__attribute_multiprocessor_count") * c(SM_CLOCK)


SM_CLOCK = "sm__cycles_elapsed.avg.per_second"
SMSP_CLOCK = "smsp__cycles_elapsed.avg.per_second"
ELAPSED = "smsp__cycles_elapsed.avg"
DURATION_S = "gpu__time_duration.sum"

# Every catalog entry -> its value from raw counters named here.
RAW: dict[str, Callable[[Counters], float | None]] = {
    "grid_size": lambda c: c("launch__grid_size"),
    "block_size": lambda c: c("launch__block_size"),
    "registers_per_thread": lambda c: c("launch__registers_per_thread"),
    "shared_mem_per_block": lambda c: sum(
        c(f"launch__shared_mem_per_block_{part}") for part in ("static", "dynamic", "driver")
    ),
    "shared_mem_static_per_block": lambda c: c("launch__shared_mem_per_block_static"),
    "shared_mem_dynamic_per_block": lambda c: c("launch__shared_mem_per_block_dynamic"),
    "waves_per_sm": _waves,
    "sm_count": lambda c: c("device__attribute_multiprocessor_count"),
    "duration": lambda c: c(DURATION_S),
    "elapsed_cycles": lambda c: c("gpc__cycles_elapsed.max"),
    "sm_frequency": lambda c: c("gpc__cycles_elapsed.avg.per_second"),
    "sm_throughput_pct": lambda c: c("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    "memory_throughput_pct": lambda c: c("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
    "dram_throughput_pct": lambda c: c("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    "dram_bytes_read": lambda c: c("dram__bytes_read.sum"),
    "dram_bytes_write": lambda c: c("dram__bytes_write.sum"),
    "dram_bandwidth": lambda c: c("dram__bytes.sum.per_second"),
    "l2_hit_rate_pct": lambda c: c("lts__t_sector_hit_rate.pct"),
    "global_load_sectors_per_request": lambda c: _ratio(
        c("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"), c("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
    ),
    "global_store_sectors_per_request": lambda c: _ratio(
        c("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"), c("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")
    ),
    "achieved_occupancy_pct": lambda c: c("sm__warps_active.avg.pct_of_peak_sustained_active"),
    "theoretical_occupancy_pct": lambda c: c("sm__maximum_warps_per_active_cycle_pct"),
    "eligible_warps_per_cycle": lambda c: c("smsp__warps_eligible.avg.per_cycle_active"),
    "issued_ipc_per_scheduler": lambda c: c("smsp__issue_active.avg.per_cycle_active"),
    "warp_cycles_per_issued_instruction": lambda c: c("smsp__average_warp_latency_per_inst_issued.ratio"),
    "l1_throughput_pct": _l1_throughput_pct,
    "l2_throughput_pct": lambda c: c("lts__throughput.avg.pct_of_peak_sustained_elapsed"),
    "l1_hit_rate_pct": lambda c: c("l1tex__t_sector_hit_rate.pct"),
    # ncu's hierarchical roofline: 128 bytes per L1 writeback cycle, 32 per L2-to-crossbar cycle.
    "l1_bytes": lambda c: 128 * c("l1tex__lsu_writeback_active_mem_lgds.sum"),
    "l2_bytes": lambda c: 32 * c("lts__lts2xbar_cycles_active.sum.per_second") * c(DURATION_S) * 1e-9,
    "dram_bytes": lambda c: c("dram__bytes_read.sum") + c("dram__bytes_write.sum"),
    "shared_load_bank_conflicts": lambda c: c("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
    "shared_store_bank_conflicts": lambda c: c("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
    "shared_load_wavefronts": lambda c: c("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
    "shared_store_wavefronts": lambda c: c("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"),
    "shared_bank_conflict_pct": _bank_conflict_pct,
    "local_memory_bytes": lambda c: (
        32 * sum(c(f"l1tex__t_sectors_pipe_lsu_mem_local_op_{op}.sum") for op in ("ld", "st"))
    ),
    "spill_instructions": lambda c: c("sass__inst_executed_register_spilling"),
    "local_load_instructions": lambda c: _sass_warps(c, "LDL"),
    "local_store_instructions": lambda c: _sass_warps(c, "STL"),
    "local_traffic_pct": _local_traffic_pct,
    "branch_uniformity_pct": _branch_uniformity_pct,
    "active_threads_per_warp": lambda c: c("smsp__thread_inst_executed_per_inst_executed.ratio"),
    "pipe_fma_pct": lambda c: c("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    "pipe_alu_pct": lambda c: c("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    "pipe_fp64_pct": lambda c: c("sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    "pipe_tensor_pct": lambda c: c("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    # The tensor pipe's cycles on matrix-multiply instructions only (not the HFMA2.MMA moves it also runs).
    "pipe_tensor_mma_pct": lambda c: c(
        "sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_elapsed"
    ),
    "pipe_lsu_pct": lambda c: c("sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_elapsed"),
    "instructions_executed": lambda c: c("smsp__inst_executed.sum"),
    "global_load_instructions": lambda c: c("smsp__sass_inst_executed_op_global_ld.sum"),
    "global_store_instructions": lambda c: c("smsp__sass_inst_executed_op_global_st.sum"),
    "shared_load_instructions": lambda c: c("smsp__sass_inst_executed_op_shared_ld.sum"),
    "shared_store_instructions": lambda c: c("smsp__sass_inst_executed_op_shared_st.sum"),
    "global_atomic_instructions": lambda c: (
        c("smsp__inst_executed_op_generic_atom_dot_alu.sum")
        + c("smsp__inst_executed_op_generic_atom_dot_cas.sum")
        + c("smsp__inst_executed_op_global_red.sum")
    ),
    "fp32_nonfused_pct": _nonfused_pct,
    "tail_effect_pct": _tail_pct,
    "occupancy_limit_registers": lambda c: c("launch__occupancy_limit_registers"),
    "occupancy_limit_shared_mem": lambda c: c("launch__occupancy_limit_shared_mem"),
    "occupancy_limit_warps": lambda c: c("launch__occupancy_limit_warps"),
    "occupancy_limit_blocks": lambda c: c("launch__occupancy_limit_blocks"),
    "occupancy_limit_barriers": lambda c: c("launch__occupancy_limit_barriers"),
    "fp32_flop": lambda c: _flop_per_cycle(c, "fp32") * c(ELAPSED),
    "fp64_flop": lambda c: _flop_per_cycle(c, "fp64") * c(ELAPSED),
    "fp16_flop": lambda c: _flop_per_cycle(c, "fp16") * c(ELAPSED),
    "fp16_math_flop": _fp16_math_flop,
    "fp16_idiom_flop": _fp16_idiom_flop,
    "tensor_flop": lambda c: _tensor_ops(c, ""),
    "fp32_flop_per_s": lambda c: _flop_per_cycle(c, "fp32") * c(SMSP_CLOCK),
    "fp64_flop_per_s": lambda c: _flop_per_cycle(c, "fp64") * c(SMSP_CLOCK),
    "fp16_flop_per_s": lambda c: _flop_per_cycle(c, "fp16") * c(SMSP_CLOCK),
    "tensor_flop_per_s": lambda c: _tensor_ops(c, ".per_cycle_elapsed") * c(SM_CLOCK),
    "peak_fp32_flop_per_s": lambda c: _peak(c, "fp32"),
    "peak_fp64_flop_per_s": lambda c: _peak(c, "fp64"),
    "peak_fp16_flop_per_s": lambda c: _peak(c, "fp16"),
    "peak_tensor_flop_per_s": lambda c: _peak(c, "tensor"),
    "peak_dram_byte_per_s": lambda c: c("dram__bytes.sum.peak_sustained") * c("dram__cycles_elapsed.avg.per_second"),
    "tensor_instructions": lambda c: c.opcodes("HMMA", "HGMMA", "QGMMA", "IMMA", "IGMMA", "BMMA", "BGMMA", "DMMA"),
    "tensor_hmma_instructions": lambda c: c.opcodes("HMMA"),
    "tensor_gmma_instructions": lambda c: c.opcodes("HGMMA", "QGMMA", "IGMMA", "BGMMA"),
    "tensor_imma_instructions": lambda c: c.opcodes("IMMA"),
}
# Counts ncu stores only as a rate per cycle: rate x cycles is whole up to float error, and a count is whole.
COUNTS_FROM_RATES = {"fp32_flop", "fp64_flop", "fp16_flop"}

# Figures 0 in every committed report, each with why; the test below fails for any other, and for one of
# these once a report shows it (then it leaves this list).
ALL_ZERO_ALLOWED = {
    "pipe_fp64_pct": "no committed kernel does FP64 arithmetic",
    "fp64_flop": "no committed kernel does FP64 arithmetic",
    "fp64_flop_per_s": "no committed kernel does FP64 arithmetic",
    "tensor_gmma_instructions": "no committed kernel uses warpgroup MMA (wgmma)",
    "tensor_imma_instructions": "no committed kernel uses integer MMA",
}

CAPTURE = "run tools/capture_ncu_pages.sh on a host with ncu (2025.3.1) and commit the pages"


def _launches(reader, report: Path) -> list[tuple[KernelResult, Any]]:
    pairs = kernel_actions(reader, report)
    assert pairs, f"{report_id(report)}: profsvc finds no launch"
    return pairs


def _same_launch(kernels: list[KernelResult], pages: list, report: Path) -> list[tuple[KernelResult, Any]]:
    """Each launch profsvc reports with the page's rows of that launch (by name, in launch order; by the
    report's result index where ncu's page spells the name otherwise: it shows torch's spin kernel, for one,
    as at::<unnamed>::spin_kernel, the report's demangled name as at::cuda::<unnamed>::spin_kernel)."""
    paired = []
    for kernel in kernels:
        same = [p for p in pages if p.kernel == kernel.demangled_name]
        earlier = sum(k.demangled_name == kernel.demangled_name for k, _ in paired)
        if len(same) <= earlier:
            same, earlier = [p for p in pages if p.result_id == kernel.launch_index], 0
        assert len(same) > earlier, f"{report_id(report)}: ncu's page shows no {kernel.demangled_name}"
        paired.append((kernel, same[earlier]))
    return paired


def _matches(ours: float | None, expected: float | None) -> bool:
    if ours is None or expected is None:
        return ours is expected
    return math.isclose(ours, expected, rel_tol=1e-12, abs_tol=1e-300)


# ---- the catalog against ncu's raw counters ----------------------------------------------------------------


def test_every_catalog_entry_has_an_oracle_here():
    assert set(RAW) == set(CATALOG.entries), (
        f"figures without a raw-counter oracle: {sorted(set(CATALOG.entries) - set(RAW))}; "
        f"oracles of figures the catalog lacks: {sorted(set(RAW) - set(CATALOG.entries))}"
    )
    assert set(SHOWN) <= set(CATALOG.entries)
    assert set(ALL_ZERO_ALLOWED) <= set(CATALOG.entries)


@pytest.mark.parametrize("report", REPORTS, ids=report_id)
def test_every_figure_equals_the_raw_counters_named_here(reader, report):
    wrong = {}
    for kernel, action in _launches(reader, report):
        counters = Counters(action)
        for name, oracle in RAW.items():
            expected = oracle(counters)
            ours = kernel.value(name)
            if name in COUNTS_FROM_RATES and expected is not None:
                assert math.isclose(expected, round(expected), rel_tol=1e-9), f"{name}: {expected} is not a count"
                expected = float(round(expected))
            if not _matches(ours, expected):
                wrong[name] = (ours, expected)
    assert not wrong, f"{report_id(report)}: profsvc's figure != ncu's counters: {wrong}"


def test_no_figure_is_zero_in_every_committed_report():
    kernels = [kernel for report in REPORTS for kernel in analysis_of(report).kernels]
    always_zero = {name for name in CATALOG.entries if all(not k.value(name) for k in kernels)}
    assert always_zero <= set(ALL_ZERO_ALLOWED), (
        f"0 (or missing) in every committed report: {sorted(always_zero - set(ALL_ZERO_ALLOWED))}; "
        "commit a report of a kernel that makes them non-zero"
    )
    shown_now = set(ALL_ZERO_ALLOWED) - always_zero
    assert not shown_now, f"now non-zero in a committed report, drop from ALL_ZERO_ALLOWED: {sorted(shown_now)}"


# ---- the catalog against ncu's details page -----------------------------------------------------------------


def _page_expectations(page: KernelPage) -> dict[str, Reading]:
    expected = {}
    for name, (section, label, unit) in SHOWN.items():
        reading = page.get(section, label)
        assert reading.unit == unit, f"ncu shows {label!r} in {reading.unit!r}, the test expects {unit!r}"
        expected[name] = reading
    return expected | _from_the_page(page)


def _page_mismatches(kernel: KernelResult, page: KernelPage) -> dict[str, tuple[float | None, str]]:
    return {
        name: (kernel.value(name), reading.text)
        for name, reading in _page_expectations(page).items()
        if not reading.holds(kernel.value(name))
    }


@pytest.mark.parametrize("report", REPORTS, ids=report_id)
def test_every_figure_ncu_shows_equals_its_details_page(report):
    details, _ = pages_of(report)
    if not details.is_file():
        pytest.skip(f"AWAITING CAPTURE: {details.relative_to(FIXTURES)} is not committed yet ({CAPTURE})")
    kernels = analysis_of(report).kernels
    wrong = {}
    for kernel, page in _same_launch(kernels, details_page(details), report):
        wrong |= _page_mismatches(kernel, page)
    assert not wrong, f"{report_id(report)}: profsvc's figure outside what ncu's page shows: {wrong}"


@pytest.mark.parametrize("report", REPORTS, ids=report_id)
def test_the_reader_reads_what_ncu_prints_on_the_raw_page(reader, report):
    # The raw-counter oracle above reads through ncu_report (the PyPI build off a GPU host): ncu's own raw page
    # must print the same value for every counter it names.
    _, raw = pages_of(report)
    if not raw.is_file():
        pytest.skip(f"AWAITING CAPTURE: {raw.relative_to(FIXTURES)} is not committed yet ({CAPTURE})")
    launches = _launches(reader, report)
    pages = _same_launch([k for k, _ in launches], raw_page(raw), report)
    wrong = {}
    for (_, action), (_, page) in zip(launches, pages, strict=True):
        counters = Counters(action)
        for oracle in RAW.values():
            oracle(counters)
        for name in sorted(counters.asked):
            printed = page.get(name)
            if printed is not None and not printed.holds(counters(name)):
                wrong[name] = (counters(name), printed.text)
    assert not wrong, f"{report_id(report)}: ncu_report != ncu's raw page: {wrong}"


# Other `ncu --set full` runs of seed47.py on the H200 (the pages ncu printed during those runs, not pages of a
# committed report): what does not vary from run to run must equal them in every report of that kernel.
OTHER_RUN_PAGE = FIXTURES / "other_runs" / "seed47_full_details.csv"
OTHER_RUN_RAW_PAGE = FIXTURES / "other_runs" / "seed47_full_raw.csv"
# Counts fixed by the kernel and its launch, whatever the clocks and caches did.
RUN_INDEPENDENT_COUNTERS = ("launch__", "device__attribute_", "smsp__inst_executed", "smsp__sass_inst_executed")
RUN_INDEPENDENT = {
    "grid_size",
    "block_size",
    "registers_per_thread",
    "shared_mem_per_block",
    "shared_mem_static_per_block",
    "shared_mem_dynamic_per_block",
    "sm_count",
    "waves_per_sm",
    "tail_effect_pct",
    "occupancy_limit_registers",
    "occupancy_limit_shared_mem",
    "occupancy_limit_warps",
    "occupancy_limit_blocks",
    "occupancy_limit_barriers",
    "theoretical_occupancy_pct",
    "instructions_executed",
    "active_threads_per_warp",
    "branch_uniformity_pct",
}
SEED_KERNEL = "vga_linear_kernel"
# The primed worker's report holds the worker's own kernel first (in a default-domain range: test_warm_ncu_run).
SEED_REPORTS = [r for r in REPORTS if any(k.name == SEED_KERNEL for k in analysis_of(r).kernels)]


def _seed_kernel(report: Path) -> KernelResult:
    return next(k for k in analysis_of(report).kernels if k.name == SEED_KERNEL)


def test_the_other_runs_page_is_the_seed_kernels():
    [page] = details_page(OTHER_RUN_PAGE)
    assert page.kernel == "vga_linear_kernel(const float *, const float *, const float *, float *)"
    assert len(SEED_REPORTS) == 4
    # It is a page of another run: a run-dependent figure such as the L2 hit rate differs from every report's.
    hit_rates = {_seed_kernel(r).value("l2_hit_rate_pct") for r in SEED_REPORTS}
    assert not any(page.get(MEMORY, "L2 Hit Rate").holds(rate) for rate in hit_rates)


@pytest.mark.parametrize("report", SEED_REPORTS, ids=report_id)
def test_run_independent_figures_equal_ncus_page_of_another_run(report):
    [page] = details_page(OTHER_RUN_PAGE)
    expected = _page_expectations(page)
    assert RUN_INDEPENDENT <= set(expected)
    kernel = _seed_kernel(report)
    wrong = {n: (kernel.value(n), expected[n].text) for n in RUN_INDEPENDENT if not expected[n].holds(kernel.value(n))}
    assert not wrong


@pytest.mark.parametrize("report", SEED_REPORTS, ids=report_id)
def test_run_independent_counters_equal_ncus_raw_page_of_another_run(reader, report):
    [page] = raw_page(OTHER_RUN_RAW_PAGE)
    [action] = [a for k, a in kernel_actions(reader, report) if k.name == SEED_KERNEL]
    counters = Counters(action)
    for oracle in RAW.values():
        oracle(counters)
    names = sorted(n for n in counters.asked if n.startswith(RUN_INDEPENDENT_COUNTERS))
    assert len(names) >= 20
    wrong = {n: (counters(n), page.values[n]) for n in names if not page.get(n).holds(counters(n))}
    assert not wrong


# ---- first principles -------------------------------------------------------------------------------------------


def test_fixture_flop_counts_follow_from_the_kernels_sources():
    # tensor_gemm: C = A B with M = N = K = 2048 on WMMA (examples/archetypes/tensor_gemm.cu): 2 M N K FLOPs,
    # all FP16-source MMA, and m16n8k16 HMMA instructions of 2 x 16 x 8 x 16 FLOPs each.
    gemm = analysis_of(FIXTURES / "archetypes" / "tensor_gemm.ncu-rep").kernels[0]
    assert gemm.value("tensor_flop") == 2 * 2048**3
    assert gemm.value("tensor_hmma_instructions") * 2 * 16 * 8 * 16 == 2 * 2048**3
    assert gemm.value("pipe_tensor_pct") > 0 and gemm.value("pipe_fp64_pct") == 0
    # The seed's kernel: FADD + FMUL + 2 FFMA thread instructions as ncu counted them per opcode.
    seed = analysis_of(FIXTURES / "seed47_full.ncu-rep").kernels[0]
    assert seed.value("fp32_flop") == 87360 + 2 * 86016


def test_peaks_are_the_h200s_per_sm_rates_at_the_measured_clock():
    kernel = analysis_of(FIXTURES / "seed47_full.ncu-rep").kernels[0]
    peak32 = kernel.value("peak_fp32_flop_per_s")
    # 132 SMs of 128 FP32 lanes near 2 GHz: about 67 TFLOP/s FP32 (NVIDIA's H200 figure at its boost clock).
    assert 60e12 < peak32 < 72e12
    for name, factor in (("peak_fp64_flop_per_s", 0.5), ("peak_fp16_flop_per_s", 2), ("peak_tensor_flop_per_s", 16)):
        assert math.isclose(kernel.value(name), factor * peak32, rel_tol=1e-12), name
    # HBM3e at 4.8 TB/s.
    assert 4.6e12 < kernel.value("peak_dram_byte_per_s") < 5.0e12


# ---- the rest of a kernel's result against ncu_report ----------------------------------------------------------


@pytest.mark.parametrize("report", REPORTS, ids=report_id)
def test_stall_shares_are_normalised(reader, report):
    for kernel, action in _launches(reader, report):
        stalls = kernel.stalls
        assert stalls, "every committed report has warp-state statistics"
        assert math.isclose(sum(s.share_pct for s in stalls), 100.0, rel_tol=1e-9)
        assert all(0.0 < s.share_pct <= 100.0 for s in stalls)
        assert [s.share_pct for s in stalls] == sorted((s.share_pct for s in stalls), reverse=True)
        for stall in stalls:
            name = f"smsp__average_warps_issue_stalled_{stall.reason}_per_issue_active.ratio"
            assert stall.cycles_per_issue == action.metric_by_name(name).value()


def test_seed_long_scoreboard_is_a_share_not_the_seed_trace_2441_percent():
    top = analysis_of(FIXTURES / "seed47_full.ncu-rep").kernels[0].stalls[0]
    assert top.reason == "long_scoreboard"
    # ncu: 24.6 cycles per issued instruction out of about 37 stall cycles in all.
    assert 60.0 < top.share_pct < 70.0
    assert math.isclose(top.cycles_per_issue, 24.607522175536882)


@pytest.mark.parametrize("report", REPORTS, ids=report_id)
def test_percentages_stay_within_100(report):
    for kernel in analysis_of(report).kernels:
        for name, figure in kernel.figures.items():
            if figure.unit == "%" and figure.value is not None:
                assert 0.0 <= figure.value <= 100.0, name


@pytest.mark.parametrize("report", REPORTS, ids=report_id)
def test_launch_shape_and_names_match_ncu(reader, report):
    for kernel, action in _launches(reader, report):
        assert kernel.name == action.name()
        assert kernel.demangled_name == action.name(reader.IAction.NameBase_DEMANGLED)
        for axis in "xyz":
            assert getattr(kernel.grid, axis) == action.metric_by_name(f"launch__grid_dim_{axis}").value()
            assert getattr(kernel.block, axis) == action.metric_by_name(f"launch__block_dim_{axis}").value()


@pytest.mark.parametrize("report", REPORTS, ids=report_id)
def test_ncu_rule_results_are_carried(reader, report):
    for kernel, action in _launches(reader, report):
        theirs = [r for r in action.rule_results_as_dicts() if (r.get("rule_message") or {}).get("message")]
        assert [r.rule_id for r in kernel.ncu_rules] == [r["rule_identifier"] for r in theirs]
        for mine, raw in zip(kernel.ncu_rules, theirs, strict=True):
            speedup = (raw.get("speedup_estimation") or {}).get("speedup")
            assert mine.estimated_speedup_pct == speedup
            assert "@section:" not in mine.message and "@url:" not in mine.message


def test_seed_report_facts():
    analysis = analysis_of(FIXTURES / "seed47_full.ncu-rep")
    kernel = analysis.kernels[0]
    assert analysis.device.name == "NVIDIA H200"
    assert analysis.device.compute_capability == "9.0"
    assert kernel.name == "vga_linear_kernel"
    assert kernel.nvtx_range == "profile"
    assert (kernel.grid.x, kernel.grid.y, kernel.block.x) == (8, 12, 224)


def test_the_default_set_report_holds_every_figure_the_full_report_holds():
    # Both reports are of the seed's kernel on the H200: one with --set full, one with the default set.
    full = analysis_of(FIXTURES / "seed47_full.ncu-rep").kernels[0]
    default = analysis_of(FIXTURES / "seed47_default.ncu-rep").kernels[0]
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
