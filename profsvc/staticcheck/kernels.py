"""no_custom_kernel: a forward path that runs no kernel of the candidate's own, so PyTorch does all the work.

A kernel of its own is a call of compiled code the candidate built: a load_inline
extension whose source launches a kernel with a body, a Triton/CuTe/TileLang/Numba
kernel function, a CuPy raw kernel, a registered custom op. Everything else forward
might do (operators, tensor methods, layers, operator.matmul, a lambda, a
torch.compile'd function) is PyTorch, however it is reached.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from profsvc.staticcheck.cppsource import blank_comments, launch_gap
from profsvc.staticcheck.facts import MODEL_NEW, ModuleFacts
from profsvc.staticcheck.findings import Hit, hit_at
from profsvc.staticcheck.rules import RuleId

_LOAD_INLINE_SOURCES = ("cpp_sources", "cuda_sources")


def detect(facts: ModuleFacts) -> Iterator[Hit]:
    """The no_custom_kernel hit of the module, at ModelNew's forward (or where ModelNew is bound)."""
    anchor = _anchor(facts)
    if anchor is None:
        return  # no ModelNew to judge: missing_model_new says so
    if not any(
        isinstance(node, ast.Call) and facts.is_kernel_call(node, scope)
        for scope in facts.reachable
        for node in scope.nodes
    ):
        yield hit_at(
            RuleId.NO_CUSTOM_KERNEL,
            anchor,
            "forward calls no compiled extension, Triton or other kernel, so PyTorch does all the work",
        )
        return
    if (gap := _extension_gap(facts)) is not None:
        yield hit_at(RuleId.NO_CUSTOM_KERNEL, anchor, f"the extension it calls launches nothing: {gap}")


def _anchor(facts: ModuleFacts) -> ast.AST | None:
    """Where the finding goes: forward's def, else the class whose forward comes from elsewhere, else the binding."""
    for name in ("forward", "__call__"):
        if name in facts.methods:
            return facts.methods[name][1]
    for cls in facts.model_new_classes:
        bound = any(
            isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "forward" for t in s.targets)
            for s in cls.body
        )
        layer_base = any(
            facts.is_reference(b) or (facts.imports.resolve(b) or "torch.nn.Module") != "torch.nn.Module"
            for b in cls.bases
        )
        if bound or layer_base:
            return cls
    for node in facts.tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == MODEL_NEW for t in node.targets):
            if facts.is_reference(node.value) or (facts.imports.resolve(node.value) or "").startswith("torch.nn."):
                return node
    return None


def _extension_gap(facts: ModuleFacts) -> str | None:
    """Why the module's compiled extensions launch nothing; None when they do, or when their source is unknown.

    Only load_inline extensions whose sources are all string literals of the module can be judged: a Triton
    kernel, a CuPy or ctypes module, sources read from files are taken to launch what they say.
    """
    if facts.kernel_functions:
        return None
    builders = [n for n in facts.nodes if isinstance(n, ast.Call) and facts.is_builder_call(n)]
    texts: list[str] = []
    for call in builders:
        name = facts.imports.resolve(call.func) or ""
        if not name.endswith("load_inline"):
            return None
        for source in _load_inline_sources(call):
            strings = _literal_strings(facts, source, depth=4)
            if strings is None:
                return None
            texts.extend(strings)
    if not builders:
        return None
    return launch_gap(blank_comments("\n".join(texts)))


def _load_inline_sources(call: ast.Call) -> list[ast.expr]:
    # load_inline(name, cpp_sources, cuda_sources=None, functions=None, ...)
    found = list(call.args[1:3])
    found += [k.value for k in call.keywords if k.arg in _LOAD_INLINE_SOURCES]
    return found


def _literal_strings(facts: ModuleFacts, node: ast.expr, depth: int) -> list[str] | None:
    """The string literals an expression is made of; None when part of it is computed (a file read, a call)."""
    if depth < 0:
        return None
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else [] if node.value is None else None
    if isinstance(node, ast.JoinedStr):
        # f-strings interpolate sizes and names; the literal parts hold the kernels.
        return [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    if isinstance(node, ast.List | ast.Tuple):
        parts = [_literal_strings(facts, e, depth - 1) for e in node.elts]
        return None if any(p is None for p in parts) else [s for p in parts if p for s in p]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal_strings(facts, node.left, depth - 1), _literal_strings(facts, node.right, depth - 1)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Name) and node.id in facts.module_values:
        return _literal_strings(facts, facts.module_values[node.id], depth - 1)
    return None
