"""The figure-case kernels (examples/figures) against figures worked out from their sources.

The reports are captured on an H200 by tools/capture_fixtures.sh into tests/fixtures/figures/;
until they are committed, each test of a report skips (the compile checks run wherever nvcc is).
Expected values come from the programs' sizes and their compiled code (nvcc 13.0, sm_90), never
from the catalog or the rule table under test; ncu_report's raw values judge the bound.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from profsvc.metrics.analysis import analyze_report
from profsvc.metrics.catalog import load_catalog
from profsvc.report.text import roofline_line
from profsvc.rules import check_figures, evaluate_rules, load_rules
from profsvc_contract.models import KernelResult
from tests.conftest import FIXTURES, first_action

SOURCES = Path(__file__).parents[2] / "examples" / "figures"
CAPTURES = FIXTURES / "figures"
CASES = {"local_array": "bin_counts", "fp32_copy": "copy_rows", "half2_fma": "half2_chains", "wmma_tiled": "wmma_tiled"}
SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}
BUSY_PCT = 60  # ncu's SOLBottleneck: a unit below 60 % of its peak does not bound the kernel

# Launch shapes, from the programs' main().
H200_SMS = 132
LOCAL_THREADS, LOCAL_PER_THREAD, LOCAL_SLOTS = 132 * 8 * 256, 128, 64
COPY_FLOATS, COPY_BLOCK, COPY_PER_THREAD = 1 << 25, 256, 16
HALF_THREADS, HALF_CHAINS, HALF_STEPS = 132 * 8 * 256, 4, 2048
GEMM_M = GEMM_N = GEMM_K = 4096
GEMM_TILE_M = GEMM_TILE_N = 64
GEMM_TILE_K = 32


def _report(name: str) -> Path:
    return CAPTURES / f"{name}.ncu-rep"


def captured(name: str) -> pytest.MarkDecorator:
    """Skip until tools/capture_fixtures.sh has run on a GPU host and its report is committed."""
    return pytest.mark.skipif(not _report(name).is_file(), reason=f"not captured yet: figures/{name}.ncu-rep")


def _kernel(name: str) -> KernelResult:
    [kernel] = analyze_report(_report(name)).kernels  # the warm-up and the fill run outside the range
    return kernel


def _hints(kernel: KernelResult):
    return evaluate_rules(kernel, load_catalog(), load_rules())


def _raw(action, metric: str) -> float:
    found = action.metric_by_name(metric)
    assert found is not None, metric
    return float(found.value())


# ---- every case ---------------------------------------------------------------------------------------------


def test_every_program_is_listed_and_pushes_a_range_named_after_its_file():
    assert sorted(p.stem for p in SOURCES.glob("*.cu")) == sorted(CASES)
    readme = (SOURCES / "README.md").read_text()
    for name, kernel in CASES.items():
        source = (SOURCES / f"{name}.cu").read_text()
        assert re.findall(r'nvtxRangePushA\("([^"]*)"\)', source) == [name]
        assert re.search(rf"__global__ void (__launch_bounds__\([^)]*\) )?{kernel}\(", source)
        assert f"| `{name}` |" in readme


def _ptxas(source: Path, tmp_path: Path) -> dict[str, tuple[int, int, int]]:
    """ptxas's (stack frame, spill store, spill load) bytes per kernel of a program, with the capture's flags."""
    # The device code only (-cubin): ptxas's report is the same as the capture's build, without the host link.
    command = ["nvcc", "-O3", "-lineinfo", "-arch=sm_90", "-Xptxas", "-v", "-cubin"]
    cubin = tmp_path / f"{source.stem}.cubin"
    done = subprocess.run([*command, "-o", str(cubin), str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = re.findall(
        r"Function properties for (\w+)\n\s*(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
        done.stdout + done.stderr,
    )
    return {name: (int(frame), int(stores), int(loads)) for name, frame, stores, loads in found}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (CUDA 13.0)")
def test_the_local_array_is_no_spill_and_the_archetype_spill_is(tmp_path):
    local = _ptxas(SOURCES / "local_array.cu", tmp_path)
    [(frame, stores, loads)] = [v for k, v in local.items() if "bin_counts" in k]
    # 64 floats of stack, and ptxas spilled nothing: the local traffic is the array itself.
    assert frame >= 4 * LOCAL_SLOTS and stores == loads == 0
    spill = _ptxas(SOURCES.parent / "archetypes" / "register_spill.cu", tmp_path)
    [(_, stores, loads)] = [v for k, v in spill.items() if "rotate_mix" in k]
    assert stores > 0 and loads > 0
    for name in ("fp32_copy", "half2_fma", "wmma_tiled"):
        assert all(v[1:] == (0, 0) for v in _ptxas(SOURCES / f"{name}.cu", tmp_path).values()), name


@pytest.mark.parametrize("name", [pytest.param(n, marks=captured(n)) for n in CASES])
def test_the_report_holds_the_one_launch_inside_the_range(name):
    kernel = _kernel(name)
    assert kernel.nvtx_range == name and kernel.demangled_name.startswith(f"{CASES[name]}(")


@pytest.mark.parametrize("name", [pytest.param(n, marks=captured(n)) for n in CASES])
def test_the_bound_is_the_busiest_unit_by_ncus_own_values(reader, name):
    action = first_action(reader, _report(name))
    compute = _raw(action, "sm__throughput.avg.pct_of_peak_sustained_elapsed")
    levels = {
        "dram": _raw(action, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
        "l2": _raw(action, "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
        "l1": _raw(action, "l1tex__throughput.avg.pct_of_peak_sustained_elapsed"),
    }
    if compute >= BUSY_PCT and compute >= max(levels.values()):
        expected = "compute"
    else:
        expected = next((level for level, pct in levels.items() if pct >= BUSY_PCT), "latency")
    assert _kernel(name).roofline.bound == expected


@pytest.mark.parametrize("name", [pytest.param(n, marks=captured(n)) for n in CASES])
def test_figures_agree_and_labels_follow_the_ranking(name):
    kernel = _kernel(name)
    assert check_figures(kernel, load_catalog()) == []
    hints = _hints(kernel)
    labels = [SEVERITY_ORDER[h.severity] for h in hints]
    assert labels == sorted(labels), [(h.rule_id, h.severity, h.estimated_speedup_pct) for h in hints]


# ---- local memory: an array indexed at run time -------------------------------------------------------------


@captured("local_array")
def test_local_array_moves_local_traffic_without_a_spill():
    kernel = _kernel("local_array")
    warps = LOCAL_THREADS // 32
    # Per key one load and one store of slots[key % 64]; the 64 slots are zeroed and read back 16 bytes at a time.
    assert kernel.value("local_load_instructions") == warps * (LOCAL_PER_THREAD + LOCAL_SLOTS // 4)
    assert kernel.value("local_store_instructions") == warps * (LOCAL_PER_THREAD + LOCAL_SLOTS // 4)
    assert kernel.value("spill_instructions") == 0
    # Lanes hit different slots: a local access fetches many sectors where a key load fetches 4.
    assert kernel.value("local_traffic_pct") > 85


@captured("local_array")
def test_local_array_key_loads_are_the_keys_and_nothing_more(reader):
    action = first_action(reader, _report("local_array"))
    key_bytes = LOCAL_THREADS * LOCAL_PER_THREAD * 4
    assert _raw(action, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum") == key_bytes / 32


@captured("local_array")
def test_local_array_hint_names_the_array_and_leads():
    kernel = _kernel("local_array")
    hints = _hints(kernel)
    ids = [h.rule_id for h in hints]
    assert "local_memory_spills" not in ids
    top = hints[0]
    assert top.rule_id == "local_memory_arrays", ids[:5]
    # Ranked by the local share of the traffic and what that traffic costs (here the warps' waits on L1TEX: no
    # unit runs near its peak, the kernel is latency-bound), ahead of the stall hints it explains.
    assert top.estimated_speedup_pct > 40 and top.severity == "high"
    assert "indexed at run time" in top.message
    assert ids.index("local_memory_arrays") < ids.index("stall_long_scoreboard")


# ---- compiler idioms: an FP32 copy ------------------------------------------------------------------------------


@captured("fp32_copy")
def test_fp32_copy_does_no_floating_point_work():
    kernel = _kernel("fp32_copy")
    threads = COPY_FLOATS // COPY_PER_THREAD
    for figure in ("fp32_flop", "fp64_flop", "fp16_math_flop", "tensor_flop"):
        assert kernel.value(figure) == 0, figure
    # ncu counts the one HFMA2.MMA Rd, -RZ, RZ, 0, 0 per thread as an FP16 FMA: 4 FLOP each, all idioms.
    assert kernel.value("fp16_flop") == 4 * threads
    assert kernel.value("fp16_idiom_flop") == kernel.value("fp16_flop")
    assert kernel.value("pipe_tensor_mma_pct") == 0
    assert kernel.roofline.precision == "none"
    assert roofline_line(kernel.roofline).startswith("Roofline: no floating-point work")


@captured("fp32_copy")
def test_fp32_copy_moves_the_arrays_once(reader):
    action = first_action(reader, _report("fp32_copy"))
    array_bytes = COPY_FLOATS * 4
    assert _raw(action, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum") == array_bytes / 32
    assert _raw(action, "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum") == array_bytes / 32
    # Caches are flushed before the launch and the input exceeds L2: every input byte comes from DRAM once.
    assert _raw(action, "dram__bytes_read.sum") == pytest.approx(array_bytes, rel=0.02)


@captured("fp32_copy")
def test_fp32_copy_hints_claim_no_fp16_or_tensor_work():
    for hint in _hints(_kernel("fp32_copy")):
        quoted = {e.figure for e in hint.evidence}
        assert not quoted & {"fp16_flop", "pipe_tensor_pct"}, hint.rule_id
        assert "fp16" not in hint.message.lower() or "0 FLOP" in hint.message, hint.message


# ---- real half-precision math ----------------------------------------------------------------------------------


@captured("half2_fma")
def test_half2_fma_counts_every_hfma2_as_arithmetic():
    kernel = _kernel("half2_fma")
    # 4 chains x 2048 steps of one HFMA2 (two halves, two FMAs: 4 FLOP) per thread.
    assert kernel.value("fp16_math_flop") == 4 * HALF_THREADS * HALF_CHAINS * HALF_STEPS
    # One HFMA2.MMA Rd, -RZ, RZ, 0, 0 per thread zeroes a register: an idiom next to the arithmetic.
    assert kernel.value("fp16_idiom_flop") == 4 * HALF_THREADS
    assert kernel.value("fp16_flop") == kernel.value("fp16_math_flop") + kernel.value("fp16_idiom_flop")
    assert kernel.value("fp32_flop") == 0
    assert kernel.roofline.precision == "fp16"
    duration_s = kernel.value("duration") * 1e-9
    assert kernel.roofline.achieved_flop_per_s == pytest.approx(kernel.value("fp16_math_flop") / duration_s, rel=0.02)


@captured("half2_fma")
def test_half2_fma_on_the_mma_pipe_is_no_tensor_core_use():
    kernel = _kernel("half2_fma")
    # nvcc issues some of the HFMA2s as HFMA2.MMA: ncu's tensor pipe counts them, its MMA share does not.
    assert kernel.value("tensor_instructions") == 0 and kernel.value("pipe_tensor_mma_pct") == 0
    assert kernel.value("pipe_tensor_pct") > 0
    for hint in _hints(kernel):
        assert "pipe_tensor_pct" not in {e.figure for e in hint.evidence}, hint.rule_id


# ---- tensor cores: a WMMA GEMM -----------------------------------------------------------------------------------


@captured("wmma_tiled")
def test_wmma_tiled_counts_the_gemm_flops_on_the_tensor_cores():
    kernel = _kernel("wmma_tiled")
    assert kernel.value("tensor_flop") == 2 * GEMM_M * GEMM_N * GEMM_K
    # Each 16x16x16 mma_sync is two HMMA.16816 on sm_90.
    assert kernel.value("tensor_hmma_instructions") == 2 * (GEMM_M // 16) * (GEMM_N // 16) * (GEMM_K // 16)
    assert kernel.value("fp16_math_flop") == 0
    assert kernel.roofline.precision == "tensor"
    assert kernel.value("pipe_tensor_mma_pct") > 0


@captured("wmma_tiled")
def test_wmma_tiled_stages_each_tile_once(reader):
    action = first_action(reader, _report("wmma_tiled"))
    blocks = (GEMM_M // GEMM_TILE_M) * (GEMM_N // GEMM_TILE_N)
    slices = GEMM_K // GEMM_TILE_K
    tile_bytes = 2 * (GEMM_TILE_M * GEMM_TILE_K + GEMM_TILE_K * GEMM_TILE_N)  # A and B tiles, 2-byte halves
    assert _raw(action, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum") == blocks * slices * tile_bytes / 32
    # 16-byte stores: a warp stores 512 bytes of tile per instruction.
    assert _raw(action, "smsp__sass_inst_executed_op_shared_st.sum") == blocks * slices * tile_bytes / 512
