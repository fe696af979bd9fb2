"""Cheap checks inside the C++/CUDA source strings a candidate hands to load_inline.

Regular expressions over the text with comments blanked out: no C++ parser, so
each pattern is narrow enough that honest kernels do not match it.
"""

from __future__ import annotations

import ast
import bisect
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
# Namespaces and qualifiers bounded, as in cppsource: each match looks a few words ahead, not to the end. A bound
# counts a run of spaces (padding, a blanked comment) as one.
_ATEN_CALL = re.compile(rf"(?:\b(?:torch|at)::(?:\w+::){{0,8}}|\.\s*)(?:{_ATEN_OPS})\s*\(")
_VENDOR_CALL = re.compile(
    r"\b(?:cublas\w*|cudnn\w*|cusparse\w*|cufft\w*|cusolver\w*)\s*\(|getCurrentCUDA(?:Blas|Sparse)Handle"
)
_STREAM_CREATE = re.compile(r"\bcudaStreamCreate\w*|\bgetStreamFromPool\b|\bcudaStreamPerThread\b")
_STREAM_JOIN = re.compile(r"cudaStreamSynchronize|cudaDeviceSynchronize|cudaStreamWaitEvent|cudaEventSynchronize")
_CONCURRENCY = re.compile(r"std::j?thread\b|std::async\b|\bpthread_create\b|\bfork\s*\(|\bpopen\s*\(|\bsystem\s*\(")
_STATIC_TENSOR = re.compile(
    r"\bstatic\s+(?:const\s+)?(?:torch|at)::Tensor\b|\bstatic\s+std::(?:unordered_)?map\s*<(?:[^;\s]|\s++){0,512}?Tensor"
)
# A static variable of a host function: it outlives the call like a global.
_STATIC_VARIABLE = re.compile(
    r"\bstatic\s+(?!inline\b|constexpr\b|__\w+__\b|void\b)(?:const\s+|volatile\s+){0,4}[\w:]+(?:\s*<(?:[^;{}\s]|\s++){0,256}?>)?"
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
    statics = list(_STATIC_VARIABLE.finditer(source))
    if not statics:
        return
    # The names each use could concern, found in one pass each (not one search of the text per static).
    keyed = _compared_with_data_ptr(source)
    replayed = {m.group(1) for m in _COPIED_FROM.finditer(source)}
    returned = {m.group(1) for m in _RETURNED.finditer(source)}
    for match in statics:
        name = match.group(1)
        if name in keyed or name in replayed or name in returned:
            copied = name in replayed or name in returned
            why = "hands its contents back" if copied else "compares it with an input's data_ptr()"
            detail = f"the extension keeps `{match.group(0).rstrip('=;[{ ')}` across calls and {why}"
            yield string_hit(node, source, match.start(), RuleId.RESULT_CACHING, detail)


# The second argument of a copy (after an optional cast): what it reads from.
_COPIED_FROM = re.compile(
    r"\b(?:cudaMemcpy\w*|memcpy|std::copy)\s*\((?:[^,;\s]|\s++){1,512},\s*(?:\([^()]*\)\s*)?(\w+)\b"
)
_RETURNED = re.compile(r"\breturn\s+(\w+)\s*;")
_COMPARISON = re.compile(r"[!=]=")
_WORD = re.compile(r"\w+")


def _compared_with_data_ptr(source: str) -> set[str]:
    """Names on one side of a == or != whose other side, in the same statement and line, names data_ptr."""
    names: set[str] = set()
    for statement in re.split(r"[;\n]", source):
        if "data_ptr" not in statement:
            continue
        operators = [m.start() for m in _COMPARISON.finditer(statement)]
        if not operators:
            continue
        first_pointer, last_pointer = statement.find("data_ptr"), statement.rfind("data_ptr")
        later = bisect.bisect_right(operators, first_pointer)
        after_pointer = operators[later] if later < len(operators) else -1
        for word in _WORD.finditer(statement):
            # name ... == ... data_ptr (the first operator after the name, data_ptr after it), or data_ptr ... == ...
            # name (the first operator after data_ptr, the name after it)
            following = bisect.bisect_left(operators, word.end())
            before_pointer = following < len(operators) and operators[following] + 2 <= last_pointer
            if before_pointer or 0 <= after_pointer <= word.start() - 2:
                names.add(word.group())
    return names
