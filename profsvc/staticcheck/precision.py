"""precision_downcast on the Python side, and which low precisions the reference itself uses.

A downcast is only gaming when the reference computes in higher precision, so
every kind found in the candidate is checked against the reference's source
(the reference text when given, else the candidate's own Model/get_inputs).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from profsvc.staticcheck.facts import ModuleFacts
from profsvc.staticcheck.findings import Hit, hit_at
from profsvc.staticcheck.rules import RuleId

FLOAT16, BFLOAT16, FLOAT8, TF32 = "float16", "bfloat16", "float8", "tf32"

_REFERENCE_PATTERNS = {
    FLOAT16: re.compile(r"(?<!b)float16|\.half\(|torch\.half\b|HalfTensor|kHalf|__half|autocast"),
    BFLOAT16: re.compile(r"bfloat16|BFloat16|autocast"),
    FLOAT8: re.compile(r"float8|fp8|Float8"),
    TF32: re.compile(r"tf32|set_float32_matmul_precision"),
}
_DTYPES = {
    "float16": FLOAT16,
    "half": FLOAT16,
    "HalfTensor": FLOAT16,
    "bfloat16": BFLOAT16,
    "BFloat16Tensor": BFLOAT16,
    "float8_e4m3fn": FLOAT8,
    "float8_e5m2": FLOAT8,
    "float8_e4m3fnuz": FLOAT8,
    "float8_e5m2fnuz": FLOAT8,
}
# Triton's dtypes (tl.float16, tl.float8e4nv ...) inside @triton.jit kernels.
_TRITON_DTYPES = {
    "float16": FLOAT16,
    "bfloat16": BFLOAT16,
    "float8e4nv": FLOAT8,
    "float8e5": FLOAT8,
    "float8e4b8": FLOAT8,
    "float8e5b16": FLOAT8,
    "float8e4b15": FLOAT8,
}
# tl.dot's precision for fp32 operands: TF32 unless told otherwise ("ieee"; "tf32x3" is fp32-accurate).
_TRITON_DOT = "triton.language.dot"
_FULL_PRECISION_DOT = frozenset({"ieee", "tf32x3"})
_CAST_METHODS = {"half": FLOAT16, "bfloat16": BFLOAT16}
_AUTOCASTS = frozenset({"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast"})
_PRECISION_FLAGS = {
    "torch.backends.cuda.matmul.allow_tf32": TF32,
    "torch.backends.cudnn.allow_tf32": TF32,
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": FLOAT16,
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction": BFLOAT16,
}


def reference_kinds(reference_text: str) -> frozenset[str]:
    """The low-precision kinds the reference source mentions."""
    return frozenset(kind for kind, pattern in _REFERENCE_PATTERNS.items() if pattern.search(reference_text))


def downcast_detail(what: str, kind: str, reference_known: bool) -> str:
    """The detail of a precision finding: what casts, to what, compared with what."""
    if reference_known:
        return f"{what} ({kind}; the reference does not use {kind})"
    return f"{what} ({kind}; no reference source to compare with)"


def detect(facts: ModuleFacts, allowed: frozenset[str], reference_known: bool) -> Iterator[Hit]:
    """Python-side downcasts to a kind the reference does not use, outside the reference's own code."""
    inside_reference = {id(n) for ref in facts.reference_nodes for n in ast.walk(ref)}
    for node in facts.nodes:
        if id(node) in inside_reference:
            continue
        found = _downcast(facts, node) or _triton_dot(facts, node, allowed, reference_known)
        if found is not None and found[1] not in allowed:
            what, kind = found
            yield hit_at(RuleId.PRECISION_DOWNCAST, node, downcast_detail(what, kind, reference_known))


def _downcast(facts: ModuleFacts, node: ast.AST) -> tuple[str, str] | None:
    if isinstance(node, ast.Attribute):
        qualname = facts.imports.resolve(node) or ""
        last = qualname.rsplit(".", 1)[-1]
        if qualname.startswith("torch."):
            kind = _DTYPES.get(last)
        elif qualname.startswith("triton.language."):
            kind = _TRITON_DTYPES.get(last)
        else:
            kind = None
        return (f"uses {qualname}", kind) if kind else None
    if isinstance(node, ast.Call):
        return _downcast_call(facts, node)
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is True:
        for target in node.targets:
            qualname = facts.imports.resolve(target) or ""
            if qualname in _PRECISION_FLAGS:
                return f"sets {qualname}", _PRECISION_FLAGS[qualname]
    return None


def _downcast_call(facts: ModuleFacts, call: ast.Call) -> tuple[str, str] | None:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _CAST_METHODS and not call.args:
        return f"casts with .{func.attr}()", _CAST_METHODS[func.attr]
    qualname = facts.imports.resolve(func) or ""
    if qualname in _AUTOCASTS:
        dtypes = [facts.imports.resolve(k.value) or "" for k in call.keywords if k.arg == "dtype"]
        kind = BFLOAT16 if any(d.endswith("bfloat16") for d in dtypes) else FLOAT16
        return f"runs under {qualname}", kind
    if qualname == "torch.set_float32_matmul_precision":
        if any(isinstance(a, ast.Constant) and a.value in ("high", "medium") for a in call.args):
            return "calls torch.set_float32_matmul_precision", TF32
    return None


def _triton_dot(
    facts: ModuleFacts, node: ast.AST, allowed: frozenset[str], reference_known: bool
) -> tuple[str, str] | None:
    """tl.dot that may round fp32 operands to TF32: allowed explicitly, or by default where the reference is fp32.

    With a reference in fp16/bf16/fp8 the operands are already narrow, and TF32 says nothing; without a
    reference, the operands' dtype is unknown.
    """
    if not isinstance(node, ast.Call) or (facts.imports.resolve(node.func) or "") != _TRITON_DOT:
        return None
    options = {k.arg: k.value for k in node.keywords if k.arg in ("allow_tf32", "input_precision")}
    allow = options.get("allow_tf32")
    precision = options.get("input_precision")
    if isinstance(allow, ast.Constant) and allow.value is False:
        return None
    if isinstance(precision, ast.Constant) and precision.value in _FULL_PRECISION_DOT:
        return None
    explicit = (isinstance(allow, ast.Constant) and allow.value is True) or precision is not None
    if explicit:
        return "calls tl.dot with TF32 allowed", TF32
    if not reference_known or allowed & {FLOAT16, BFLOAT16, FLOAT8}:
        return None
    if any(_downcast(facts, inner) for arg in node.args for inner in ast.walk(arg)):
        return None  # tl.dot(a.to(tl.float16), ...): the cast is the finding, and the operands are not fp32
    return 'calls tl.dot, which rounds fp32 operands to TF32 unless input_precision="ieee"', TF32
