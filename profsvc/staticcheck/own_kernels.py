"""The candidate's own kernels, as its source names them: what a launch record must show for "its own ran".

CUDA C++ `__global__` functions (in load_inline strings or anywhere in the
file), Triton kernels (`@triton.jit` functions, also under `@triton.autotune`
or `@triton.heuristics`), CuPy raw kernels (`RawKernel(code, "name")`); and
whether the source calls a vendor library (cuBLAS, cuBLASLt, CUTLASS), whose
kernels its extension then launches under their own names.
"""

from __future__ import annotations

import re

_ATTRIBUTES = re.compile(r"__launch_bounds__\s*\([^)]*\)|__cluster_dims__\s*\([^)]*\)|\[\[[^\]]*\]\]")
_GLOBAL = re.compile(r"__global__\s+(?:[\w:<>,\s*&]+?\s+)?(\w+)\s*\(")
_TRITON = re.compile(r"@triton\.jit[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)")
_TRITON_WRAPPED = re.compile(r"@triton\.(?:autotune|heuristics)\b(?:.|\n)*?@triton\.jit[^\n]*\n\s*def\s+(\w+)")
_RAW_KERNEL = re.compile(r"RawKernel\s*\((?:.|\n)*?,\s*['\"](\w+)['\"]")
_VENDOR = re.compile(r"\bcublas\w*|\bcutlass::|#\s*include\s*[<\"]cutlass", re.IGNORECASE)


def own_kernel_names(source: str) -> tuple[frozenset[str], bool]:
    """(the kernel names the source defines, whether it calls a vendor library's kernels)."""
    plain = _ATTRIBUTES.sub(" ", source)
    patterns = (_GLOBAL, _TRITON, _TRITON_WRAPPED, _RAW_KERNEL)
    names = {m.group(1) for pattern in patterns for m in pattern.finditer(plain)}
    return frozenset(names), bool(_VENDOR.search(source))
