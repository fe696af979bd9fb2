"""Facts about a candidate module that several detectors need: ModelNew, its forward path, layers, extensions.

"Forward path" means ModelNew.forward (or __call__) plus every module function and
ModelNew method it calls, transitively: helpers are where a fallback likes to hide.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from profsvc.staticcheck.names import ImportMap, dotted

MODEL_NEW = "ModelNew"
# What the harness takes from the reference (see profsvc.worker.problem.REFERENCE_NAMES).
REFERENCE_CLASS = "Model"
REFERENCE_FUNCTIONS = ("get_inputs", "get_init_inputs")

# Calls that build or load compiled code; what they return is the extension, not a result.
_BUILDER_NAMES = frozenset(
    {
        "load_inline",
        "RawKernel",
        "RawModule",
        "SourceModule",
        "ElementwiseKernel",
        "ReductionKernel",
        "CDLL",
        "LoadLibrary",
    }
)
# nn.Module methods that return the module itself.
_MODULE_METHODS = frozenset(
    {"cuda", "cpu", "to", "float", "double", "half", "bfloat16", "eval", "train", "requires_grad_"}
)
# nn classes that hold tensors rather than compute.
_PARAMETER_CLASSES = frozenset({"Parameter", "ParameterList", "ParameterDict", "Buffer", "UninitializedParameter"})

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Scope:
    """One function on the forward path, with what the detectors ask about its names."""

    node: FunctionNode
    self_name: str | None
    nodes: list[ast.AST] = field(init=False)
    locals: frozenset[str] = field(init=False)
    declared_global: frozenset[str] = field(init=False)
    values: dict[str, ast.expr] = field(init=False)
    loop_sources: dict[str, ast.expr] = field(init=False)

    def __post_init__(self) -> None:
        self.nodes = list(ast.walk(self.node))
        declared = {name for n in self.nodes if isinstance(n, ast.Global | ast.Nonlocal) for name in n.names}
        stored = {n.id for n in self.nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        params = {a.arg for n in self.nodes if isinstance(n, ast.arguments) for a in _all_args(n)}
        self.declared_global = frozenset(declared)
        self.locals = frozenset((stored | params) - declared)
        # Last plain assignment wins: enough to see through `out = self._cache` one level.
        self.values = {
            n.targets[0].id: n.value
            for n in self.nodes
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
        }
        # `for layer in self.layers:` binds each element of what it iterates over.
        self.loop_sources = {
            n.target.id: n.iter for n in self.nodes if isinstance(n, ast.For) and isinstance(n.target, ast.Name)
        }

    def resolve_local(self, node: ast.expr) -> ast.expr:
        """A local name's assigned value (one level), the node itself otherwise."""
        if isinstance(node, ast.Name) and node.id in self.locals and node.id in self.values:
            return self.values[node.id]
        return node

    def resolve_element(self, node: ast.expr) -> ast.expr:
        """What a loop variable iterates over (``self.layers`` for ``layer``), else resolve_local."""
        if isinstance(node, ast.Name) and node.id in self.loop_sources:
            return self.loop_sources[node.id]
        return self.resolve_local(node)


def _all_args(args: ast.arguments) -> list[ast.arg]:
    extra = [a for a in (args.vararg, args.kwarg) if a is not None]
    return [*args.posonlyargs, *args.args, *args.kwonlyargs, *extra]


def _module_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements executed at module level, looking into if/try/with blocks but not into defs."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If | ast.For | ast.While):
            yield from _module_statements(stmt.body + stmt.orelse)
        elif isinstance(stmt, ast.With):
            yield from _module_statements(stmt.body)
        elif isinstance(stmt, ast.Try | ast.TryStar):
            yield from _module_statements(stmt.body + stmt.orelse + stmt.finalbody)
            for handler in stmt.handlers:
                yield from _module_statements(handler.body)


def _assigned_names(stmt: ast.stmt) -> Iterator[str]:
    """Names an assignment statement binds (tuple targets unpacked)."""
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        targets = [stmt.target]
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                yield node.id


class ModuleFacts:
    """Everything about the module the detectors share, computed once per check."""

    def __init__(self, tree: ast.Module, text: str) -> None:
        self.tree = tree
        self.imports = ImportMap(tree)
        statements = list(_module_statements(tree.body))
        self.functions: dict[str, FunctionNode] = {
            s.name: s for s in statements if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        self.classes: dict[str, ast.ClassDef] = {s.name: s for s in statements if isinstance(s, ast.ClassDef)}
        self.module_globals = frozenset(name for s in statements for name in _assigned_names(s))
        self.model_new_classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == MODEL_NEW]
        self.nn_classes = self._nn_classes()
        self.mro = self._mro()
        self.methods = self._methods()
        self.layer_attrs = self._layer_attrs()
        self.ext_names: set[str] = set()
        self.ext_attrs: set[str] = set()
        self.ext_functions: set[str] = set()
        self._find_extensions()
        self.reachable = self._reachable()
        self.reference_nodes: list[ast.AST] = [
            s
            for s in tree.body
            if (isinstance(s, ast.ClassDef) and s.name == REFERENCE_CLASS)
            or (isinstance(s, ast.FunctionDef) and s.name in REFERENCE_FUNCTIONS)
        ]
        self.reference_source = "\n".join(ast.get_source_segment(text, n) or "" for n in self.reference_nodes)

    # ---- classes ----------------------------------------------------------

    def _nn_classes(self) -> dict[str, ast.ClassDef]:
        """Module classes deriving from torch.nn (the reference Model among them), ModelNew excluded."""
        found: dict[str, ast.ClassDef] = {}
        changed = True
        while changed:
            changed = False
            for name, cls in self.classes.items():
                if name == MODEL_NEW or name in found:
                    continue
                if any(self._is_nn_base(base, found) for base in cls.bases):
                    found[name] = cls
                    changed = True
        return found

    def _is_nn_base(self, base: ast.expr, known: dict[str, ast.ClassDef]) -> bool:
        qualname = self.imports.resolve(base)
        return (qualname or "").startswith("torch.nn.") or (isinstance(base, ast.Name) and base.id in known)

    def _mro(self) -> list[ast.ClassDef]:
        """ModelNew and its in-module base classes, nearest first."""
        order: list[ast.ClassDef] = []
        pending = list(self.model_new_classes)
        while pending:
            cls = pending.pop(0)
            if cls in order:
                continue
            order.append(cls)
            pending.extend(self.classes[b.id] for b in cls.bases if isinstance(b, ast.Name) and b.id in self.classes)
        return order

    def _methods(self) -> dict[str, tuple[ast.ClassDef, FunctionNode]]:
        methods: dict[str, tuple[ast.ClassDef, FunctionNode]] = {}
        for cls in self.mro:
            for stmt in cls.body:
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                    methods.setdefault(stmt.name, (cls, stmt))
        return methods

    def nn_class_label(self, call: ast.expr) -> str | None:
        """What a call builds when it builds an nn layer or a module-level nn.Module (``nn.Linear``, ``Model``)."""
        # nn.Linear(...).cuda().half() is still the layer.
        while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _MODULE_METHODS:
            call = call.func.value
        if not isinstance(call, ast.Call):
            return None
        qualname = self.imports.resolve(call.func)
        if qualname and qualname.startswith("torch.nn."):
            last = qualname.rsplit(".", 1)[-1]
            if last[:1].isupper() and last not in _PARAMETER_CLASSES:
                return qualname
            return None
        if isinstance(call.func, ast.Name) and call.func.id in self.nn_classes:
            return call.func.id
        return None

    def _layer_attrs(self) -> dict[str, str]:
        """Attributes of ModelNew that hold an nn layer or the reference model, with what they hold."""
        layers: dict[str, str] = {}
        for cls in self.mro:
            for node in ast.walk(cls):
                if not isinstance(node, ast.Assign) or (label := self.nn_class_label(node.value)) is None:
                    continue
                for target in node.targets:
                    if isinstance(target, ast.Attribute):
                        layers[target.attr] = label
                    elif isinstance(target, ast.Name):
                        layers[target.id] = label
        return layers

    # ---- compiled extensions ----------------------------------------------

    def is_builder_call(self, node: ast.AST) -> bool:
        """Whether a call builds or loads compiled code (load_inline, cpp_extension.load, cupy.RawKernel ...)."""
        if not isinstance(node, ast.Call):
            return False
        name = self.imports.resolve(node.func) or dotted(node.func) or ""
        return name.rsplit(".", 1)[-1] in _BUILDER_NAMES or name.endswith("cpp_extension.load")

    def is_extension(self, node: ast.AST, scope: Scope | None = None) -> bool:
        """Whether an expression is (a part of) a compiled extension handle."""
        if scope is not None and isinstance(node, ast.Name):
            node = scope.resolve_local(node)
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            return self.is_builder_call(node) or called in self.ext_functions
        if isinstance(node, ast.Name):
            return node.id in self.ext_names
        if isinstance(node, ast.Attribute):
            qualname = self.imports.resolve(node) or ""
            if qualname.startswith("torch.ops."):
                # torch.ops.<namespace> holds registered custom ops, except ATen's own.
                return not qualname.startswith("torch.ops.aten")
            base = node.value
            if isinstance(base, ast.Name) and base.id not in self.imports.aliases and node.attr in self.ext_attrs:
                return True
            return self.is_extension(base, scope)
        return False

    def _find_extensions(self) -> None:
        """Names, attributes and functions that hold or return a compiled extension, to a fixed point."""
        assigns = [n for n in ast.walk(self.tree) if isinstance(n, ast.Assign)]
        functions = [n for n in ast.walk(self.tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        size = -1
        while size != len(self.ext_names) + len(self.ext_attrs) + len(self.ext_functions):
            size = len(self.ext_names) + len(self.ext_attrs) + len(self.ext_functions)
            for assign in assigns:
                if self.is_extension(assign.value):
                    self._mark_extension_targets(assign.targets)
            for func in functions:
                returns = [n.value for n in ast.walk(func) if isinstance(n, ast.Return) and n.value is not None]
                if any(self.is_extension(value) for value in returns):
                    self.ext_functions.add(func.name)

    def _mark_extension_targets(self, targets: list[ast.expr]) -> None:
        for target in targets:
            if isinstance(target, ast.Name):
                self.ext_names.add(target.id)
            elif isinstance(target, ast.Attribute):
                self.ext_attrs.add(target.attr)

    # ---- the forward path -------------------------------------------------

    def _reachable(self) -> list[Scope]:
        pending = [self._method_scope(name) for name in ("forward", "__call__") if name in self.methods]
        seen: set[int] = set()
        scopes: list[Scope] = []
        while pending:
            scope = pending.pop(0)
            if id(scope.node) in seen:
                continue
            seen.add(id(scope.node))
            scopes.append(scope)
            pending.extend(self._callees(scope))
        return scopes

    def _method_scope(self, name: str) -> Scope:
        method = self.methods[name][1]
        params = [*method.args.posonlyargs, *method.args.args]
        return Scope(method, params[0].arg if params else None)

    def _callees(self, scope: Scope) -> Iterator[Scope]:
        for node in scope.nodes:
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id in self.functions:
                yield Scope(self.functions[func.id], None)
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                owner = func.value.id
                if owner == scope.self_name and func.attr in self.methods:
                    yield self._method_scope(func.attr)
                elif func.attr == "apply" and (forward := self._autograd_forward(owner)) is not None:
                    yield Scope(forward, None)

    def _autograd_forward(self, class_name: str) -> FunctionNode | None:
        """The forward of a module-level torch.autograd.Function subclass, which `.apply()` runs."""
        cls = self.classes.get(class_name)
        if cls is None or not any((self.imports.resolve(b) or "").startswith("torch.autograd.") for b in cls.bases):
            return None
        return next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "forward"), None)
