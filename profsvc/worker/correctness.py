"""Correctness trials: the candidate against the reference on fresh random inputs (run by the judge).

Per trial: inputs from a seed derived from the server's secret seed (cast to
the request's precision, as both models are: profsvc.worker.precision); the
candidate runs first, in its own process, on its own copies of the inputs,
with its allocator's free memory poisoned (0xFF bytes: NaN for floats) so
unwritten output elements show; then the inputs as its call left them are
checked for changes, its outputs for aliasing the inputs, and only then does the
reference run, here, on other copies. The first trial also records the kernels
the call launched: where none is the candidate's own, it computed nothing of
its own.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from profsvc.worker.precision import EXACT, cast_model, cast_values, tolerances
from profsvc.worker.problem import Problem
from profsvc.worker.shapes import JITTER

# (atol, rtol) by output dtype.
Tolerances = Mapping[str, tuple[float, float]]
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


def compare(candidate: Any, reference: Any, torch: Any, tolerance: Tolerances) -> dict[str, Any]:
    """Compare one output tensor pair within the tolerance of its dtype: ok, message, errors, first mismatch."""
    if not isinstance(candidate, torch.Tensor):
        return {"ok": False, "message": f"the candidate returned {type(candidate).__name__}, not a tensor"}
    if candidate.shape != reference.shape:
        return {"ok": False, "message": f"output shape {list(candidate.shape)} != reference {list(reference.shape)}"}
    if candidate.dtype != reference.dtype:
        return {"ok": False, "message": f"output dtype {candidate.dtype} != reference {reference.dtype}"}
    if candidate.device != reference.device:
        return {"ok": False, "message": f"output on {candidate.device}, reference on {reference.device}"}
    dtype = str(reference.dtype).removeprefix("torch.")
    atol, rtol = tolerance.get(dtype, EXACT)
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


def changed_input(candidate_inputs: list[Any], originals: list[Any], torch: Any) -> str:
    """Why the candidate's run is invalid regardless of its values: it changed an input ('' if not)."""
    if len(candidate_inputs) != len(originals):
        return "the candidate's process returned a different number of inputs"
    for position, (seen, original) in enumerate(zip(candidate_inputs, originals, strict=True)):
        if isinstance(original, torch.Tensor):
            same = isinstance(seen, torch.Tensor) and seen.shape == original.shape and seen.dtype == original.dtype
            if not same or not torch.equal(seen.to(original.device), original):
                return f"the candidate changed its input #{position}"
    return ""


def outputs_alias_inputs(outputs: list[Any], inputs: list[Any], torch: Any) -> str:
    """An output that shares memory with an input instead of being computed ('' if none; in the candidate's
    process, where the memory is)."""
    for out in outputs:
        for position, seen in enumerate(inputs):
            if isinstance(out, torch.Tensor) and isinstance(seen, torch.Tensor) and _shares_storage(out, seen):
                return f"an output aliases input #{position} instead of being computed"
    return ""


@dataclass
class CandidateCall:
    """One call of the candidate, as its process reported it (tensors on this process's GPU)."""

    outputs: list[Any]
    inputs: list[Any]
    aliases: str = ""
    kernels: list[str] = field(default_factory=list)
    left_running: list[str] = field(default_factory=list)  # kernels still running once the call's stream went on


class Candidate(Protocol):
    """The candidate's model, in a process of its own (profsvc.worker.judge.CandidateProcess)."""

    def call(self, inputs: list[Any], *, poison: bool, record: bool) -> CandidateCall:
        """Run one call on copies of `inputs`."""
        ...


# Kernels the candidate's extension may launch through a vendor library it links (cuBLAS, cuBLASLt, CUTLASS) or
# instantiates from NVIDIA's template libraries (Thrust, CUB); PyTorch's own CUB kernels live in its wrapped
# namespace `at_cuda_detail::cub`, so a torch.sort in the candidate's forward does not count.
_VENDOR_KERNEL = re.compile(r"gemm|gemv|xmma|cublas|cutlass|(?<!at_cuda_detail::)\b(?:cub|thrust)::", re.IGNORECASE)
_KERNEL_NAME = re.compile(r"(?:^|[\s:])([A-Za-z_]\w*)\s*(?:<.*)?\(")


def kernel_base_name(name: str) -> str:
    """A launched kernel's own name without return type, namespace, template and parameters."""
    match = _KERNEL_NAME.search(name)
    return match.group(1) if match else name.strip()


def own_kernels_ran(launched: list[str], own: set[str], vendor: bool) -> bool:
    """Whether any launched kernel is one of the candidate's own (`vendor`: its extension calls cuBLAS, Thrust
    & co.)."""
    return any(kernel_base_name(k) in own or (vendor and _VENDOR_KERNEL.search(k)) for k in launched)


def compare_all(
    candidate_out: list[Any], reference_out: list[Any], torch: Any, tolerance: Tolerances
) -> dict[str, Any]:
    """Compare every output; the first failure decides, errors are the worst over all outputs."""
    if len(candidate_out) != len(reference_out):
        return {"ok": False, "message": f"{len(candidate_out)} outputs, the reference has {len(reference_out)}"}
    worst: dict[str, Any] = {"ok": True, "message": ""}
    for out, expected in zip(candidate_out, reference_out, strict=True):
        verdict = compare(out, expected, torch, tolerance)
        for key in ("max_abs_error", "mean_abs_error", "max_rel_error"):
            if key in verdict:
                worst[key] = max(worst.get(key, 0.0), verdict[key])
        if not verdict["ok"]:
            return verdict
    return worst


@dataclass(frozen=True)
class OwnKernels:
    """What counts as the candidate's own kernel: its `__global__` and Triton kernel names, and whether its
    extension calls a vendor library (whose kernels it then launches). None: do not check."""

    names: frozenset[str]
    vendor: bool = False


def run_trial(
    problem: Problem,
    reference_model: Any,
    candidate: Candidate,
    seed: int,
    jitter: bool,
    torch: Any,
    own: OwnKernels | None,
    precision: str,
    record: bool = False,
) -> dict[str, Any]:
    """One trial in a precision mode: the candidate first on its own copies, then checks, then the reference.

    `record`: also record the call's kernels (whether its own ran, with `own`; whether it left any running)."""
    if jitter:
        JITTER.trial(seed)
    else:
        JITTER.nominal()
    torch.manual_seed(seed)
    inputs = cast_values(
        [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()], precision, torch
    )
    shapes = [str(list(x.shape)) for x in inputs if isinstance(x, torch.Tensor)]
    originals = clone_inputs(inputs, torch)
    called = candidate.call(inputs, poison=True, record=record or own is not None)
    violation = changed_input(called.inputs, originals, torch) or called.aliases
    if violation:
        return {"ok": False, "input_shapes": shapes, "message": violation}
    if own is not None and not own_kernels_ran(called.kernels, set(own.names), own.vendor):
        launched = ", ".join(sorted({kernel_base_name(k) for k in called.kernels})[:8]) or "none"
        message = f"no kernel of the candidate's own ran: the call launched only other kernels ({launched})"
        return {"ok": False, "input_shapes": shapes, "message": message}
    if called.left_running:
        running = ", ".join(sorted({kernel_base_name(k) for k in called.left_running})[:8])
        message = (
            f"work left running: the call returned while its kernel(s) {running} still ran on a stream it never "
            "joined to the current one, outside any timing of the call"
        )
        return {"ok": False, "input_shapes": shapes, "message": message}
    reference_out = flatten(reference_model(*clone_inputs(inputs, torch)), torch)
    torch.cuda.synchronize()
    return {"input_shapes": shapes, **compare_all(called.outputs, reference_out, torch, tolerances(precision))}


def run_correctness(
    problem: Problem,
    candidate: Candidate,
    trials: int,
    server_seed: int,
    torch: Any,
    own: OwnKernels | None,
    models_seed: int,
    precision: str,
) -> dict[str, Any]:
    """All trials; trial 0 uses the nominal shapes (and checks the candidate's own kernels ran), later ones
    jittered shapes where the problem asks. The reference is built after seeding with `models_seed`, as the
    candidate's model was in its process, from the same init inputs, and cast to the precision as that one."""
    init = cast_values(problem.get_init_inputs(), precision, torch)
    torch.manual_seed(models_seed)
    reference_model = problem.model(*init)
    if isinstance(reference_model, torch.nn.Module):
        reference_model = cast_model(reference_model.cuda().eval(), precision, torch)
    results = []
    with torch.no_grad():
        for index in range(trials):
            checks = own if index == 0 else None
            seed = trial_seed(server_seed, index)
            trial = run_trial(
                problem, reference_model, candidate, seed, index > 0, torch, checks, precision, record=index == 0
            )
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
        "tolerances": [{"dtype": d, "atol": a, "rtol": r} for d, (a, r) in tolerances(precision).items()],
        "message": f"{passed} / {trials} trials matched the reference"
        + (f"; trial {failed['index']}: {failed['message']}" if failed else ""),
        **worst,
    }
