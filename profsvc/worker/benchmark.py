"""Benchmark: the candidate and the reference timed the same way, with memory and launches (run by the judge).

The candidate times itself in its own process with profsvc's timing loop
(profsvc.worker.timing) on input sets the judge made; the judge times the
reference with the same loop, compares, and decides which flags only gaming
explains (`decisive`): no kernel per call, an output that went stale when the
timed inputs were refilled, a kernel longer than the event time that should
contain it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from profsvc.worker.correctness import Tolerances, clone_inputs, compare_all, flatten, trial_seed
from profsvc.worker.precision import cast_model, cast_values, tolerances
from profsvc.worker.problem import Problem
from profsvc.worker.shapes import JITTER
from profsvc.worker.timing import clocks_mhz, compare_timings, input_sets, time_model

METHOD = (
    "per call: L2 flushed (2x its size written), fresh inputs rotated where under 64 MiB, CUDA events around "
    "the call on the current stream, then a device-wide synchronize; wall = host clock around call and "
    "synchronize; kernels = CUPTI kernel records (torch.profiler) of back-to-back calls; statistics over calls, "
    "95 % intervals by bootstrap; speedup = reference median / candidate median on the stated basis"
)
# Seeds for timing inputs are offset so they never repeat a correctness trial's inputs.
TIMING_SEED_OFFSET = 1_000_000


class TimedCandidate(Protocol):
    """The candidate's process, as the benchmark drives it (profsvc.worker.judge.CandidateProcess)."""

    def time(self, sets: list[list[Any]], warmup: int, trials: int) -> dict[str, Any]:
        """Its timing of itself on these input sets (time_model's fields)."""
        ...

    def refill(self, values: list[Any]) -> list[Any]:
        """Copy new values into its first timed input set's buffers, call once, return the outputs."""
        ...


def reuse_violation(
    reference: Any, candidate: TimedCandidate, inputs: list[Any], torch: Any, tolerance: Tolerances
) -> str:
    """Refill timed input buffers with new values: a result cached by pointer, id or shape goes stale ('' if not)."""
    fresh = [torch.randn_like(x) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    candidate_out = candidate.refill(fresh)
    reference_out = flatten(reference(*clone_inputs(fresh, torch)), torch)
    torch.cuda.synchronize()
    verdict = compare_all(candidate_out, reference_out, torch, tolerance)
    if verdict["ok"]:
        return ""
    return (
        "after the timed input buffers were refilled with new values the candidate's output was wrong "
        f"({verdict['message']}): it reuses results across calls"
    )


def decisive_flags(candidate: dict[str, Any], reuse: str) -> list[str]:
    """The flags only gaming explains: they fail an evaluation (the others inform)."""
    flags = []
    if candidate["launches_per_call"] == 0:
        flags.append("the candidate launched no GPU kernel per call: it computes nothing on the GPU")
    if reuse:
        flags.append(reuse)
    longest = max((r["device_time_us"] for r in candidate["launch_records"]), default=0.0)
    events = candidate["events"].get("median_us", 0.0)
    # Kernels of one call may overlap on several streams (their sum may exceed the events honestly); one
    # kernel longer than the event span around the whole call cannot have run inside it.
    if longest > events > 0:
        flags.append(
            f"one kernel of the candidate ran {longest:.2f} us, longer than the {events:.2f} us the events around "
            "the whole call measured: work ran outside the timed stream"
        )
    return flags


def run_benchmark(
    problem: Problem,
    candidate: TimedCandidate | None,
    trials: int,
    warmup: int,
    seed: int,
    torch: Any,
    models_seed: int,
    precision: str,
    phase: Callable[[str], AbstractContextManager[None]] = lambda _name: nullcontext(),
) -> dict[str, Any]:
    """Time both models at the nominal shapes in a precision mode (the reference built after seeding with
    `models_seed` from the same init inputs, and cast, as the candidate's was); return the BenchmarkResult
    fields. Without a candidate (a published problem), the reference alone. `phase(name)` times the parts of
    the benchmark (the waits for the candidate's process within them are also in the judge's candidate_wait;
    `comparison` is the speedup's bootstrap, the flags and the clocks read through NVML)."""
    JITTER.nominal()
    with phase("reference_model"):
        init = cast_values(problem.get_init_inputs(), precision, torch)
        torch.manual_seed(models_seed)
        reference = problem.model(*init)
        if isinstance(reference, torch.nn.Module):
            reference = cast_model(reference.cuda().eval(), precision, torch)
    counter = itertools.count()

    def make_inputs() -> list[Any]:
        torch.manual_seed(trial_seed(seed, TIMING_SEED_OFFSET + next(counter)))
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
        return cast_values(inputs, precision, torch)

    with torch.no_grad():
        with phase("timing_inputs"):
            sets = input_sets(make_inputs, torch)
        if candidate is None:
            with phase("reference_timing"):
                timed = time_model(reference, sets, warmup, trials, torch)
            public = {k: v for k, v in timed.items() if not k.startswith("_")}
            return {"ok": True, "reference": public, "method": METHOD, "clocks_mhz": clocks_mhz()}
        with phase("candidate_timing"):
            timed_candidate = candidate.time(sets, warmup, trials)
        with phase("reference_timing"):
            timed_reference = time_model(reference, sets, warmup, trials, torch)
        with phase("reuse_check"):
            reuse = reuse_violation(reference, candidate, sets[0], torch, tolerances(precision))
    with phase("comparison"):
        comparison = compare_timings(timed_candidate, timed_reference)
        decisive = decisive_flags(timed_candidate, reuse)
        comparison["flags"] = [*decisive, *(f for f in comparison["flags"] if f not in decisive)]
        comparison["decisive_flags"] = decisive
        clocks = clocks_mhz()
    public = {k: v for k, v in timed_candidate.items() if not k.startswith("_")}
    public_reference = {k: v for k, v in timed_reference.items() if not k.startswith("_")}
    return {
        "ok": True,
        "candidate": public,
        "reference": public_reference,
        "method": METHOD,
        "clocks_mhz": clocks,
        **comparison,
    }
