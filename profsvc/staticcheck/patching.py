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
# Frame getters: reading one's own frame (no argument, or 0) is harmless; a caller's frame is the harness's.
_FRAME_GETTERS = frozenset({"sys._getframe", "inspect.currentframe"})
# Environment variables and names a candidate would look for to tell whether Nsight is watching.
_PROFILER_PROBE = re.compile(r"CUDA_INJECTION64_PATH|NSYS_|NV_NSIGHT|NSIGHT|NCU_|NV_COMPUTE_PROFILER")


def detect(facts: ModuleFacts) -> Iterator[Hit]:
    """All monkeypatching and harness_introspection hits of the module."""
    modules = _module_objects(facts)
    for node in facts.nodes:
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for target in targets:
                yield from _patched_target(facts, target, modules)
        elif isinstance(node, ast.Call):
            yield from _patching_call(facts, node, modules)
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


def _module_objects(facts: ModuleFacts) -> set[str]:
    """Names bound to an imported module or its parts through getattr: ``_m = getattr(torch, "cu" + "da")``."""
    found: set[str] = set()
    assigns = [n for n in facts.nodes if isinstance(n, ast.Assign) and len(n.targets) == 1]
    size = -1
    while size != len(found):
        size = len(found)
        for node in assigns:
            if isinstance(node.targets[0], ast.Name) and _reaches_module(facts, node.value, found):
                found.add(node.targets[0].id)
    return found


def _reaches_module(facts: ModuleFacts, node: ast.expr, modules: set[str]) -> bool:
    """Whether an expression is an imported module or something inside one, however it was looked up."""
    while True:
        if isinstance(node, ast.Name):
            return node.id in facts.imports.aliases or node.id in modules
        if isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and node.args:
            node = node.args[0]
        else:
            return False


def _patched_target(facts: ModuleFacts, target: ast.expr, modules: set[str]) -> Iterator[Hit]:
    for node in _target_nodes(target):
        if isinstance(node, ast.Subscript):
            container = facts.imports.resolve(node.value) or dotted(node.value) or ""
            if container in ("sys.modules", "__builtins__"):
                yield hit_at(RuleId.HARNESS_INTROSPECTION, node, f"writes into {container}")
            elif isinstance(node.value, ast.Attribute) and node.value.attr == "__dict__":
                if _reaches_module(facts, node.value.value, modules):
                    yield hit_at(RuleId.MONKEYPATCHING, node, f"an entry of {ast.unparse(node.value)}")
        elif isinstance(node, ast.Attribute):
            yield from _patched_attribute(facts, node, modules)


def _patched_attribute(facts: ModuleFacts, node: ast.Attribute, modules: set[str]) -> Iterator[Hit]:
    qualname = facts.imports.resolve(node)
    base = root(node)
    if qualname and (qualname == "builtins" or qualname.startswith("builtins.")):
        yield hit_at(RuleId.HARNESS_INTROSPECTION, node, f"patches {qualname}")
    elif qualname and not qualname.startswith(_NOT_PATCHING_PREFIXES):
        yield hit_at(RuleId.MONKEYPATCHING, node, qualname)
    elif isinstance(base, ast.Name) and base.id in facts.nn_classes:
        yield hit_at(RuleId.MONKEYPATCHING, node, f"{dotted(node)} of the reference")
    elif qualname is None and _reaches_module(facts, node.value, modules):
        # getattr(torch, "cuda").synchronize = ..., or through a name bound to such a lookup
        yield hit_at(RuleId.MONKEYPATCHING, node, f"{ast.unparse(node)}, a module attribute reached through getattr")


def _patching_call(facts: ModuleFacts, call: ast.Call, modules: set[str]) -> Iterator[Hit]:
    qualname = facts.imports.resolve(call.func) or ""
    if qualname.startswith(("unittest.mock.", "mock.")):
        yield hit_at(RuleId.MONKEYPATCHING, call, f"what {qualname} targets")
    elif any(isinstance(a, ast.Constant) and a.value == "__main__" for a in call.args):
        yield hit_at(RuleId.HARNESS_INTROSPECTION, call, "looks up the __main__ module, where the harness runs")
    elif qualname in _FRAME_GETTERS and _reads_a_caller(call):
        yield hit_at(RuleId.HARNESS_INTROSPECTION, call, f"reads a caller's frame with {qualname}")
    elif isinstance(call.func, ast.Name) and not qualname:
        yield from _builtin_call(facts, call, call.func.id, modules)


def _reads_a_caller(call: ast.Call) -> bool:
    depth = call.args[0] if call.args else None
    return depth is not None and not (isinstance(depth, ast.Constant) and depth.value == 0)


def _builtin_call(facts: ModuleFacts, call: ast.Call, name: str, modules: set[str]) -> Iterator[Hit]:
    first = call.args[0] if call.args else None
    if name == "setattr" and first is not None:
        target = facts.imports.resolve(first)
        if target is not None or (isinstance(first, ast.Name) and first.id in facts.nn_classes):
            yield hit_at(RuleId.MONKEYPATCHING, call, f"an attribute of {target or dotted(first)} (via setattr)")
        elif _reaches_module(facts, first, modules):
            yield hit_at(RuleId.MONKEYPATCHING, call, f"an attribute of {ast.unparse(first)} (via setattr)")
        elif _assembled_name(call) and not _is_self(first):
            yield hit_at(
                RuleId.MONKEYPATCHING, call, f"an attribute of {ast.unparse(first)} whose name is built at run time"
            )
    elif name == "globals" or (name == "vars" and first is not None and facts.imports.is_module_root(first)):
        yield hit_at(RuleId.HARNESS_INTROSPECTION, call, f"calls {name}() to read module state")


def _assembled_name(call: ast.Call) -> bool:
    """setattr with a name that is not written out: "perf_" + "counter", "".join(...), a variable."""
    return len(call.args) > 1 and not (isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str))


def _is_self(node: ast.expr) -> bool:
    # setattr(self, f"w{i}", ...) registers layers in nn.Module's own way.
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _introspective_name(facts: ModuleFacts, node: ast.Attribute | ast.Name) -> Iterator[Hit]:
    if isinstance(node, ast.Attribute) and node.attr in _FRAME_ATTRS:
        yield hit_at(RuleId.HARNESS_INTROSPECTION, node, f"reads .{node.attr}")
        return
    if isinstance(node, ast.Name) and node.id == "__builtins__":
        yield hit_at(RuleId.HARNESS_INTROSPECTION, node, "touches __builtins__")
        return
    qualname = facts.imports.resolve(node) or ""
    if qualname in _FRAME_GETTERS:
        return  # judged where it is called: reading one's own frame is not looking at the harness
    if qualname.startswith("inspect.") or any(qualname == p or qualname.startswith(p + ".") for p in _INTROSPECTION):
        yield hit_at(RuleId.HARNESS_INTROSPECTION, node, f"uses {qualname}")


def _environment_reads(facts: ModuleFacts) -> Iterator[Hit]:
    """Environment reads in forward: an honest kernel has no reason to ask whether it is being profiled."""
    for scope in facts.reachable:
        for node in scope.nodes:
            if isinstance(node, ast.Attribute) and (facts.imports.resolve(node) or "").startswith(_ENVIRONMENT):
                yield hit_at(RuleId.HARNESS_INTROSPECTION, node, "reads the environment in forward")
