"""Correctness trials: the candidate against the reference on fresh random inputs.

Per trial: inputs from a seed derived from the server's secret seed; the
candidate runs first, on its own copies of the inputs, with the allocator's
free memory poisoned (0xFF bytes: NaN for floats) so unwritten output elements
show; then its inputs are checked for changes, its outputs for aliasing the
inputs, and only then does the reference run, on other copies.
"""

from __future__ import annotations

import hashlib
from typing import Any

from profsvc.worker.problem import Problem
from profsvc.worker.shapes import JITTER

# (atol, rtol) by output dtype; the result states the ones used.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-3, 1e-3),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}
EXACT = (0.0, 0.0)
# Poisoned blocks: these byte sizes, a few of each, filled with 0xFF then freed to the caching allocator.
POISON_SIZES = tuple(1 << k for k in range(9, 27, 2))
POISON_COPIES = 4


def trial_seed(server_seed: int, trial: int) -> int:
    """A trial's seed: a hash of the server's secret seed, so the candidate cannot predict inputs."""
    digest = hashlib.sha256(f"{server_seed}:{trial}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def flatten(value: Any, torch: Any) -> list[Any]:
    """The tensors of an output (a tensor, or nested tuples and lists of them)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for item in value for t in flatten(item, torch)]
    return [value]


def clone_inputs(inputs: list[Any], torch: Any) -> list[Any]:
    """Deep copies of the tensors among the inputs."""
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def poison_allocator(torch: Any) -> None:
    """Leave 0xFF-filled blocks in the caching allocator for the candidate's outputs to land in."""
    blocks = [
        torch.full((size,), 255, dtype=torch.uint8, device="cuda")
        for size in POISON_SIZES
        for _ in range(POISON_COPIES)
    ]
    torch.cuda.synchronize()
    del blocks


def _shares_storage(a: Any, b: Any) -> bool:
    start_a, start_b = a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr()
    end_a = start_a + a.untyped_storage().nbytes()
    end_b = start_b + b.untyped_storage().nbytes()
    return start_a < end_b and start_b < end_a


def compare(candidate: Any, reference: Any, torch: Any) -> dict[str, Any]:
    """Compare one output tensor pair: ok, message, errors, first mismatch."""
    if not isinstance(candidate, torch.Tensor):
        return {"ok": False, "message": f"the candidate returned {type(candidate).__name__}, not a tensor"}
    if candidate.shape != reference.shape:
        return {"ok": False, "message": f"output shape {list(candidate.shape)} != reference {list(reference.shape)}"}
    if candidate.dtype != reference.dtype:
        return {"ok": False, "message": f"output dtype {candidate.dtype} != reference {reference.dtype}"}
    if candidate.device != reference.device:
        return {"ok": False, "message": f"output on {candidate.device}, reference on {reference.device}"}
    dtype = str(reference.dtype).removeprefix("torch.")
    atol, rtol = TOLERANCES.get(dtype, EXACT)
    c, r = candidate.double(), reference.double()
    finite_r = torch.isfinite(r)
    if bool((~torch.isfinite(c) & finite_r).any()):
        count = int((~torch.isfinite(c) & finite_r).sum())
        return {"ok": False, "message": f"{count} output element(s) are NaN or Inf (unwritten elements read as NaN)"}
    diff = (c - r).abs()
    errors = {
        "max_abs_error": float(diff.max()) if diff.numel() else 0.0,
        "mean_abs_error": float(diff.mean()) if diff.numel() else 0.0,
        "max_rel_error": float((diff / r.abs().clamp_min(1e-12)).max()) if diff.numel() else 0.0,
    }
    bad = diff > atol + rtol * r.abs()
    if bool(bad.any()):
        index = tuple(int(i) for i in torch.nonzero(bad)[0])
        return {
            "ok": False,
            "message": f"{int(bad.sum())} of {bad.numel()} elements out of tolerance (atol {atol}, rtol {rtol})",
            "first_mismatch": f"{list(index)}: candidate {float(c[index]):.6g}, reference {float(r[index]):.6g}",
            **errors,
        }
    if c.numel() > 1 and bool((c == c.flatten()[0]).all()) and not bool((r == r.flatten()[0]).all()):
        return {"ok": False, "message": "the output is constant while the reference's is not", **errors}
    return {"ok": True, "message": "", **errors}


def input_violation(candidate_inputs: list[Any], originals: list[Any], outputs: list[Any], torch: Any) -> str:
    """Why the candidate's run is invalid regardless of its values: it changed or aliased an input ('' if not)."""
    for position, (seen, original) in enumerate(zip(candidate_inputs, originals, strict=True)):
        if isinstance(seen, torch.Tensor) and not torch.equal(seen, original):
            return f"the candidate changed its input #{position}"
    for out in outputs:
        for position, seen in enumerate(candidate_inputs):
            if isinstance(out, torch.Tensor) and isinstance(seen, torch.Tensor) and _shares_storage(out, seen):
                return f"an output aliases input #{position} instead of being computed"
    return ""


def compare_all(candidate_out: list[Any], reference_out: list[Any], torch: Any) -> dict[str, Any]:
    """Compare every output; the first failure decides, errors are the worst over all outputs."""
    if len(candidate_out) != len(reference_out):
        return {"ok": False, "message": f"{len(candidate_out)} outputs, the reference has {len(reference_out)}"}
    worst: dict[str, Any] = {"ok": True, "message": ""}
    for out, expected in zip(candidate_out, reference_out, strict=True):
        verdict = compare(out, expected, torch)
        for key in ("max_abs_error", "mean_abs_error", "max_rel_error"):
            if key in verdict:
                worst[key] = max(worst.get(key, 0.0), verdict[key])
        if not verdict["ok"]:
            return verdict
    return worst


def run_trial(problem: Problem, models: tuple[Any, Any], seed: int, jitter: bool, torch: Any) -> dict[str, Any]:
    """One trial: candidate first on its own copies, then checks, then the reference."""
    reference_model, candidate_model = models
    if jitter:
        JITTER.trial(seed)
    else:
        JITTER.nominal()
    torch.manual_seed(seed)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    shapes = [str(list(x.shape)) for x in inputs if isinstance(x, torch.Tensor)]
    originals = clone_inputs(inputs, torch)
    candidate_inputs = clone_inputs(inputs, torch)
    poison_allocator(torch)
    candidate_out = flatten(candidate_model(*candidate_inputs), torch)
    torch.cuda.synchronize()
    violation = input_violation(candidate_inputs, originals, candidate_out, torch)
    if violation:
        return {"ok": False, "input_shapes": shapes, "message": violation}
    reference_out = flatten(reference_model(*clone_inputs(inputs, torch)), torch)
    torch.cuda.synchronize()
    return {"input_shapes": shapes, **compare_all(candidate_out, reference_out, torch)}


def run_correctness(problem: Problem, trials: int, server_seed: int, torch: Any) -> dict[str, Any]:
    """All trials; trial 0 uses the nominal shapes, later ones jittered shapes where the problem asks."""
    init = problem.get_init_inputs()
    torch.manual_seed(server_seed)
    reference_model = problem.model(*init)
    torch.manual_seed(server_seed)
    candidate_model = problem.model_new(*init)
    models = []
    for model in (reference_model, candidate_model):
        models.append(model.cuda().eval() if isinstance(model, torch.nn.Module) else model)
    results = []
    with torch.no_grad():
        for index in range(trials):
            trial = run_trial(problem, (models[0], models[1]), trial_seed(server_seed, index), index > 0, torch)
            trial["index"] = index
            if not trial["ok"] and index > 0 and results and results[0]["ok"]:
                if trial["input_shapes"] != results[0]["input_shapes"]:
                    trial["message"] += (
                        f" (inputs {', '.join(trial['input_shapes'])} differ from trial 0's: the candidate may"
                        " hard-code one shape)"
                    )
            results.append(trial)
    JITTER.nominal()
    passed = sum(1 for t in results if t["ok"])
    worst = {
        key: max((t[key] for t in results if key in t), default=None)
        for key in ("max_abs_error", "mean_abs_error", "max_rel_error")
    }
    failed = next((t for t in results if not t["ok"]), None)
    return {
        "ok": passed == trials,
        "trials": trials,
        "passed": passed,
        "trial_results": results,
        "tolerances": [{"dtype": d, "atol": a, "rtol": r} for d, (a, r) in TOLERANCES.items()],
        "message": f"{passed} / {trials} trials matched the reference"
        + (f"; trial {failed['index']}: {failed['message']}" if failed else ""),
        **worst,
    }
