"""Cheap checks inside the C++/CUDA source strings a candidate hands to load_inline.

Regular expressions over the text with comments blanked out: no C++ parser, so
each pattern is narrow enough that honest kernels do not match it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from profsvc.staticcheck.cppsource import string_hit
from profsvc.staticcheck.facts import ModuleFacts
from profsvc.staticcheck.findings import Hit
from profsvc.staticcheck.precision import BFLOAT16, FLOAT8, FLOAT16, TF32, downcast_detail
from profsvc.staticcheck.rules import RuleId

_ATEN_OPS = (
    r"matmul|mm|bmm|addmm|addmv|baddbmm|linear|conv[123]d|conv_transpose[123]d|convolution|_convolution"
    r"|cudnn_convolution|softmax|log_softmax|_softmax|layer_norm|batch_norm|group_norm|instance_norm|relu|relu_"
    r"|gelu|silu|sigmoid|tanh|einsum|scaled_dot_product_attention|embedding|max_pool[123]d|avg_pool[123]d"
    r"|adaptive_avg_pool[123]d|sum|mean|amax|logsumexp|cumsum|norm|cat|stack|mul|add|sub|div|exp"
    r"|matmul_out|mm_out|addmm_out|bmm_out"
)
_ATEN_CALL = re.compile(rf"(?:\b(?:torch|at)::(?:\w+::)*|\.\s*)(?:{_ATEN_OPS})\s*\(")
_VENDOR_CALL = re.compile(
    r"\b(?:cublas\w*|cudnn\w*|cusparse\w*|cufft\w*|cusolver\w*)\s*\(|getCurrentCUDA(?:Blas|Sparse)Handle"
)
_STREAM_CREATE = re.compile(r"\bcudaStreamCreate\w*|\bgetStreamFromPool\b|\bcudaStreamPerThread\b")
_STREAM_JOIN = re.compile(r"cudaStreamSynchronize|cudaDeviceSynchronize|cudaStreamWaitEvent|cudaEventSynchronize")
_CONCURRENCY = re.compile(r"std::j?thread\b|std::async\b|\bpthread_create\b|\bfork\s*\(|\bpopen\s*\(|\bsystem\s*\(")
_STATIC_TENSOR = re.compile(
    r"\bstatic\s+(?:const\s+)?(?:torch|at)::Tensor\b|\bstatic\s+std::(?:unordered_)?map\s*<[^;]*Tensor"
)
# A static variable of a host function: it outlives the call like a global.
_STATIC_VARIABLE = re.compile(
    r"\bstatic\s+(?!inline\b|constexpr\b|__\w+__\b|void\b)(?:const\s+|volatile\s+)*[\w:]+(?:\s*<[^;{}]*?>)?"
    r"(?:\s*\*\s*(?:const\s*)?|\s*&\s*|\s+)(\w+)\s*(?:=|;|\[|\{)"
)
_DOWNCAST = re.compile(
    r"__float2half\w*|__floats2half2\w*|__float22half2\w*|__float2bfloat16\w*|__floats2bfloat162\w*"
    r"|__float22bfloat162\w*|__float_to_tf32|wmma::precision::tf32|cvt\.rna\.tf32\w*|__nv_cvt_float\w*_to_fp8\w*"
    r"|\.to\(\s*(?:torch|at|c10)::k(?:Half|Float16|BFloat16|Float8\w*)|\.half\(\)|\.bfloat16\(\)"
)


@dataclass(frozen=True)
class _Pattern:
    rule_id: str
    regex: re.Pattern[str]
    describe: Callable[[str], str]
    # A pattern that does not count when this one is found in the same source (a stream that is joined back).
    unless: re.Pattern[str] | None = None


_PATTERNS = (
    _Pattern(RuleId.CUDA_TORCH_FALLBACK, _ATEN_CALL, lambda m: f"calls {m.rstrip('( ')}"),
    _Pattern(RuleId.CUDA_VENDOR_LIBRARY, _VENDOR_CALL, lambda m: f"calls {m.rstrip('( ')}"),
    _Pattern(RuleId.SIDE_STREAM, _STREAM_CREATE, lambda m: f"the extension uses {m} and never waits", _STREAM_JOIN),
    _Pattern(RuleId.THREAD_OR_PROCESS, _CONCURRENCY, lambda m: f"the extension uses {m.rstrip('( ')}"),
    _Pattern(RuleId.RESULT_CACHING, _STATIC_TENSOR, lambda m: f"the extension keeps a tensor in `{m}`"),
)


def _downcast_kind(match: str) -> str:
    lowered = match.lower()
    if "bfloat16" in lowered:
        return BFLOAT16
    if "tf32" in lowered:
        return TF32
    if "fp8" in lowered or "float8" in lowered:
        return FLOAT8
    return FLOAT16


def detect(facts: ModuleFacts, allowed: frozenset[str], reference_known: bool) -> Iterator[Hit]:
    """Hits inside every C++/CUDA source string of the module."""
    for string in facts.cpp_strings:
        yield from _check_source(string.node, string.text, allowed, reference_known)


def _check_source(node: ast.Constant, source: str, allowed: frozenset[str], reference_known: bool) -> Iterator[Hit]:
    for pattern in _PATTERNS:
        if pattern.unless is not None and pattern.unless.search(source):
            continue
        for match in pattern.regex.finditer(source):
            yield string_hit(node, source, match.start(), pattern.rule_id, pattern.describe(match.group()))
    yield from _static_caches(node, source)
    for match in _DOWNCAST.finditer(source):
        kind = _downcast_kind(match.group())
        if kind not in allowed:
            detail = downcast_detail(f"the extension uses {match.group()}", kind, reference_known)
            yield string_hit(node, source, match.start(), RuleId.PRECISION_DOWNCAST, detail)


def _static_caches(node: ast.Constant, source: str) -> Iterator[Hit]:
    """Static variables that key on an input's address or hand stored data back: a result cache in C++.

    A static workspace (allocated once, grown when too small, written by the kernel each call) does neither.
    """
    for match in _STATIC_VARIABLE.finditer(source):
        name = re.escape(match.group(1))
        keyed = re.search(rf"\b{name}\b[^;\n]*[!=]=[^;\n]*data_ptr|data_ptr[^;\n]*[!=]=[^;\n]*\b{name}\b", source)
        replayed = re.search(rf"\b(?:cudaMemcpy\w*|memcpy|std::copy)\s*\([^,;]+,\s*(?:\([^()]*\)\s*)?{name}\b", source)
        returned = re.search(rf"\breturn\s+{name}\s*;", source)
        if keyed or replayed or returned:
            why = "hands its contents back" if replayed or returned else "compares it with an input's data_ptr()"
            detail = f"the extension keeps `{match.group(0).rstrip('=;[{ ')}` across calls and {why}"
            yield string_hit(node, source, match.start(), RuleId.RESULT_CACHING, detail)
