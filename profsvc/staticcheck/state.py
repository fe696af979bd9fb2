"""result_caching and warmup_divergence: state that outlives a call to forward.

A "slot" is a place that keeps its value between calls: an attribute of self or
of the class, a module global or an attribute of one (a namespace object), a
mutable default argument. Slots that hold the compiled extension (or a cache of
compiled kernels) or an nn layer are not state in this sense and are left alone.
A file is a slot too: results saved on one call (or one run) can be replayed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from profsvc.staticcheck.facts import MODEL_NEW, FunctionNode, ModuleFacts, Scope
from profsvc.staticcheck.findings import Hit, hit_at
from profsvc.staticcheck.names import dotted
from profsvc.staticcheck.rules import RuleId

_MEMOISERS = frozenset({"lru_cache", "cache", "cached_property", "memoize"})
# Parts of a key that identify a tensor rather than describe it: a cache keyed on them replays results.
_IDENTITY_CALLS = frozenset(
    {"data_ptr", "tobytes", "numpy", "tolist", "item", "untyped_storage", "storage", "cpu", "size"}
)
_IDENTITY_ATTRS = frozenset({"shape", "_version"})
_STORE_METHODS = frozenset({"setdefault", "update", "__setitem__"})
_LOOKUP_METHODS = frozenset({"get", "pop", "__getitem__", "__contains__"})
# Calls that hand back (a view of) the same data: returning self._out.clone() still returns a stored result.
_PASS_THROUGH = frozenset({"clone", "detach", "view", "view_as", "reshape", "contiguous", "to", "float", "cuda"})
_CLOCKS = frozenset({"time.time", "time.time_ns", "time.perf_counter", "time.perf_counter_ns", "time.monotonic"})
# Reading saved tensors back: replayed results, wherever in the module it happens.
_TENSOR_LOADS = frozenset({"torch.load", "numpy.load", "numpy.fromfile", "numpy.memmap", "safetensors.torch.load_file"})
# Any file access in forward: a kernel has nothing to read or write there.
_FILE_CALLS = frozenset(
    {"open", "io.open", "os.open", "os.read", "torch.save", "numpy.save", "numpy.savez", "pickle.dump", "shelve.open"}
)
_FILE_METHODS = frozenset({"read_bytes", "read_text", "write_bytes", "write_text", "tofile"})


def detect(facts: ModuleFacts) -> Iterator[Hit]:
    """All result_caching and warmup_divergence hits of the module."""
    yield from _memoised(facts)
    stored: set[str] = set()
    counters: set[str] = set()
    flags: set[str] = set()
    for scope in facts.reachable:
        yield from _container_caching(facts, scope)
        _collect_writes(facts, scope, stored, counters, flags)
    for scope in facts.reachable:
        yield from _returned_state(facts, scope, stored)
        yield from _branches_on_state(facts, scope, counters, flags)
        yield from _clock_reads(facts, scope)
        yield from _file_access(facts, scope)
    yield from _tensor_loads(facts)


def slot_of(facts: ModuleFacts, scope: Scope, node: ast.AST) -> str | None:
    """The persistent place an expression names ("self._out", "_CACHE"), None for locals and the like."""
    if isinstance(node, ast.Subscript):
        return slot_of(facts, scope, node.value)
    if isinstance(node, ast.Attribute) and _is_self_like(facts, scope, node.value):
        name = node.attr
        return None if name in facts.ext_attrs or name in facts.layer_attrs else f"self.{name}"
    if isinstance(node, ast.Attribute) and (owner := _module_object(facts, scope, node.value)):
        # _STATE.out = y with _STATE = types.SimpleNamespace() at module level
        return None if node.attr in facts.ext_attrs else f"{owner}.{node.attr}"
    if isinstance(node, ast.Name) and node.id in scope.persistent_params:
        return f"the default argument {node.id}"
    if isinstance(node, ast.Name) and (
        node.id in scope.declared_global or (node.id not in scope.locals and node.id in facts.module_globals)
    ):
        return None if node.id in facts.ext_names else node.id
    return None


def _module_object(facts: ModuleFacts, scope: Scope, node: ast.AST) -> str | None:
    """A module-level object (not an import, extension or class of its own) forward reaches by name."""
    if not isinstance(node, ast.Name) or node.id in scope.locals or node.id in facts.imports.aliases:
        return None
    if node.id in facts.ext_names or node.id in facts.classes or node.id not in facts.module_globals:
        return None
    return node.id


def _is_self_like(facts: ModuleFacts, scope: Scope, node: ast.AST) -> bool:
    """self, the class (ModelNew, cls, type(self), self.__class__): all share state across calls."""
    if isinstance(node, ast.Name):
        return node.id in (scope.self_name, MODEL_NEW, "cls") or node.id in {c.name for c in facts.mro}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type":
        return bool(node.args) and _is_self_like(facts, scope, node.args[0])
    return isinstance(node, ast.Attribute) and node.attr == "__class__" and _is_self_like(facts, scope, node.value)


def _memoised(facts: ModuleFacts) -> Iterator[Hit]:
    functions: list[FunctionNode] = [scope.node for scope in facts.reachable]
    functions += [method for _, method in facts.methods.values() if method not in functions]
    for func in functions:
        if func.name in facts.ext_functions:
            continue  # memoising the extension loader is the honest way to build it once
        for decorator in func.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            name = (facts.imports.resolve(target) or dotted(target) or "").rsplit(".", 1)[-1]
            if name in _MEMOISERS:
                yield hit_at(RuleId.RESULT_CACHING, decorator, f"{func.name} is memoised with @{name}")


def _container_caching(facts: ModuleFacts, scope: Scope) -> Iterator[Hit]:
    for node in scope.nodes:
        detail = None
        if isinstance(node, ast.Subscript):
            detail = _subscript_caching(facts, scope, node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            detail = _method_caching(facts, scope, node.func, node.args)
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn):
            slot = slot_of(facts, scope, node.comparators[0])
            key = _identity_key(facts, scope, node.left)
            detail = f"looks up {slot} by {key}" if slot and key else None
        if detail:
            yield hit_at(RuleId.RESULT_CACHING, node, detail)


def _subscript_caching(facts: ModuleFacts, scope: Scope, node: ast.Subscript) -> str | None:
    slot = slot_of(facts, scope, node.value)
    if slot is None:
        return None
    if isinstance(node.ctx, ast.Store):
        return f"stores into {slot}[...], which outlives the call"
    key = _identity_key(facts, scope, node.slice)
    return f"looks up {slot} by {key}" if key else None


def _method_caching(facts: ModuleFacts, scope: Scope, func: ast.Attribute, args: list[ast.expr]) -> str | None:
    slot = slot_of(facts, scope, func.value)
    if slot is None:
        return None
    if func.attr in _STORE_METHODS:
        return f"stores into {slot} with .{func.attr}(), which outlives the call"
    key = _identity_key(facts, scope, args[0]) if func.attr in _LOOKUP_METHODS and args else None
    return f"looks up {slot} by {key}" if key else None


def _identity_key(facts: ModuleFacts, scope: Scope, key: ast.AST) -> str | None:
    """What in a cache key identifies the input tensor (its address, id, shape, bytes), None if nothing."""
    nodes = list(ast.walk(key))
    nodes += [inner for n in nodes if isinstance(n, ast.Name) for inner in ast.walk(scope.resolve_local(n))]
    for node in nodes:
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in ("id", "hash"):
                return f"{func.id}()"
            if isinstance(func, ast.Attribute) and func.attr in _IDENTITY_CALLS:
                return f".{func.attr}()"
            if (facts.imports.resolve(func) or "").startswith("hashlib."):
                return "a hash of the tensor's bytes"
        if isinstance(node, ast.Attribute) and node.attr in _IDENTITY_ATTRS:
            return f".{node.attr}"
    return None


def _collect_writes(facts: ModuleFacts, scope: Scope, stored: set[str], counters: set[str], flags: set[str]) -> None:
    """Record slots forward writes: any value (stored), a count (counters), a constant (flags)."""
    for node in scope.nodes:
        if isinstance(node, ast.AugAssign):
            if slot := slot_of(facts, scope, node.target):
                counters.add(slot)
            continue
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            slot = slot_of(facts, scope, target) if isinstance(target, ast.Name | ast.Attribute) else None
            if slot is None or facts.is_extension(node.value, scope):
                continue
            stored.add(slot)
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, bool | int):
                flags.add(slot)
            elif any(slot_of(facts, scope, n) == slot for n in ast.walk(node.value)):
                counters.add(slot)  # self.n = self.n + 1


def _returned_state(facts: ModuleFacts, scope: Scope, stored: set[str]) -> Iterator[Hit]:
    for node in scope.nodes:
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value: ast.AST = scope.resolve_local(node.value)
        while (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _PASS_THROUGH
        ):
            value = scope.resolve_local(value.func.value)
        slot = slot_of(facts, scope, value)
        if slot in stored:
            yield hit_at(RuleId.RESULT_CACHING, node, f"returns {slot}, which forward stored on an earlier call")


def _branches_on_state(facts: ModuleFacts, scope: Scope, counters: set[str], flags: set[str]) -> Iterator[Hit]:
    for node in scope.nodes:
        if not isinstance(node, ast.If | ast.While | ast.IfExp):
            continue
        slots = {slot_of(facts, scope, n) for n in ast.walk(node.test)} - {None}
        if counted := sorted(slots & counters):
            yield hit_at(
                RuleId.WARMUP_DIVERGENCE, node, f"branches on {counted[0]}, which forward changes on every call"
            )
        elif (flagged := sorted(slots & flags)) and _returns_in_branch(node):
            yield hit_at(
                RuleId.WARMUP_DIVERGENCE, node, f"returns early depending on {flagged[0]}, a flag forward flips"
            )


def _returns_in_branch(node: ast.If | ast.While | ast.IfExp) -> bool:
    # A lazily built extension guarded by a flag is honest; a flag that picks what forward returns is not.
    if isinstance(node, ast.IfExp):
        return True
    return any(isinstance(n, ast.Return) for stmt in node.body + node.orelse for n in ast.walk(stmt))


def _clock_reads(facts: ModuleFacts, scope: Scope) -> Iterator[Hit]:
    for node in scope.nodes:
        if isinstance(node, ast.Call) and (qualname := facts.imports.resolve(node.func)) in _CLOCKS:
            yield hit_at(RuleId.WARMUP_DIVERGENCE, node, f"reads the clock ({qualname}) in forward")


def _file_access(facts: ModuleFacts, scope: Scope) -> Iterator[Hit]:
    for node in scope.nodes:
        if not isinstance(node, ast.Call):
            continue
        qualname = facts.imports.resolve(node.func) or (node.func.id if isinstance(node.func, ast.Name) else "")
        if qualname in _FILE_CALLS and not (isinstance(node.func, ast.Name) and node.func.id in scope.locals):
            yield hit_at(
                RuleId.RESULT_CACHING, node, f"forward accesses a file ({qualname}), where results can be kept"
            )
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _FILE_METHODS:
            yield hit_at(
                RuleId.RESULT_CACHING, node, f"forward accesses a file (.{node.func.attr}()), where results can be kept"
            )


def _tensor_loads(facts: ModuleFacts) -> Iterator[Hit]:
    for node in facts.nodes:
        if isinstance(node, ast.Call) and (qualname := facts.imports.resolve(node.func)) in _TENSOR_LOADS:
            yield hit_at(RuleId.RESULT_CACHING, node, f"loads saved tensors with {qualname}, which can replay results")
