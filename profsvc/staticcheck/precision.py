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
    for node in ast.walk(facts.tree):
        if id(node) in inside_reference:
            continue
        found = _downcast(facts, node)
        if found is not None and found[1] not in allowed:
            what, kind = found
            yield hit_at(RuleId.PRECISION_DOWNCAST, node, downcast_detail(what, kind, reference_known))


def _downcast(facts: ModuleFacts, node: ast.AST) -> tuple[str, str] | None:
    if isinstance(node, ast.Attribute):
        qualname = facts.imports.resolve(node) or ""
        kind = _DTYPES.get(qualname.rsplit(".", 1)[-1]) if qualname.startswith("torch.") else None
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
