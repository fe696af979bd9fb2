"""side_stream and thread_or_process: work the harness's timer on the current stream cannot see."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from profsvc.staticcheck.facts import ModuleFacts
from profsvc.staticcheck.findings import Hit, hit_at
from profsvc.staticcheck.rules import RuleId

_STREAMS = frozenset(
    {
        "torch.cuda.Stream",
        "torch.cuda.stream",
        "torch.cuda.ExternalStream",
        "torch.cuda.StreamContext",
        "torch.cuda.set_stream",
        "torch.cuda.streams.Stream",
        "torch.cuda.streams.ExternalStream",
        "torch.Stream",
        "cupy.cuda.Stream",
    }
)
# Calls on the forward path that join side-stream work back into the timed stream.
_JOINS = frozenset({"wait_stream", "wait_event", "synchronize"})
_CONCURRENT_MODULES = frozenset(
    {"threading", "_thread", "multiprocessing", "concurrent", "subprocess", "asyncio", "pty", "torch.multiprocessing"}
)
_PROCESS_CALLS = frozenset({"fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp"})
_PROCESS_PREFIXES = ("spawn", "exec")


def detect(facts: ModuleFacts) -> Iterator[Hit]:
    """All side_stream and thread_or_process hits of the module."""
    joined = _joins_streams(facts)
    for node in ast.walk(facts.tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield from _concurrent_imports(node)
        elif isinstance(node, ast.Call):
            qualname = facts.imports.resolve(node.func) or ""
            if qualname in _STREAMS and not joined:
                yield hit_at(RuleId.SIDE_STREAM, node, f"{qualname} is used but forward never waits for it")
            elif _is_concurrent(qualname):
                yield hit_at(RuleId.THREAD_OR_PROCESS, node, f"calls {qualname}")


def _joins_streams(facts: ModuleFacts) -> bool:
    for scope in facts.reachable:
        for node in scope.nodes:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _JOINS:
                return True
    return False


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
