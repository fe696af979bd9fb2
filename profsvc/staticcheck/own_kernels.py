"""The candidate's own kernels, as its source names them: what a launch record must show for "its own ran".

CUDA C++ `__global__` functions (in load_inline strings or anywhere in the
file), Triton kernels (`@triton.jit` functions, also under `@triton.autotune`
or `@triton.heuristics`), CuPy raw kernels (`RawKernel(code, "name")`); and
whether the source calls a vendor library (cuBLAS, cuBLASLt, CUTLASS) or one of
NVIDIA's template libraries (Thrust, CUB), whose kernels its extension then
launches under their own names.
"""

from __future__ import annotations

import ast
import re

from profsvc.staticcheck.syntax import parse_quietly

_ATTRIBUTES = re.compile(r"__launch_bounds__\s*\([^)]*\)|__cluster_dims__\s*\([^)]*\)|\[\[[^\]]*\]\]")
# A few words between __global__ and the name (a return type, qualifiers, a template's arguments), bounded so
# that each match looks a few words ahead, not to the end of a long text.
_GLOBAL = re.compile(r"__global__\s+(?:[\w:<>,*&]+\s++){0,24}?(\w+)\s*\(")
_VENDOR = re.compile(
    r"\bcublas\w*|\b(?:cutlass|thrust|cub)::|#\s*include\s*[<\"](?:cutlass|thrust|cub)\b", re.IGNORECASE
)


def own_kernel_names(source: str) -> tuple[frozenset[str], bool]:
    """(the kernel names the source defines, whether it calls a vendor library's kernels)."""
    plain = _ATTRIBUTES.sub(" ", source)
    names = {m.group(1) for m in _GLOBAL.finditer(plain)} | _python_kernels(source)
    return frozenset(names), bool(_VENDOR.search(source))


def _python_kernels(source: str) -> set[str]:
    """Triton kernels (functions decorated with triton.jit, under any other decorators) and CuPy raw kernels
    (`RawKernel(code, "name")`), from the module's syntax tree: exact where a pattern over the text would
    have to look arbitrarily far ahead."""
    try:
        tree = parse_quietly(source)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if any(_dotted(d.func if isinstance(d, ast.Call) else d) == "triton.jit" for d in node.decorator_list):
                names.add(node.name)
        elif isinstance(node, ast.Call) and _dotted(node.func).rpartition(".")[2] == "RawKernel":
            named = [k.value for k in node.keywords if k.arg == "name"]
            given = node.args[1] if len(node.args) > 1 else (named[0] if named else None)
            if isinstance(given, ast.Constant) and isinstance(given.value, str):
                names.add(given.value)
    return names


def _dotted(node: ast.expr) -> str:
    """`a.b.c` for a chain of attributes on a name, '' for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""
