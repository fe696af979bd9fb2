"""side_stream and thread_or_process: work the harness's timer on the current stream cannot see."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from profsvc.staticcheck.facts import ModuleFacts, Scope
from profsvc.staticcheck.findings import Hit, hit_at
from profsvc.staticcheck.rules import RuleId

# Constructors of a stream object, and the calls that make one current (the work under them leaves the timed stream).
_STREAM_CONSTRUCTORS = frozenset(
    {
        "torch.cuda.Stream",
        "torch.cuda.ExternalStream",
        "torch.cuda.streams.Stream",
        "torch.cuda.streams.ExternalStream",
        "torch.Stream",
        "cupy.cuda.Stream",
        "cupy.cuda.ExternalStream",
    }
)
_STREAM_SWITCHES = frozenset({"torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.StreamContext"})
# Waits that join everything: the whole device.
_DEVICE_JOINS = frozenset({"torch.cuda.synchronize", "cupy.cuda.runtime.deviceSynchronize"})
# Calls that take a side stream as an argument without launching on it.
_STREAM_BOOKKEEPING = frozenset({"wait_stream", "wait_event", "record_stream", "record", "synchronize", "query"})
_CONCURRENT_MODULES = frozenset(
    {"threading", "_thread", "multiprocessing", "concurrent", "subprocess", "asyncio", "pty", "torch.multiprocessing"}
)
_PROCESS_CALLS = frozenset({"fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp"})
_PROCESS_PREFIXES = ("spawn", "exec")


def detect(facts: ModuleFacts) -> Iterator[Hit]:
    """All side_stream and thread_or_process hits of the module."""
    yield from _side_streams(facts)
    for node in facts.nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield from _concurrent_imports(node)
        elif isinstance(node, ast.Call) and _is_concurrent(facts.imports.resolve(node.func) or ""):
            yield hit_at(RuleId.THREAD_OR_PROCESS, node, f"calls {facts.imports.resolve(node.func)}")


def _stream_key(node: ast.AST) -> str | None:
    """How a stream object is named: ``self.side`` -> ".side", ``_SIDE`` -> "_SIDE"."""
    if isinstance(node, ast.Attribute):
        return "." + node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _side_streams(facts: ModuleFacts) -> Iterator[Hit]:
    """Work forward puts on a stream of its own with no join after it; a stream forward never uses is no harm."""
    created = _created_streams(facts)
    joins = {id(scope.node): list(_joins(facts, scope, created)) for scope in facts.reachable}
    reported: set[str] = set()
    for scope in facts.reachable:
        here = joins[id(scope.node)]
        # A join in another function of the path (a helper that waits) is taken on trust: order is not known there.
        elsewhere = any(lines for other, lines in joins.items() if other != id(scope.node))
        for use, key, last_line in _stream_uses(facts, scope, created):
            if elsewhere or any(line > last_line for line in here):
                continue
            name = key.replace(".", "self.", 1) if key.startswith(".") else key
            if here:
                detail = f"launches on {name} after the last wait, so nothing joins it back"
            else:
                detail = f"{name} is used but forward never waits for it"
            yield hit_at(RuleId.SIDE_STREAM, use, detail)
            if key in created and key not in reported:
                reported.add(key)
                yield hit_at(RuleId.SIDE_STREAM, created[key], f"{name} is created here and forward never waits for it")


def _created_streams(facts: ModuleFacts) -> dict[str, ast.AST]:
    """Where each named stream object is created (module globals and attributes alike)."""
    created: dict[str, ast.AST] = {}
    for node in facts.nodes:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if (facts.imports.resolve(node.value.func) or "") in _STREAM_CONSTRUCTORS:
                for target in node.targets:
                    if (key := _stream_key(target)) is not None:
                        created.setdefault(key, node)
    return created


def _stream_uses(facts: ModuleFacts, scope: Scope, created: dict[str, ast.AST]) -> Iterator[tuple[ast.AST, str, int]]:
    """(node, stream key, line of the last work under it) for each place forward sends work to a side stream."""
    for node in scope.nodes:
        if isinstance(node, ast.With):
            for item in node.items:
                key = _switched_stream(facts, item.context_expr, created)
                if key is not None:
                    yield item.context_expr, key, _last_work_line(node)
        elif isinstance(node, ast.Call):
            yield from _call_stream_uses(facts, node, created)


def _call_stream_uses(
    facts: ModuleFacts, call: ast.Call, created: dict[str, ast.AST]
) -> Iterator[tuple[ast.AST, str, int]]:
    if (facts.imports.resolve(call.func) or "") == "torch.cuda.set_stream" and call.args:
        yield call, _stream_key(call.args[0]) or "a new stream", call.lineno
        return
    if isinstance(call.func, ast.Attribute) and call.func.attr in _STREAM_BOOKKEEPING:
        return
    # _ext.run(x, self.side.cuda_stream), kernel(..., stream=self.side)
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        base = arg.value if isinstance(arg, ast.Attribute) and arg.attr in ("cuda_stream", "ptr") else arg
        if (key := _stream_key(base)) in created and key is not None:
            yield arg, key, call.lineno


def _switched_stream(facts: ModuleFacts, expr: ast.expr, created: dict[str, ast.AST]) -> str | None:
    """The stream a with-item makes current: torch.cuda.stream(s), a CuPy stream used as a context, a new one."""
    if isinstance(expr, ast.Call):
        qualname = facts.imports.resolve(expr.func) or ""
        if qualname in _STREAM_CONSTRUCTORS:
            return "a new stream"
        if qualname in _STREAM_SWITCHES and expr.args:
            inner = expr.args[0]
            if isinstance(inner, ast.Call) and (facts.imports.resolve(inner.func) or "") in _STREAM_CONSTRUCTORS:
                return "a new stream"
            current = isinstance(inner, ast.Call) and (facts.imports.resolve(inner.func) or "").endswith(
                ("current_stream", "default_stream")
            )
            return None if current else (_stream_key(inner) or "a side stream")
        return None
    key = _stream_key(expr)
    return key if key in created else None


def _last_work_line(block: ast.With) -> int:
    """The last line in a with-block that calls something other than a wait: where the stream's work ends."""
    lines = [
        n.lineno
        for stmt in block.body
        for n in ast.walk(stmt)
        if isinstance(n, ast.Call)
        and not (isinstance(n.func, ast.Attribute) and n.func.attr in ("wait_stream", "wait_event", "synchronize"))
    ]
    return max(lines, default=block.lineno)


def _joins(facts: ModuleFacts, scope: Scope, created: dict[str, ast.AST]) -> Iterator[int]:
    """Lines where forward waits for side-stream work: a device-wide sync, the current stream waiting for another
    stream or an event, the side stream's (or a recorded event's) own synchronize. Synchronising the current
    stream, or an event never recorded, joins nothing."""
    recorded = {
        _stream_key(n.func.value)
        for n in scope.nodes
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "record"
    }
    for node in scope.nodes:
        if not isinstance(node, ast.Call):
            continue
        if (facts.imports.resolve(node.func) or "") in _DEVICE_JOINS:
            yield node.lineno
        elif isinstance(node.func, ast.Attribute):
            receiver = _stream_key(node.func.value)
            if node.func.attr in ("wait_stream", "wait_event") and receiver not in created:
                yield node.lineno
            elif (
                node.func.attr == "synchronize"
                and receiver is not None
                and (receiver in created or receiver in recorded)
            ):
                yield node.lineno


def _concurrent_imports(node: ast.Import | ast.ImportFrom) -> Iterator[Hit]:
    names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    for name in names:
        if _is_concurrent_module(name):
            yield hit_at(RuleId.THREAD_OR_PROCESS, node, f"imports {name}")
            return


def _is_concurrent_module(name: str) -> bool:
    return any(name == module or name.startswith(module + ".") for module in _CONCURRENT_MODULES)


def _is_concurrent(qualname: str) -> bool:
    module, _, function = qualname.rpartition(".")
    if _is_concurrent_module(module):
        return True
    return module == "os" and (function in _PROCESS_CALLS or function.startswith(_PROCESS_PREFIXES))
