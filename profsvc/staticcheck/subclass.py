"""tensor_subclass: results that only look computed (lazy tensors, dispatch hooks that defer the work)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from profsvc.staticcheck.facts import ModuleFacts
from profsvc.staticcheck.findings import Hit, hit_at
from profsvc.staticcheck.rules import RuleId

_TENSOR_BASES = frozenset({"torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"})
_HOOKS = frozenset({"__torch_function__", "__torch_dispatch__"})
_DISPATCH_PREFIXES = ("torch.overrides.", "torch.utils._python_dispatch", "torch._subclasses", "torch._C._disabled")
_SUBCLASS_FACTORIES = frozenset({"_make_subclass", "_make_wrapper_subclass", "as_subclass"})


def detect(facts: ModuleFacts) -> Iterator[Hit]:
    """All tensor_subclass hits of the module."""
    for node in ast.walk(facts.tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if (qualname := facts.imports.resolve(base)) in _TENSOR_BASES:
                    yield hit_at(RuleId.TENSOR_SUBCLASS, node, f"class {node.name} derives from {qualname}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in _HOOKS:
            yield hit_at(RuleId.TENSOR_SUBCLASS, node, f"defines {node.name}")
        elif isinstance(node, ast.Attribute):
            qualname = facts.imports.resolve(node) or ""
            if qualname.startswith(_DISPATCH_PREFIXES):
                yield hit_at(RuleId.TENSOR_SUBCLASS, node, f"uses {qualname}")
            elif node.attr in _SUBCLASS_FACTORIES:
                yield hit_at(RuleId.TENSOR_SUBCLASS, node, f"calls .{node.attr}()")
