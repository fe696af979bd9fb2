"""input_mutation: forward writing into its inputs, in Python or inside the C++ an extension runs.

The reference runs on the same inputs (or the harness compares against them):
zeroing an input, or computing the result in place, can make a wrong kernel
look right. Only forward's own parameters count as inputs; buffers forward
allocates and passes to its kernels are outputs, whatever the C++ does to them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from profsvc.staticcheck.cppsource import CppString, exported_name, host_function, string_hit
from profsvc.staticcheck.facts import ModuleFacts, Scope
from profsvc.staticcheck.findings import Hit, hit_at
from profsvc.staticcheck.rules import RuleId

# In-place methods that only change bookkeeping, not the data.
_METADATA_INPLACE = frozenset({"requires_grad_", "share_memory_", "retain_grad", "record_stream"})
# Calls that hand back the same tensor (x.contiguous() is x when x is contiguous already).
_SAME_TENSOR = frozenset({"contiguous", "view", "view_as", "reshape", "flatten", "squeeze", "unsqueeze", "detach"})


def detect(facts: ModuleFacts) -> Iterator[Hit]:
    """All input_mutation hits of the module."""
    entry = next((s for s in facts.reachable if s.node.name in ("forward", "__call__")), None)
    if entry is None:
        return
    inputs = set(entry.params) - entry.persistent_params
    yield from _python_writes(entry, inputs)
    strings = facts.cpp_strings
    if strings:
        yield from _extension_writes(facts, entry, inputs, strings)


def _input_name(scope: Scope, node: ast.expr, inputs: set[str], depth: int = 2) -> str | None:
    """The input an expression is (through .contiguous(), .view(), `x = x.contiguous()`), None for anything else."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SAME_TENSOR:
        node = node.func.value
    if not isinstance(node, ast.Name):
        return None
    if node.id in scope.values and depth > 0:
        return _input_name(scope, scope.values[node.id], inputs, depth - 1)
    return node.id if node.id in inputs else None


def _python_writes(scope: Scope, inputs: set[str]) -> Iterator[Hit]:
    for node in scope.nodes:
        if isinstance(node, ast.Call):
            yield from _call_writes(scope, node, inputs)
        elif isinstance(node, ast.Assign | ast.AugAssign):
            yield from _assignment_writes(scope, node, inputs)


def _call_writes(scope: Scope, call: ast.Call, inputs: set[str]) -> Iterator[Hit]:
    """x.zero_(), torch.add(a, b, out=x)."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr.endswith("_") and not func.attr.startswith("_"):
        if func.attr not in _METADATA_INPLACE and (name := _input_name(scope, func.value, inputs)):
            yield hit_at(RuleId.INPUT_MUTATION, call, f"forward calls {name}.{func.attr}()")
    for keyword in call.keywords:
        if keyword.arg == "out" and (name := _input_name(scope, keyword.value, inputs)):
            yield hit_at(RuleId.INPUT_MUTATION, call, f"forward passes out={name}")


def _assignment_writes(scope: Scope, node: ast.Assign | ast.AugAssign, inputs: set[str]) -> Iterator[Hit]:
    """x[...] = v, x.data = v, x += v (in place on a tensor)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        written = target.value if isinstance(target, ast.Subscript | ast.Attribute) else None
        if isinstance(node, ast.AugAssign) and isinstance(target, ast.Name):
            written = target
        if written is not None and (name := _input_name(scope, written, inputs)):
            yield hit_at(RuleId.INPUT_MUTATION, node, f"forward writes into {name} ({ast.unparse(target)})")


def _extension_writes(facts: ModuleFacts, scope: Scope, inputs: set[str], strings: list[CppString]) -> Iterator[Hit]:
    """Inputs forward hands to an extension function whose C++ writes into that parameter."""
    # A parameter's body is searched once, however many calls pass it an input: its hits sit at the same places.
    searched: set[tuple[int, str, int]] = set()
    for node in scope.nodes:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if not facts.is_kernel_call(node, scope):
            continue
        passed = {i: name for i, arg in enumerate(node.args) if (name := _input_name(scope, arg, inputs))}
        if not passed:
            continue
        for number, string in enumerate(strings):
            function = exported_name(string.text, node.func.attr)
            found = host_function(string.text, function)
            if found is None:
                continue
            params, body, offset = found
            for index, input_name in passed.items():
                if index < len(params) and (number, function, index) not in searched:
                    searched.add((number, function, index))
                    yield from _cpp_writes(string, function, (params[index], body, offset), input_name)
            break


def _cpp_writes(string: CppString, function: str, found: tuple[str, str, int], input_name: str) -> Iterator[Hit]:
    param, body, offset = found
    name = re.escape(param)
    patterns = (
        (rf"\b{name}\s*\.\s*(\w+_)\s*\(", "calls {param}.{method}() on its input"),
        (
            rf"\bcu(?:da)?Memset\w*\s*\(\s*(?:\([^()]*\)\s*)?{name}\s*\.\s*(?:mutable_)?data_ptr",
            "memsets its input {param}",
        ),
        (
            rf"\b(?:cudaMemcpy\w*|memcpy)\s*\(\s*(?:\([^()]*\)\s*)?{name}\s*\.\s*(?:mutable_)?data_ptr",
            "copies into its input {param}",
        ),
        (rf"\breturn\s+{name}\s*;", "returns its input {param} as the output"),
    )
    suffix = "" if param == input_name else f" (forward's {input_name})"
    for pattern, action in patterns:
        for match in re.finditer(pattern, body):
            method = match.group(1) if match.groups() else ""
            if method in _METADATA_INPLACE:
                continue
            detail = f"{function}() in the extension {action.format(param=param, method=method)}{suffix}"
            yield string_hit(string.node, string.text, offset + match.start(), RuleId.INPUT_MUTATION, detail)
