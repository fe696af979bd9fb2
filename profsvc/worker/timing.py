"""Timing that cannot lie: events, wall clock and CUPTI kernel records for the same model.

Per timed call: the L2 is flushed (a buffer twice the device's L2 is written),
the inputs rotate among fresh sets where they are small enough, the call runs
between two CUDA events on the current stream, and a device-wide
synchronisation follows, so work the model left on other streams is waited
for; the host clock around call and synchronisation gives the launch-inclusive
time. CUPTI's kernel records (through torch.profiler) give the kernels' own
durations and names; a time below their sum is flagged, never reported as the
answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from profsvc.worker.stats import ratio_interval, summarize

# Inputs up to this many bytes get a fresh copy per timed call (rotating sets).
FRESH_INPUT_LIMIT_BYTES = 64 << 20
INPUT_SETS = 4
KERNEL_RECORD_CALLS = 20
# The marker after a recorded call: torch's spin kernel (ATen/cuda/Sleep.cu).
MARKER_KERNEL = "spin_kernel"
# How far past the marker's start a kernel of another stream may end before it counts as left running: CUPTI's
# records of kernels that follow each other may overlap by a little (pytorch/kineto#136).
LEFT_RUNNING_SLACK_NS = 1_000


def _tensor_bytes(inputs: list[Any], torch: Any) -> int:
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


def _is_kernel(event: Any, torch: Any) -> bool:
    name = event.name()
    return event.device_type() == torch.autograd.DeviceType.CUDA and not name.startswith(("Memcpy", "Memset"))


def kernel_records(model: Any, inputs: list[Any], calls: int, torch: Any) -> dict[str, Any]:
    """Kernels per call, their names and durations, from CUPTI records of `calls` back-to-back calls."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            model(*inputs)
        torch.cuda.synchronize()
    kernels = [e for e in prof.profiler.kineto_results.events() if _is_kernel(e, torch)]
    by_name: dict[str, list[float]] = {}
    for event in kernels:
        by_name.setdefault(event.name(), []).append(event.duration_ns() / 1e3)
    per_call_total = sum(d for durations in by_name.values() for d in durations) / calls
    return {
        "launches_per_call": round(len(kernels) / calls),
        "launch_records": [
            {"name": name, "device_time_us": sorted(durations)[len(durations) // 2]}
            for name, durations in by_name.items()
        ],
        "kernel_sum_us": per_call_total,
        # Per-call sums for statistics: split the records evenly into calls (they are sequential).
        "per_call_us": _per_call(kernels, calls),
    }


def launched_kernels(
    model: Any, inputs: list[Any], torch: Any, marker: Callable[[int], None]
) -> tuple[list[str], list[str]]:
    """The names of the kernels one call launched (CUPTI kernel records), and of those it left running.

    Left running: on another stream than the current one and still running when a kernel the harness queued on
    the current stream right after the call began (GPU timestamps of one clock), or launched after it. Work the
    call joined to its stream, or waited for, ends before that kernel starts; work on a stream it never joined
    may not, and would run outside any timing of the call. `marker`: torch's spin kernel launcher
    (`torch._C._cuda_sleep`), taken before the candidate's module was imported.
    """
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        model(*inputs)
        marker(1)  # a spin kernel of one cycle on the current stream, launched last
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.profiler.kineto_results.events() if _is_kernel(e, torch)), key=_launch_order)
    spins = [e for e in kernels if MARKER_KERNEL in e.name()]
    if not spins:
        return [e.name() for e in kernels], []
    called = [e for e in kernels if e is not spins[-1]]
    return [e.name() for e in called], [e.name() for e in called if left_running(e, spins[-1])]


def _launch_order(event: Any) -> int:
    return event.correlation_id()


def left_running(kernel: Any, marker: Any) -> bool:
    """Whether `kernel` ran past the marker's start on a stream of its own, or was launched after the marker."""
    if kernel.correlation_id() > marker.correlation_id():
        return True
    if kernel.device_resource_id() == marker.device_resource_id() or marker.start_ns() <= 0:
        return False  # stream order holds it before the marker; a marker without a timestamp proves nothing
    return kernel.start_ns() + kernel.duration_ns() > marker.start_ns() + LEFT_RUNNING_SLACK_NS


def _per_call(kernels: list[Any], calls: int) -> list[float]:
    if not kernels or len(kernels) % calls:
        return []
    per = len(kernels) // calls
    ordered = sorted(kernels, key=lambda e: e.start_ns())
    return [sum(e.duration_ns() for e in ordered[i * per : (i + 1) * per]) / 1e3 for i in range(calls)]


def input_sets(make_inputs: Callable[[], list[Any]], torch: Any) -> list[list[Any]]:
    """Several fresh input sets to rotate through, or one when the inputs are large."""
    first = make_inputs()
    if _tensor_bytes(first, torch) > FRESH_INPUT_LIMIT_BYTES:
        return [first]
    return [first] + [make_inputs() for _ in range(INPUT_SETS - 1)]


def time_model(model: Any, sets: list[list[Any]], warmup: int, trials: int, torch: Any) -> dict[str, Any]:
    """Events, wall and kernel-record timings, launches and peak memory of one model."""
    first = sets[0]
    l2_bytes = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    flush = torch.empty(max(2 * l2_bytes, 1 << 20), dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        model(*first)
    torch.cuda.synchronize()
    events_us: list[float] = []
    wall_us: list[float] = []
    for index in range(trials):
        inputs = sets[index % len(sets)]
        flush.fill_(index & 0xFF)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin = time.perf_counter()
        start.record()
        model(*inputs)
        end.record()
        torch.cuda.synchronize()
        wall_us.append((time.perf_counter() - begin) * 1e6)
        events_us.append(start.elapsed_time(end) * 1e3)
    records = kernel_records(model, first, KERNEL_RECORD_CALLS, torch)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    baseline = torch.cuda.memory_allocated()
    model(*first)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - baseline
    del flush
    return {
        "events": summarize(events_us),
        "wall": summarize(wall_us),
        "kernels": summarize(records["per_call_us"]),
        "launches_per_call": records["launches_per_call"],
        "launch_records": records["launch_records"],
        "peak_memory_bytes": max(0, peak),
        "_events_us": events_us,
        "_wall_us": wall_us,
        "_kernel_sum_us": records["kernel_sum_us"],
    }


def clocks_mhz() -> dict[str, float]:
    """SM and memory clocks now, from NVML where it is available."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        return {
            "sm": float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
            "memory": float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
        }
    except pynvml.NVMLError:
        return {}


def compare_timings(candidate: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    """Speedup with its interval, the basis it uses, and flags for anything that does not add up."""
    flags: list[str] = []
    basis = "events"
    for who, timing in (("candidate", candidate), ("reference", reference)):
        median = timing["events"].get("median_us", 0.0)
        if median < timing["_kernel_sum_us"]:
            flags.append(
                f"{who}: event time {median:.2f} us is below its kernels' own durations"
                f" ({timing['_kernel_sum_us']:.2f} us): work ran outside the timed stream; using wall time"
            )
            basis = "wall"
    key = "_events_us" if basis == "events" else "_wall_us"
    speedup = reference[basis]["median_us"] / candidate[basis]["median_us"]
    low, high = ratio_interval(reference[key], candidate[key])
    launches_c, launches_r = candidate["launches_per_call"], reference["launches_per_call"]
    memory_c, memory_r = candidate["peak_memory_bytes"], reference["peak_memory_bytes"]
    return {
        "speedup": speedup,
        "speedup_ci_low": low,
        "speedup_ci_high": high,
        "speedup_basis": basis,
        "flags": flags,
        "fusion_ratio": launches_r / launches_c if launches_c else None,
        "memory_ratio": memory_c / memory_r if memory_r else None,
    }
