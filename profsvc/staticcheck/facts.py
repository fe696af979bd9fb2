"""Facts about a candidate module that several detectors need: ModelNew, its forward path, layers, extensions.

"Forward path" means ModelNew.forward (or __call__) plus every module function,
ModelNew method and forward of the module's own nn.Module blocks it calls,
transitively: helpers are where a fallback likes to hide. "Extension" means any
handle on compiled code of the candidate's own: a load_inline module, a CuPy raw
kernel, a Triton/CuTe/TileLang/Numba kernel function, a cache of compiled kernels.
"""

from __future__ import annotations

import ast
import collections
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

from profsvc.staticcheck.cppsource import CppString, cpp_strings
from profsvc.staticcheck.names import ImportMap, dotted

MODEL_NEW = "ModelNew"
# What the harness takes from the reference (see profsvc.worker.problem.REFERENCE_NAMES).
REFERENCE_CLASS = "Model"
REFERENCE_FUNCTIONS = ("get_inputs", "get_init_inputs")

# Calls that build or load compiled code; what they return is the extension, not a result.
# The most passes the search for compiled extensions makes (see ModuleFacts._find_extensions).
_ROUNDS = 16
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
# Builders known by their full name: a bare `compile` is Python's own, `cute.compile` builds a kernel.
_QUALIFIED_BUILDERS = frozenset(
    {
        "torch.utils.cpp_extension.load",
        "cutlass.cute.compile",
        "tilelang.compile",
        "triton.compile",
        "triton.jit",
        "numba.cuda.jit",
        "cupyx.jit.rawkernel",
    }
)
# Decorators that make a function a GPU kernel (calling it, or indexing it with a grid, launches or builds one).
_KERNEL_DECORATORS = frozenset(
    {
        "triton.jit",
        "triton.autotune",
        "triton.heuristics",
        "numba.cuda.jit",
        "cutlass.cute.jit",
        "cutlass.cute.kernel",
        "tilelang.jit",
        "tilelang.language.prim_func",
        "cupyx.jit.rawkernel",
    }
)
# nn.Module methods that return the module itself.
_MODULE_METHODS = frozenset(
    {"cuda", "cpu", "to", "float", "double", "half", "bfloat16", "eval", "train", "requires_grad_"}
)
# nn classes that hold tensors rather than compute.
_PARAMETER_CLASSES = frozenset({"Parameter", "ParameterList", "ParameterDict", "Buffer", "UninitializedParameter"})
# nn containers: what they compute is what they hold.
_CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.Sequential", "torch.nn.ModuleDict"})

# Types whose instances a default argument would share across calls.
_MUTABLE_TYPES = frozenset(
    {"dict", "list", "set", "bytearray", "defaultdict", "OrderedDict", "deque", "Counter", "SimpleNamespace"}
)

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Scope:
    """One function on the forward path, with what the detectors ask about its names.

    `methods` are the methods `self.<name>()` resolves to (those of the class the function belongs to).
    """

    node: FunctionNode
    self_name: str | None
    methods: dict[str, FunctionNode] = field(default_factory=dict)
    nodes: list[ast.AST] = field(init=False)
    locals: frozenset[str] = field(init=False)
    declared_global: frozenset[str] = field(init=False)
    persistent_params: frozenset[str] = field(init=False)
    values: dict[str, ast.expr] = field(init=False)
    loop_sources: dict[str, ast.expr] = field(init=False)

    def __post_init__(self) -> None:
        self.nodes = list(ast.walk(self.node))
        declared = {name for n in self.nodes if isinstance(n, ast.Global | ast.Nonlocal) for name in n.names}
        stored = {n.id for n in self.nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        params = {a.arg for n in self.nodes if isinstance(n, ast.arguments) for a in _all_args(n)}
        self.declared_global = frozenset(declared)
        self.locals = frozenset((stored | params) - declared)
        # A mutable default is created once, with the function: it outlives every call like a global.
        self.persistent_params = frozenset(_mutable_defaults(self.node.args))
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

    @property
    def params(self) -> list[str]:
        """The function's own parameters, self excluded."""
        args = self.node.args
        return [a.arg for a in _all_args(args) if a.arg != self.self_name]

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


def _mutable_defaults(args: ast.arguments) -> Iterator[str]:
    positional = [*args.posonlyargs, *args.args]
    pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
    for arg, default in pairs:
        if isinstance(default, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp) or (
            isinstance(default, ast.Call) and (dotted(default.func) or "").rsplit(".", 1)[-1] in _MUTABLE_TYPES
        ):
            yield arg.arg


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


def _lambda_function(name: str, lam: ast.Lambda) -> ast.FunctionDef:
    """A module-level `f = lambda ...` as the function it is, so the forward path can follow calls into it."""
    body = ast.copy_location(ast.Return(value=lam.body), lam)
    func = ast.FunctionDef(name=name, args=lam.args, body=[body], decorator_list=[], returns=None, type_params=[])
    return ast.fix_missing_locations(ast.copy_location(func, lam))


def _single_target(stmt: ast.stmt) -> tuple[str, ast.expr] | None:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id, stmt.value
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        return stmt.target.id, stmt.value
    return None


class ModuleFacts:
    """Everything about the module the detectors share, computed once per check."""

    def __init__(self, tree: ast.Module, text: str) -> None:
        self.tree = tree
        # Every node once, in ast.walk's order: the detectors iterate this instead of walking the tree again.
        self.nodes: list[ast.AST] = list(ast.walk(tree))
        self.imports = ImportMap(tree, self.nodes)
        statements = list(_module_statements(tree.body))
        self.functions: dict[str, FunctionNode] = {
            s.name: s for s in statements if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        # Module-level name = value (the last one wins), lambdas among them turned into functions.
        self.module_values: dict[str, ast.expr] = {}
        for stmt in statements:
            if (bound := _single_target(stmt)) is not None:
                self.module_values[bound[0]] = bound[1]
                if isinstance(bound[1], ast.Lambda):
                    self.functions.setdefault(bound[0], _lambda_function(bound[0], bound[1]))
        self.classes: dict[str, ast.ClassDef] = {s.name: s for s in statements if isinstance(s, ast.ClassDef)}
        self.module_globals = frozenset(name for s in statements for name in _assigned_names(s))
        self.model_new_classes = [n for n in self.nodes if isinstance(n, ast.ClassDef) and n.name == MODEL_NEW]
        self.nn_classes = self._nn_classes()
        self.reference_classes = self._reference_classes()
        self.mro = self._mro(self.model_new_classes)
        self.methods = self._methods(self.mro)
        self.kernel_functions = self._kernel_functions()
        self.layer_attrs: dict[str, str] = {}
        self.submodule_attrs: dict[str, list[ast.ClassDef]] = {}
        self._find_layers()
        self.ext_names: set[str] = set(self.kernel_functions)
        self.ext_attrs: set[str] = set()
        self.ext_functions: set[str] = set(self.kernel_functions)
        self._find_extensions()
        self.reachable = self._reachable()
        self.reference_nodes: list[ast.AST] = [
            s
            for s in tree.body
            if (isinstance(s, ast.ClassDef) and s.name == REFERENCE_CLASS)
            or (isinstance(s, ast.FunctionDef) and s.name in REFERENCE_FUNCTIONS)
        ]
        lines = text.splitlines(keepends=True)
        # Whole lines of each reference node: precision only searches this text for dtype names.
        self.reference_source = "".join(
            "".join(lines[n.lineno - 1 : n.end_lineno or n.lineno])
            for n in self.reference_nodes
            if hasattr(n, "lineno")
        )

    @cached_property
    def cpp_strings(self) -> list[CppString]:
        """The module's string literals that hold C++/CUDA source."""
        return cpp_strings(self.nodes)

    # ---- classes ----------------------------------------------------------

    def _nn_classes(self) -> dict[str, ast.ClassDef]:
        """Module classes deriving from torch.nn (the reference Model among them), ModelNew excluded."""
        seeds = {name for name, cls in self.classes.items() if any(self._is_nn_base(b) for b in cls.bases)}
        return {name: self.classes[name] for name in self._derived(seeds)}

    def _is_nn_base(self, base: ast.expr) -> bool:
        """A torch.nn class, however imported (a module class deriving from one is _derived's to find)."""
        return (self.imports.resolve(base) or "").startswith("torch.nn.")

    def _derived(self, seeds: set[str], known: frozenset[str] = frozenset()) -> set[str]:
        """The module's classes among `seeds` and those deriving from them or from `known` (by a base's name),
        ModelNew excluded: one pass over the classes and one over the derivations (a chain declared in reverse
        order took a pass over every class per link before)."""
        children: dict[str, list[str]] = {}
        for name, cls in self.classes.items():
            for base in cls.bases:
                if isinstance(base, ast.Name):
                    children.setdefault(base.id, []).append(name)
        found = {name for name in seeds if name != MODEL_NEW}
        pending = [*found, *known]
        while pending:
            for child in children.get(pending.pop(), ()):
                if child != MODEL_NEW and child not in found:
                    found.add(child)
                    pending.append(child)
        return found

    def _reference_classes(self) -> frozenset[str]:
        """Names that stand for the reference: the module's Model, classes derived from it, an imported Model."""
        found = {name for name, qualname in self.imports.aliases.items() if qualname.rsplit(".", 1)[-1] == "Model"}
        if REFERENCE_CLASS in self.classes:
            found.add(REFERENCE_CLASS)
        seeds = {
            name
            for name, cls in self.classes.items()
            if any(not isinstance(b, ast.Name) and self._names_reference(b, found) for b in cls.bases)
        }
        return frozenset(found | self._derived(seeds, frozenset(found)))

    def _names_reference(self, node: ast.expr, known: set[str] | frozenset[str]) -> bool:
        if isinstance(node, ast.Name):
            return node.id in known
        return (self.imports.resolve(node) or "").rsplit(".", 1)[-1] == "Model"

    def is_reference(self, node: ast.expr) -> bool:
        """Whether an expression names the reference Model (or a class derived from it)."""
        return self._names_reference(node, self.reference_classes)

    def _mro(self, start: list[ast.ClassDef]) -> list[ast.ClassDef]:
        """The classes and their in-module base classes, nearest first."""
        order: list[ast.ClassDef] = []
        seen: set[int] = set()
        pending = collections.deque(start)
        while pending:
            cls = pending.popleft()
            if id(cls) in seen:
                continue
            seen.add(id(cls))
            order.append(cls)
            pending.extend(self.classes[b.id] for b in cls.bases if isinstance(b, ast.Name) and b.id in self.classes)
        return order

    @staticmethod
    def _methods(mro: list[ast.ClassDef]) -> dict[str, tuple[ast.ClassDef, FunctionNode]]:
        methods: dict[str, tuple[ast.ClassDef, FunctionNode]] = {}
        for cls in mro:
            for stmt in cls.body:
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                    methods.setdefault(stmt.name, (cls, stmt))
        return methods

    def nn_class_label(self, call: ast.expr) -> str | None:
        """What a call builds when it builds a torch.nn layer or the reference (``nn.Linear``, ``Model``).

        The module's own nn.Module blocks are not labelled: their forward is followed instead.
        """
        # nn.Linear(...).cuda().half() is still the layer.
        while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _MODULE_METHODS:
            call = call.func.value
        if not isinstance(call, ast.Call):
            return None
        if self.is_reference(call.func):
            return dotted(call.func) or REFERENCE_CLASS
        qualname = self.imports.resolve(call.func)
        if qualname and qualname.startswith("torch.nn."):
            last = qualname.rsplit(".", 1)[-1]
            if last[:1].isupper() and last not in _PARAMETER_CLASSES:
                return qualname
        return None

    def layer_label(self, value: ast.expr) -> str | None:
        """The layer an expression holds, looking into plain lists, comprehensions and nn containers."""
        if isinstance(value, ast.List | ast.Tuple | ast.Set):
            return next((label for e in value.elts if (label := self.layer_label(e))), None)
        if isinstance(value, ast.Dict):
            return next((label for e in value.values if (label := self.layer_label(e))), None)
        if isinstance(value, ast.ListComp | ast.GeneratorExp):
            return self.layer_label(value.elt)
        label = self.nn_class_label(value)
        if label not in _CONTAINERS or not isinstance(value, ast.Call):
            return label
        held = [*value.args, *(k.value for k in value.keywords)]
        if inner := next((found for arg in held if (found := self.layer_label(arg))), None):
            return inner
        # A container of the module's own blocks computes what those blocks compute.
        return None if any(self.submodule_classes(arg) for arg in held) else label

    def submodule_classes(self, value: ast.AST) -> list[ast.ClassDef]:
        """The module's own classes (nn.Module blocks, plain launcher objects; not the reference) it instantiates."""
        found: list[ast.ClassDef] = []
        for node in ast.walk(value):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                cls = self.classes.get(node.func.id)
                own = cls is not None and node.func.id not in self.reference_classes and node.func.id != MODEL_NEW
                if own and cls not in found:
                    found.append(cls)
        return found

    def _find_layers(self) -> None:
        """Attributes of ModelNew holding a torch.nn layer or the reference, and those holding its own blocks."""
        for cls in self.mro:
            for node in ast.walk(cls):
                if not isinstance(node, ast.Assign):
                    continue
                label = self.layer_label(node.value)
                blocks = self.submodule_classes(node.value)
                for target in node.targets:
                    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
                    if name is None:
                        continue
                    if label is not None:
                        self.layer_attrs[name] = label
                    if blocks:
                        self.submodule_attrs.setdefault(name, []).extend(b for b in blocks if b.name != MODEL_NEW)

    # ---- compiled extensions ----------------------------------------------

    def _kernel_functions(self) -> set[str]:
        """Module functions decorated as GPU kernels (triton.jit, cute.kernel, tilelang.jit, numba.cuda.jit ...)."""
        found: set[str] = set()
        for name, func in self.functions.items():
            for decorator in func.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if (self.imports.resolve(target) or "") in _KERNEL_DECORATORS:
                    found.add(name)
        return found

    def is_builder_call(self, node: ast.AST) -> bool:
        """Whether a call builds or loads compiled code (load_inline, cpp_extension.load, cupy.RawKernel ...)."""
        if not isinstance(node, ast.Call):
            return False
        qualname = self.imports.resolve(node.func) or ""
        if qualname in _QUALIFIED_BUILDERS:
            return True
        name = qualname or dotted(node.func) or ""
        return name.rsplit(".", 1)[-1] in _BUILDER_NAMES or name.endswith("cpp_extension.load")

    def is_kernel_call(self, call: ast.Call, scope: Scope | None = None) -> bool:
        """Whether a call runs compiled code of the candidate's own (not a build: a call of what was built)."""
        return not self.is_builder_call(call) and self.is_extension(call.func, scope)

    def is_extension(self, node: ast.AST, scope: Scope | None = None) -> bool:
        """Whether an expression is (a part of) a compiled extension handle."""
        if scope is not None and isinstance(node, ast.Name):
            resolved = scope.resolve_element(node)
            if resolved is not node:
                # One level only: `x = x.contiguous()` must not send the lookup round in circles.
                return self.is_extension(resolved)
        if isinstance(node, ast.Call):
            return self._returns_extension(node)
        if isinstance(node, ast.Name):
            return node.id in self.ext_names
        if isinstance(node, ast.Subscript):
            # kernel[grid](...), self.compiled[key](...), _DISPATCH[dtype](...)
            return self.is_extension(node.value, scope)
        if isinstance(node, ast.Dict | ast.List | ast.Tuple):
            values = [v for v in (node.values if isinstance(node, ast.Dict) else node.elts) if v is not None]
            return bool(values) and all(self.is_extension(v, scope) for v in values)
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

    def _returns_extension(self, call: ast.Call) -> bool:
        func = call.func
        if isinstance(func, ast.Call) and (self.imports.resolve(func.func) or "") in _KERNEL_DECORATORS:
            return True  # triton.autotune(configs=...)(kernel): a decorator applied by hand
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        return self.is_builder_call(call) or called in self.ext_functions

    def _find_extensions(self) -> None:
        """Names, attributes and functions that hold or return a compiled extension, to a fixed point.

        A container counts when every value stored into it by subscript is an extension: a cache of compiled
        kernels keyed by dtype or shape is a build cache, not a result cache.
        """
        assigns = [n for n in self.nodes if isinstance(n, ast.Assign)]
        functions = [n for n in self.nodes if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        returns = {
            id(func): [n.value for n in ast.walk(func) if isinstance(n, ast.Return) and n.value is not None]
            for func in functions
        }
        # At most _ROUNDS passes: each pass learns at least one name, and a chain of hand-offs longer than any
        # module writes (a0 = a1 ... aN = load_inline, declared in reverse) would cost a pass per link.
        for _ in range(_ROUNDS):
            size = len(self.ext_names) + len(self.ext_attrs) + len(self.ext_functions)
            self._extension_pass(assigns, functions, returns)
            if size == len(self.ext_names) + len(self.ext_attrs) + len(self.ext_functions):
                break

    def _extension_pass(
        self,
        assigns: list[ast.Assign],
        functions: list[ast.FunctionDef | ast.AsyncFunctionDef],
        returns: dict[int, list[ast.expr]],
    ) -> None:
        stored: dict[str, list[bool]] = {}
        for assign in assigns:
            is_ext = self.is_extension(assign.value)
            for target in assign.targets:
                if isinstance(target, ast.Subscript) and (key := _container_key(target.value)):
                    stored.setdefault(key, []).append(is_ext)
            if is_ext:
                self._mark_extension_targets(assign.targets)
        for key, flags in stored.items():
            if all(flags):
                (self.ext_attrs if key.startswith(".") else self.ext_names).add(key.lstrip("."))
        for func in functions:
            if any(self.is_extension(value) for value in returns[id(func)]):
                self.ext_functions.add(func.name)

    def _mark_extension_targets(self, targets: list[ast.expr]) -> None:
        for target in targets:
            if isinstance(target, ast.Name):
                self.ext_names.add(target.id)
            elif isinstance(target, ast.Attribute):
                self.ext_attrs.add(target.attr)

    # ---- the forward path -------------------------------------------------

    def _reachable(self) -> list[Scope]:
        own = {name: method for name, (_, method) in self.methods.items()}
        pending = [self._method_scope(own[name], own) for name in ("forward", "__call__") if name in own]
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

    @staticmethod
    def _method_scope(method: FunctionNode, methods: dict[str, FunctionNode]) -> Scope:
        params = [*method.args.posonlyargs, *method.args.args]
        return Scope(method, params[0].arg if params else None, methods)

    def _callees(self, scope: Scope) -> Iterator[Scope]:
        for node in scope.nodes:
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id in self.functions and func.id not in self.kernel_functions:
                yield Scope(self.functions[func.id], None)
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                owner = func.value.id
                if owner == scope.self_name and func.attr in scope.methods:
                    yield self._method_scope(scope.methods[func.attr], scope.methods)
                elif func.attr == "apply" and (forward := self._autograd_forward(owner)) is not None:
                    yield Scope(forward, None)
            yield from self._block_forwards(scope, func)

    def _block_forwards(self, scope: Scope, func: ast.expr) -> Iterator[Scope]:
        """Methods of the module's own objects a call runs: self.block(x), a loop over self.blocks,
        self.launcher.run(x), _LAUNCHER(x) for a module-level instance."""
        method = None
        target = func
        if isinstance(func, ast.Attribute) and self._own_objects(scope, func.value):
            method, target = func.attr, func.value
        for cls in self._own_objects(scope, target):
            methods = {name: node for name, (_, node) in self._methods(self._mro([cls])).items()}
            for name in (method,) if method else ("forward", "__call__"):
                if name in methods:
                    yield self._method_scope(methods[name], methods)
                    break

    def _own_objects(self, scope: Scope, node: ast.expr) -> list[ast.ClassDef]:
        """The module's own classes whose instances an expression holds (self.attr, an element of it, a global)."""
        target = scope.resolve_element(node)
        while isinstance(target, ast.Subscript):
            target = target.value
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == scope.self_name
            and target.attr in self.submodule_attrs
        ):
            return self.submodule_attrs[target.attr]
        if isinstance(target, ast.Name) and target.id not in scope.locals and target.id in self.module_values:
            return self.submodule_classes(self.module_values[target.id])
        return []

    def _autograd_forward(self, class_name: str) -> FunctionNode | None:
        """The forward of a module-level torch.autograd.Function subclass, which `.apply()` runs."""
        cls = self.classes.get(class_name)
        if cls is None or not any((self.imports.resolve(b) or "").startswith("torch.autograd.") for b in cls.bases):
            return None
        return next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "forward"), None)


def _container_key(node: ast.expr) -> str | None:
    """``self.compiled`` -> ".compiled", ``_CACHE`` -> "_CACHE": how extension marks name a container."""
    if isinstance(node, ast.Attribute):
        return "." + node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None
