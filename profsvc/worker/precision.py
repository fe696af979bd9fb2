"""Precision modes, as KernelBench has them: a problem's floating-point tensors cast to one dtype, and the
correctness tolerances that go with it.

KernelBench (ScalingIntelligence/KernelBench, src/kernelbench/eval.py) casts the tensors get_inputs and
get_init_inputs return (`_process_input_tensor`) and both models (`model.to(device=device, dtype=precision)`:
their floating-point parameters and buffers) to the precision's dtype, and compares outputs with atol = rtol =
`get_tolerance_for_precision(precision)`. Here only floating-point tensors are cast: integer inputs (indices,
labels, masks) keep their dtype, as torch's Module.to(dtype) keeps integer buffers. fp32 casts nothing and keeps
profsvc's tolerances by output dtype, as before precision modes existed (KernelBench's fp32 tolerance is 1e-4).

The judge, the candidate's process (on its own model, after the candidate's code built it) and the profiling
harness cast; the candidate's code never sees a tensor of the other precision.
"""

from __future__ import annotations

from typing import Any

# The modes, as the contract's Precision names them (a test holds the two equal): importing the contract here would
# add pydantic to every worker's start.
PRECISIONS = ("fp32", "fp16", "bf16")
DEFAULT_PRECISION = "fp32"
# The torch dtype each mode casts to; fp32 casts nothing.
CAST_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}
# (atol, rtol) by output dtype in fp32 mode; the result states the ones used.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-3, 1e-3),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}
# What any other output dtype (integers, booleans) must meet: equality.
EXACT = (0.0, 0.0)
# KernelBench's atol and rtol for fp16 and bf16 (after torchbench): src/kernelbench/eval.py,
# get_tolerance_for_precision ({torch.float16: 1e-2, torch.bfloat16: 1e-2}); it applies to every output.
HALF_PRECISION_TOLERANCE = 1e-2


def tolerances(precision: str) -> dict[str, tuple[float, float]]:
    """(atol, rtol) by floating-point output dtype in a precision mode; any other dtype must match exactly."""
    if precision in CAST_DTYPES:
        return {dtype: (HALF_PRECISION_TOLERANCE, HALF_PRECISION_TOLERANCE) for dtype in TOLERANCES}
    return dict(TOLERANCES)


def _cast(value: Any, dtype: Any, torch: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, list | tuple):
        return type(value)(_cast(v, dtype, torch) for v in value)
    return value


def cast_values(value: Any, precision: str, torch: Any) -> Any:
    """The value with every floating-point tensor cast to the mode's dtype (nested lists and tuples kept; other
    tensors and non-tensors as they are)."""
    name = CAST_DTYPES.get(precision)
    return _cast(value, getattr(torch, name), torch) if name else value


def cast_model(model: Any, precision: str, torch: Any) -> Any:
    """The model with its floating-point parameters and buffers cast to the mode's dtype (a model that is no
    torch Module, such as a plain function, as it is)."""
    name = CAST_DTYPES.get(precision)
    if name is None or not isinstance(model, torch.nn.Module):
        return model
    return model.to(getattr(torch, name))
