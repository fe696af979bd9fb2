"""monkeypatching and harness_introspection: reaching into the harness instead of computing.

Monkeypatching replaces what the harness measures or compares with (timers,
synchronisation, torch functions, the reference Model); introspection reads
state the candidate was never given (frames, the garbage collector, __main__,
sys.modules, builtins, environment probes for the profiler).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from profsvc.staticcheck.facts import ModuleFacts
from profsvc.staticcheck.findings import Hit, hit_at
from profsvc.staticcheck.names import dotted, root
from profsvc.staticcheck.rules import RuleId

# Settings, not code: torch.backends flags (precision_downcast judges the tf32 ones) and sys.path (package_install).
_NOT_PATCHING_PREFIXES = ("torch.backends.", "sys.path")
_INTROSPECTION = (
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "sys._getframe",
    "sys._current_frames",
    "sys.modules",
    "sys.settrace",
    "sys.setprofile",
    "sys.gettrace",
    "sys.getprofile",
    "threading.settrace",
    "traceback.extract_stack",
    "traceback.walk_stack",
    "traceback.print_stack",
    "ctypes.pythonapi",
    "__main__",
)
_FRAME_ATTRS = frozenset(
    {"f_back", "f_locals", "f_globals", "f_builtins", "tb_frame", "gi_frame", "cr_frame", "__globals__"}
    | {"__subclasses__", "_is_profiler_enabled"}
)
_ENVIRONMENT = ("os.environ", "os.getenv", "os.getenvb")
# Environment variables and names a candidate would look for to tell whether Nsight is watching.
_PROFILER_PROBE = re.compile(r"CUDA_INJECTION64_PATH|NSYS_|NV_NSIGHT|NSIGHT|NCU_|NV_COMPUTE_PROFILER")


def detect(facts: ModuleFacts) -> Iterator[Hit]:
    """All monkeypatching and harness_introspection hits of the module."""
    for node in ast.walk(facts.tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for target in targets:
                yield from _patched_target(facts, target)
        elif isinstance(node, ast.Call):
            yield from _patching_call(facts, node)
        elif isinstance(node, ast.Attribute | ast.Name):
            yield from _introspective_name(facts, node)
        elif isinstance(node, ast.ImportFrom) and node.module == "__main__":
            yield hit_at(RuleId.HARNESS_INTROSPECTION, node, "imports from __main__, where the harness runs")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if match := _PROFILER_PROBE.search(node.value):
                yield hit_at(RuleId.HARNESS_INTROSPECTION, node, f"looks for the profiler ({match.group()})")
    yield from _environment_reads(facts)


def _target_nodes(target: ast.expr) -> Iterator[ast.expr]:
    """The individual targets of an assignment (tuple and starred targets unpacked)."""
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _target_nodes(element)
    elif isinstance(target, ast.Starred):
        yield from _target_nodes(target.value)
    else:
        yield target


def _patched_target(facts: ModuleFacts, target: ast.expr) -> Iterator[Hit]:
    for node in _target_nodes(target):
        if isinstance(node, ast.Subscript):
            container = facts.imports.resolve(node.value) or dotted(node.value) or ""
            if container in ("sys.modules", "__builtins__"):
                yield hit_at(RuleId.HARNESS_INTROSPECTION, node, f"writes into {container}")
        elif isinstance(node, ast.Attribute):
            yield from _patched_attribute(facts, node)


def _patched_attribute(facts: ModuleFacts, node: ast.Attribute) -> Iterator[Hit]:
    qualname = facts.imports.resolve(node)
    base = root(node)
    if qualname and (qualname == "builtins" or qualname.startswith("builtins.")):
        yield hit_at(RuleId.HARNESS_INTROSPECTION, node, f"patches {qualname}")
    elif qualname and not qualname.startswith(_NOT_PATCHING_PREFIXES):
        yield hit_at(RuleId.MONKEYPATCHING, node, qualname)
    elif isinstance(base, ast.Name) and base.id in facts.nn_classes:
        yield hit_at(RuleId.MONKEYPATCHING, node, f"{dotted(node)} of the reference")


def _patching_call(facts: ModuleFacts, call: ast.Call) -> Iterator[Hit]:
    qualname = facts.imports.resolve(call.func) or ""
    if qualname.startswith(("unittest.mock.", "mock.")):
        yield hit_at(RuleId.MONKEYPATCHING, call, f"what {qualname} targets")
    elif any(isinstance(a, ast.Constant) and a.value == "__main__" for a in call.args):
        yield hit_at(RuleId.HARNESS_INTROSPECTION, call, "looks up the __main__ module, where the harness runs")
    elif isinstance(call.func, ast.Name) and not qualname:
        yield from _builtin_call(facts, call, call.func.id)


def _builtin_call(facts: ModuleFacts, call: ast.Call, name: str) -> Iterator[Hit]:
    first = call.args[0] if call.args else None
    if name == "setattr" and first is not None:
        target = facts.imports.resolve(first)
        if target is not None or (isinstance(first, ast.Name) and first.id in facts.nn_classes):
            yield hit_at(RuleId.MONKEYPATCHING, call, f"an attribute of {target or dotted(first)} (via setattr)")
    elif name == "globals" or (name == "vars" and first is not None and facts.imports.is_module_root(first)):
        yield hit_at(RuleId.HARNESS_INTROSPECTION, call, f"calls {name}() to read module state")


def _introspective_name(facts: ModuleFacts, node: ast.Attribute | ast.Name) -> Iterator[Hit]:
    if isinstance(node, ast.Attribute) and node.attr in _FRAME_ATTRS:
        yield hit_at(RuleId.HARNESS_INTROSPECTION, node, f"reads .{node.attr}")
        return
    if isinstance(node, ast.Name) and node.id == "__builtins__":
        yield hit_at(RuleId.HARNESS_INTROSPECTION, node, "touches __builtins__")
        return
    qualname = facts.imports.resolve(node) or ""
    if qualname.startswith("inspect.") or any(qualname == p or qualname.startswith(p + ".") for p in _INTROSPECTION):
        yield hit_at(RuleId.HARNESS_INTROSPECTION, node, f"uses {qualname}")


def _environment_reads(facts: ModuleFacts) -> Iterator[Hit]:
    """Environment reads in forward: an honest kernel has no reason to ask whether it is being profiled."""
    for scope in facts.reachable:
        for node in scope.nodes:
            if isinstance(node, ast.Attribute) and (facts.imports.resolve(node) or "").startswith(_ENVIRONMENT):
                yield hit_at(RuleId.HARNESS_INTROSPECTION, node, "reads the environment in forward")
