"""tensor_subclass: results that only look computed (lazy tensors, dispatch hooks, methods replaced on an instance)."""

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
# What the harness calls on an output to read or compare it: replacing one on the instance fakes the result.
_TENSOR_READERS = frozenset(
    {
        "cpu", "cuda", "to", "numpy", "tolist", "item", "float", "double", "half", "clone", "detach", "contiguous",
        "__getitem__", "__eq__", "__ne__", "__sub__", "__abs__", "__array__", "__repr__", "__str__", "__float__",
        "abs", "sub", "eq", "ne", "equal", "allclose", "isclose", "isnan", "isinf", "isfinite", "max", "min", "sum",
        "mean", "all", "any", "data_ptr", "size", "stride", "dim", "numel", "view", "reshape", "flatten", "sort",
        "norm", "to_dense", "synchronize",
    }
)  # fmt: skip
_CALLABLE_FACTORIES = frozenset({"functools.partial", "types.MethodType"})


def detect(facts: ModuleFacts) -> Iterator[Hit]:
    """All tensor_subclass hits of the module."""
    callables = _callable_names(facts.nodes)
    for node in facts.nodes:
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if (qualname := facts.imports.resolve(base)) in _TENSOR_BASES:
                    yield hit_at(RuleId.TENSOR_SUBCLASS, node, f"class {node.name} derives from {qualname}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in _HOOKS:
            yield hit_at(RuleId.TENSOR_SUBCLASS, node, f"defines {node.name}")
        elif isinstance(node, ast.Assign):
            yield from _instance_overrides(facts, node, callables)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            yield from _setattr_override(facts, node, callables)
        elif isinstance(node, ast.Attribute):
            yield from _dispatch_attribute(facts, node)


def _dispatch_attribute(facts: ModuleFacts, node: ast.Attribute) -> Iterator[Hit]:
    qualname = facts.imports.resolve(node) or ""
    if qualname.startswith(_DISPATCH_PREFIXES):
        yield hit_at(RuleId.TENSOR_SUBCLASS, node, f"uses {qualname}")
    elif node.attr in _SUBCLASS_FACTORIES:
        yield hit_at(RuleId.TENSOR_SUBCLASS, node, f"calls .{node.attr}()")


def _callable_names(nodes: list[ast.AST]) -> set[str]:
    """Names bound to a function anywhere in the module: defs (nested too) and `name = lambda ...`."""
    found = {n.name for n in nodes if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    for node in nodes:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return found


def _instance_overrides(facts: ModuleFacts, node: ast.Assign, callables: set[str]) -> Iterator[Hit]:
    """out.cpu = lambda: expected, out.__class__ = Fake: an output whose reads answer what the author chose."""
    for target in node.targets:
        if not isinstance(target, ast.Attribute) or _is_owner(facts, target.value):
            continue
        if target.attr == "__class__" or (
            target.attr in _TENSOR_READERS and _is_callable(facts, node.value, callables)
        ):
            yield hit_at(
                RuleId.TENSOR_SUBCLASS, target, f"replaces .{target.attr} on the instance {ast.unparse(target.value)}"
            )


def _setattr_override(facts: ModuleFacts, call: ast.Call, callables: set[str]) -> Iterator[Hit]:
    if len(call.args) < 3 or _is_owner(facts, call.args[0]):
        return
    name = call.args[1]
    if isinstance(name, ast.Constant) and (name.value == "__class__" or name.value in _TENSOR_READERS):
        if name.value == "__class__" or _is_callable(facts, call.args[2], callables):
            yield hit_at(
                RuleId.TENSOR_SUBCLASS, call, f"replaces .{name.value} on {ast.unparse(call.args[0])} (setattr)"
            )


def _is_owner(facts: ModuleFacts, node: ast.expr) -> bool:
    """self, cls, ctx, a class or an imported module: attributes there are the module's own (or monkeypatching's)."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls", "ctx") or node.id in facts.classes or node.id in facts.imports.aliases
    return facts.imports.is_module_root(node)


def _is_callable(facts: ModuleFacts, value: ast.expr, callables: set[str]) -> bool:
    if isinstance(value, ast.Lambda):
        return True
    if isinstance(value, ast.Name):
        return value.id in callables
    return isinstance(value, ast.Call) and (facts.imports.resolve(value.func) or "") in _CALLABLE_FACTORIES
