"""package_install and dynamic_code: code that arrives or is built while the candidate runs."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from profsvc.staticcheck.facts import ModuleFacts
from profsvc.staticcheck.findings import Hit, hit_at
from profsvc.staticcheck.rules import RuleId

_INSTALLER_MODULES = ("pip", "ensurepip", "site")
# importlib's read-only corners are harmless; the rest loads code by name or path.
_IMPORTLIB_HARMLESS = ("importlib.metadata", "importlib.resources")
_SYS_PATH_EDITS = frozenset({"sys.path.append", "sys.path.insert", "sys.path.extend"})
_SHELL_CALLS = ("subprocess.", "os.system", "os.popen", "os.exec", "os.spawn", "os.posix_spawn")
_INSTALL_COMMAND = re.compile(r"\bpip3?\b|\binstall\b|\bconda\b|\bapt(-get)?\b|\bensurepip\b|\buv\b")
_DYNAMIC_BUILTINS = frozenset({"eval", "exec", "compile"})
_DYNAMIC_CALLS = frozenset(
    {
        "marshal.loads",
        "pickle.loads",
        "pickle.load",
        "dill.loads",
        "cloudpickle.loads",
        "types.FunctionType",
        "types.CodeType",
        "base64.b64decode",
        "zlib.decompress",
        "codecs.decode",
    }
)


def detect(facts: ModuleFacts) -> Iterator[Hit]:
    """All package_install and dynamic_code hits of the module."""
    for node in facts.nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield from _installer_import(node)
        elif isinstance(node, ast.Call):
            yield from _runtime_call(facts, node)
        elif isinstance(node, ast.Attribute) and node.attr == "__code__" and isinstance(node.ctx, ast.Store):
            yield hit_at(RuleId.DYNAMIC_CODE, node, "replaces a function's __code__")
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(facts.imports.resolve(t) == "sys.path" for t in targets):
                yield hit_at(RuleId.PACKAGE_INSTALL, node, "replaces sys.path")


def _installer_import(node: ast.Import | ast.ImportFrom) -> Iterator[Hit]:
    names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    for name in names:
        if name.split(".")[0] in _INSTALLER_MODULES:
            yield hit_at(RuleId.PACKAGE_INSTALL, node, f"imports {name}")
            return


def _runtime_call(facts: ModuleFacts, call: ast.Call) -> Iterator[Hit]:
    qualname = facts.imports.resolve(call.func)
    if qualname is None:
        if isinstance(call.func, ast.Name) and call.func.id in _DYNAMIC_BUILTINS:
            yield hit_at(RuleId.DYNAMIC_CODE, call, f"calls {call.func.id}()")
        elif isinstance(call.func, ast.Name) and call.func.id == "__import__":
            yield hit_at(RuleId.PACKAGE_INSTALL, call, "imports a module by name with __import__")
        return
    if qualname in _DYNAMIC_CALLS:
        yield hit_at(RuleId.DYNAMIC_CODE, call, f"calls {qualname}")
    elif qualname in _SYS_PATH_EDITS:
        yield hit_at(RuleId.PACKAGE_INSTALL, call, f"edits the import path ({qualname})")
    elif qualname.split(".")[0] in _INSTALLER_MODULES:
        yield hit_at(RuleId.PACKAGE_INSTALL, call, f"calls {qualname}")
    elif qualname.startswith("importlib.") and not qualname.startswith(_IMPORTLIB_HARMLESS):
        yield hit_at(RuleId.PACKAGE_INSTALL, call, f"loads code with {qualname}")
    elif qualname.startswith(_SHELL_CALLS) and (command := _install_command(call)):
        yield hit_at(RuleId.PACKAGE_INSTALL, call, f"runs {command!r}")


def _install_command(call: ast.Call) -> str | None:
    words = [n.value for n in ast.walk(call) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    command = " ".join(words)
    return command[:60] if _INSTALL_COMMAND.search(command) else None
