"""Benchmark: the candidate and the reference timed the same way, with memory and launches."""

from __future__ import annotations

import itertools
from typing import Any

from profsvc.worker.correctness import clone_inputs, compare_all, flatten, trial_seed
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


def _build(problem: Problem, seed: int, torch: Any) -> tuple[Any, Any]:
    init = problem.get_init_inputs()
    built = []
    for cls in (problem.model, problem.model_new):
        torch.manual_seed(seed)
        model = cls(*init)
        built.append(model.cuda().eval() if isinstance(model, torch.nn.Module) else model)
    return built[0], built[1]


def reuse_violation(reference: Any, candidate: Any, inputs: list[Any], torch: Any) -> str:
    """Refill timed input buffers with new values: a result cached by pointer, id or shape goes stale ('' if not)."""
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            x.copy_(torch.randn_like(x))
    candidate_out = flatten(candidate(*inputs), torch)
    reference_out = flatten(reference(*clone_inputs(inputs, torch)), torch)
    torch.cuda.synchronize()
    verdict = compare_all(candidate_out, reference_out, torch)
    if verdict["ok"]:
        return ""
    return (
        "after the timed input buffers were refilled with new values the candidate's output was wrong "
        f"({verdict['message']}): it reuses results across calls"
    )


def run_benchmark(problem: Problem, trials: int, warmup: int, seed: int, torch: Any) -> dict[str, Any]:
    """Time both models at the nominal shapes; return the BenchmarkResult fields."""
    JITTER.nominal()
    reference, candidate = _build(problem, seed, torch)
    counter = itertools.count()

    def make_inputs() -> list[Any]:
        torch.manual_seed(trial_seed(seed, TIMING_SEED_OFFSET + next(counter)))
        return [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]

    with torch.no_grad():
        sets = input_sets(make_inputs, torch)
        timed_candidate = time_model(candidate, sets, warmup, trials, torch)
        timed_reference = time_model(reference, sets, warmup, trials, torch)
        reuse = reuse_violation(reference, candidate, sets[0], torch)
    comparison = compare_timings(timed_candidate, timed_reference)
    if timed_candidate["launches_per_call"] == 0:
        comparison["flags"].append("the candidate launched no GPU kernel per call: it computes nothing on the GPU")
    if reuse:
        comparison["flags"].append(reuse)
    public = {k: v for k, v in timed_candidate.items() if not k.startswith("_")}
    public_reference = {k: v for k, v in timed_reference.items() if not k.startswith("_")}
    return {
        "ok": True,
        "candidate": public,
        "reference": public_reference,
        "method": METHOD,
        "clocks_mhz": clocks_mhz(),
        **comparison,
    }
