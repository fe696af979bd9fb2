"""torch_fallback, reference_fallback and try_except_fallback: PyTorch doing the work the custom kernel claims to do.

Each hit names one operation left to PyTorch; whether the candidate has any kernel of its own at all is
no_custom_kernel's question (profsvc.staticcheck.kernels).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from profsvc.staticcheck.facts import MODEL_NEW, REFERENCE_CLASS, ModuleFacts, Scope
from profsvc.staticcheck.findings import Hit, hit_at
from profsvc.staticcheck.names import dotted
from profsvc.staticcheck.rules import RuleId

# torch namespaces that hold no compute (building, loading, devices, settings) or that other rules judge.
_TORCH_EXEMPT_PREFIXES = (
    "torch.utils.",
    "torch.cuda.",
    "torch.backends.",
    "torch.jit.",
    "torch.library.",
    "torch.autograd.",
    "torch.nn.init.",
    "torch.nn.utils.",
    "torch.amp.",
    "torch.autocast",
    "torch.overrides.",
    "torch.profiler.",
    "torch.testing.",
    "torch.set_",
    "torch.manual_seed",
    "torch.save",
    "torch.load",
)
# Allocation, shape, view, metadata and dtype/device handling: the glue a custom-kernel forward needs.
_TORCH_HARMLESS = frozenset(
    {
        # allocation
        "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
        "tensor", "as_tensor", "as_strided", "from_numpy", "frombuffer", "arange",
        # queries and grad mode
        "is_tensor", "is_floating_point", "is_complex", "numel", "get_default_dtype", "broadcast_shapes",
        "promote_types", "result_type", "can_cast", "is_grad_enabled", "no_grad", "enable_grad", "inference_mode",
        "finfo", "iinfo", "_assert",
        # views and layout
        "reshape", "view", "view_as", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose", "permute", "t",
        "narrow", "select", "chunk", "split", "unbind", "movedim", "expand", "expand_as", "contiguous", "detach",
        "clone",
        # Tensor methods called through torch.Tensor.<name>
        "data_ptr", "size", "stride", "dim", "ndimension", "nelement", "element_size", "is_contiguous",
        "storage_offset", "get_device", "cuda", "cpu", "to", "float", "double", "half", "bfloat16", "int", "long",
        "bool", "type", "item", "tolist", "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "zero_",
        "fill_", "copy_", "requires_grad_", "untyped_storage", "resize_", "pin_memory", "record_stream",
    }
)  # fmt: skip
# Tensor methods that compute: flagged on any receiver that is not a compiled extension.
_COMPUTE_METHODS = frozenset(
    {
        "matmul", "mm", "bmm", "addmm", "addmv", "addbmm", "baddbmm", "mv", "dot", "outer", "einsum", "linear",
        "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
        "relu", "relu_", "gelu", "silu", "sigmoid", "sigmoid_", "tanh", "tanh_", "softmax", "log_softmax",
        "layer_norm", "exp", "exp_", "log", "log_", "log1p", "sqrt", "rsqrt", "pow", "pow_", "abs", "neg", "clamp",
        "clamp_", "clip", "sum", "mean", "var", "std", "norm", "amax", "amin", "max", "min", "argmax", "argmin",
        "logsumexp", "cumsum", "cumprod", "prod", "mul", "mul_", "add", "add_", "sub", "sub_", "div", "div_",
        "addcmul", "addcdiv", "lerp", "where", "masked_fill", "masked_fill_", "topk", "scatter", "scatter_",
        "scatter_add", "scatter_add_", "gather", "index_select", "index_add", "index_add_", "repeat",
        "repeat_interleave", "tril", "triu", "flip", "roll", "erf", "sin", "cos", "reciprocal", "square",
    }
)  # fmt: skip
# Other array libraries' heavy operations are a fallback too (cupy.matmul is cuBLAS, numpy runs on the CPU);
# their small helpers (numpy.prod of a shape) are not.
_ARRAY_LIBRARIES = frozenset({"numpy", "cupy", "scipy", "jax"})
_ARRAY_COMPUTE = frozenset({"matmul", "dot", "einsum", "tensordot", "inner", "outer", "convolve", "correlate"})
# operator.matmul(a, b) is a @ b wherever it is used (reduce(operator.mul, shape) multiplies sizes).
_MATMUL_OPERATORS = frozenset({"operator.matmul", "operator.imatmul", "operator.__matmul__"})
# Tensor dunders that compute: x.__matmul__(w) is x @ w.
_DUNDERS = frozenset(
    {"__matmul__", "__rmatmul__", "__mul__", "__rmul__", "__add__", "__radd__", "__sub__", "__rsub__",
     "__truediv__", "__rtruediv__", "__pow__", "__neg__", "__gt__", "__lt__", "__ge__", "__le__"}
)  # fmt: skip
# Compilers of PyTorch code: what they run are Inductor's or TorchScript's kernels, not the candidate's.
_TORCH_COMPILERS = frozenset({"torch.compile", "torch._dynamo.optimize"})

Found = tuple[str, str]


def detect(facts: ModuleFacts) -> Iterator[Hit]:
    """All torch_fallback, reference_fallback and try_except_fallback hits of the module."""
    yield from _structural(facts)
    yield from _compiled_torch(facts)
    falls_back: dict[int, str] = {}
    for scope in facts.reachable:
        hits = list(_scope_fallbacks(facts, scope))
        if hits:
            falls_back[id(scope.node)] = hits[0].detail
        yield from hits
    _propagate(facts, falls_back)
    for scope in facts.reachable:
        yield from _try_fallbacks(facts, scope, falls_back)
    yield from _model_new_in_handler(facts)


def _scope_fallbacks(facts: ModuleFacts, scope: Scope) -> Iterator[Hit]:
    """torch_fallback and reference_fallback hits inside one function on the forward path."""
    for node in scope.nodes:
        found = _node_fallback(facts, scope, node)
        if found:
            yield hit_at(found[0], node, found[1])


def _node_fallback(facts: ModuleFacts, scope: Scope, node: ast.AST) -> Found | None:
    """Which rule this node breaks by doing the work in PyTorch, and why; None when it does not."""
    if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.MatMult):
        return RuleId.TORCH_FALLBACK, "uses the @ operator, a PyTorch matmul"
    if isinstance(node, ast.Attribute | ast.Name) and facts.imports.resolve(node) in _MATMUL_OPERATORS:
        return RuleId.TORCH_FALLBACK, f"uses {facts.imports.resolve(node)}, a PyTorch matmul"
    if not isinstance(node, ast.Call):
        return None
    for check in (_torch_function, _layer_call, _reference_call, _tensor_method, _getattr_torch, _dispatch_table):
        found = check(facts, scope, node)
        if found:
            return found
    return None


def _torch_function(facts: ModuleFacts, scope: Scope, call: ast.Call) -> Found | None:
    qualname = facts.imports.resolve(call.func)
    if qualname is None or facts.is_extension(call.func, scope):
        return None
    return (RuleId.TORCH_FALLBACK, f"calls {qualname}") if _torch_compute(qualname) else None


def _torch_compute(qualname: str) -> bool:
    """Whether calling this imported name computes in PyTorch (or another array library's heavy operation)."""
    top, _, _ = qualname.partition(".")
    last = qualname.rsplit(".", 1)[-1]
    if top in _ARRAY_LIBRARIES:
        return last in _ARRAY_COMPUTE
    if top != "torch" or qualname.startswith(_TORCH_EXEMPT_PREFIXES) or last in _TORCH_HARMLESS:
        return False
    # Capitalised names construct (torch.Size, nn.Linear): calling what they build is the fallback.
    return not last[:1].isupper()


def _layer_call(facts: ModuleFacts, scope: Scope, call: ast.Call) -> Found | None:
    if (label := facts.nn_class_label(call.func)) is not None:
        return _layer_found(facts, f"calls a {label} built in forward", label)
    target = scope.resolve_element(call.func)
    while isinstance(target, ast.Subscript):
        target = target.value
    if isinstance(target, ast.Attribute) and (target.attr == "forward" or target.attr.startswith("_")):
        # self.proj.forward(x), self.conv._conv_forward(...): the layer's own code
        target = target.value if isinstance(target.value, ast.Attribute) else target
    if (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == scope.self_name
        and target.attr in facts.layer_attrs
    ):
        label = facts.layer_attrs[target.attr]
        return _layer_found(facts, f"calls self.{target.attr}, a {label}", label)
    if isinstance(target, ast.Name) and target.id in facts.module_values and target.id not in scope.locals:
        # _REF = Model() at module level, called in forward
        label = facts.layer_label(facts.module_values[target.id])
        if label is not None:
            return _layer_found(facts, f"calls {target.id}, a {label}", label)
    return None


def _layer_found(facts: ModuleFacts, detail: str, label: str) -> Found:
    reference = label.rsplit(".", 1)[-1] in facts.reference_classes or label == REFERENCE_CLASS
    return (RuleId.REFERENCE_FALLBACK if reference else RuleId.TORCH_FALLBACK), detail


def _reference_call(facts: ModuleFacts, scope: Scope, call: ast.Call) -> Found | None:
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in ("forward", "__call__"):
        return None
    owner = func.value
    if isinstance(owner, ast.Name) and owner.id in facts.reference_classes:
        return RuleId.REFERENCE_FALLBACK, f"calls {owner.id}.{func.attr}"
    if isinstance(owner, ast.Name) and owner.id in facts.nn_classes:
        return RuleId.TORCH_FALLBACK, f"calls {owner.id}.{func.attr}"
    if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
        if any(facts.is_reference(base) for cls in facts.model_new_classes for base in cls.bases):
            return RuleId.REFERENCE_FALLBACK, f"calls super().{func.attr}, the reference's forward"
        return RuleId.TORCH_FALLBACK, f"calls super().{func.attr}, the parent class's PyTorch forward"
    return None


def _tensor_method(facts: ModuleFacts, scope: Scope, call: ast.Call) -> Found | None:
    func = call.func
    if not isinstance(func, ast.Attribute) or (func.attr not in _COMPUTE_METHODS and func.attr not in _DUNDERS):
        return None
    receiver = func.value
    if facts.imports.is_module_root(receiver) or facts.is_extension(receiver, scope):
        return None
    if isinstance(receiver, ast.Name) and receiver.id == scope.self_name and func.attr in scope.methods:
        return None  # the class's own method: its body is on the forward path and checked there
    return RuleId.TORCH_FALLBACK, f"calls .{func.attr}() on a tensor"


def _getattr_torch(facts: ModuleFacts, scope: Scope, call: ast.Call) -> Found | None:
    """A torch function called through getattr: getattr(torch, "mat" + "mul")(a, b), or bound to a local first.

    Looking a name up is not computing: getattr(torch, "float32") reads a dtype.
    """
    lookup = scope.resolve_local(call.func)
    if not (isinstance(lookup, ast.Call) and isinstance(lookup.func, ast.Name) and lookup.func.id == "getattr"):
        return None
    if not lookup.args or not (facts.imports.resolve(lookup.args[0]) or "").startswith("torch"):
        return None
    module = facts.imports.resolve(lookup.args[0]) or "torch"
    name = lookup.args[1] if len(lookup.args) > 1 else None
    if isinstance(name, ast.Constant) and isinstance(name.value, str):
        qualname = f"{module}.{name.value}"
        return (RuleId.TORCH_FALLBACK, f"calls {qualname} looked up with getattr") if _torch_compute(qualname) else None
    return RuleId.TORCH_FALLBACK, f"calls a {module} function whose name is computed at run time (getattr)"


def _dispatch_table(facts: ModuleFacts, scope: Scope, call: ast.Call) -> Found | None:
    """A torch function picked from a module-level table: _OPS["relu"](x) with _OPS = {"relu": torch.relu}."""
    target = scope.resolve_local(call.func)
    if not isinstance(target, ast.Subscript) or not isinstance(target.value, ast.Name):
        return None
    table = facts.module_values.get(target.value.id)
    if isinstance(table, ast.Dict):
        entries = [v for v in table.values if v is not None]
    elif isinstance(table, ast.List | ast.Tuple):
        entries = list(table.elts)
    else:
        return None
    for entry in entries:
        qualname = facts.imports.resolve(entry)
        if qualname and (_torch_compute(qualname) or qualname in _MATMUL_OPERATORS):
            return RuleId.TORCH_FALLBACK, f"calls {qualname} through the table {target.value.id}"
        if isinstance(entry, ast.Lambda) and any(_node_fallback(facts, scope, n) for n in ast.walk(entry.body)):
            return RuleId.TORCH_FALLBACK, f"calls a PyTorch lambda through the table {target.value.id}"
    return None


def _compiled_torch(facts: ModuleFacts) -> Iterator[Hit]:
    """torch.compile anywhere outside the reference: the kernels it runs are Inductor's, not the candidate's."""
    inside_reference = {
        id(n) for cls in facts.reference_classes if cls in facts.classes for n in ast.walk(facts.classes[cls])
    }
    for node in facts.nodes:
        if isinstance(node, ast.Call) and id(node) not in inside_reference:
            qualname = facts.imports.resolve(node.func) or ""
            if qualname in _TORCH_COMPILERS:
                yield hit_at(RuleId.TORCH_FALLBACK, node, f"compiles PyTorch code with {qualname}")


def _structural(facts: ModuleFacts) -> Iterator[Hit]:
    """ModelNew whose forward is the reference's or a layer's: inherited, aliased, or ModelNew bound to one."""
    for cls in facts.model_new_classes:
        if (source := _inherited_forward(facts, cls)) is not None:
            rule = RuleId.REFERENCE_FALLBACK if source in facts.reference_classes else RuleId.TORCH_FALLBACK
            yield hit_at(rule, cls, f"ModelNew inherits forward from {source}")
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in ("forward", "__call__") for t in stmt.targets
            ):
                rule = RuleId.REFERENCE_FALLBACK if _names_reference(facts, stmt.value) else RuleId.TORCH_FALLBACK
                yield hit_at(rule, stmt, f"ModelNew binds forward to {ast.unparse(stmt.value)}")
    for node in facts.nodes:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == MODEL_NEW for t in node.targets):
            qualname = facts.imports.resolve(node.value) or ""
            if _names_reference(facts, node.value):
                yield hit_at(RuleId.REFERENCE_FALLBACK, node, f"ModelNew is bound to {ast.unparse(node.value)}")
            elif qualname.startswith("torch.nn.") or (
                isinstance(node.value, ast.Name) and node.value.id in facts.nn_classes
            ):
                yield hit_at(RuleId.TORCH_FALLBACK, node, f"ModelNew is bound to {ast.unparse(node.value)}")


def _names_reference(facts: ModuleFacts, node: ast.expr) -> bool:
    """Whether an expression is the reference class or something of it (Model, Model.forward)."""
    while isinstance(node, ast.Attribute):
        if facts.is_reference(node):
            return True
        node = node.value
    return facts.is_reference(node)


def _inherited_forward(facts: ModuleFacts, cls: ast.ClassDef) -> str | None:
    """Where ModelNew's forward comes from when ModelNew does not define it: a module class or a torch.nn layer."""
    owner = facts.methods.get("forward", (cls, None))[0]
    if owner not in facts.model_new_classes:
        return owner.name
    if "forward" in facts.methods or "__call__" in facts.methods:
        return None
    for base in cls.bases:
        if facts.is_reference(base):
            return dotted(base) or REFERENCE_CLASS
        qualname = facts.imports.resolve(base) or ""
        if qualname.startswith("torch.nn.") and qualname != "torch.nn.Module":
            return qualname
    return None


def _propagate(facts: ModuleFacts, falls_back: dict[int, str]) -> None:
    """Mark forward-path functions that fall back through a function they call."""
    by_name = {scope.node.name: scope for scope in facts.reachable}
    changed = True
    while changed:
        changed = False
        for scope in facts.reachable:
            if id(scope.node) in falls_back:
                continue
            for callee in _called_names(scope.node):
                target = by_name.get(callee)
                if target is not None and id(target.node) in falls_back:
                    falls_back[id(scope.node)] = f"calls {callee}, which {falls_back[id(target.node)]}"
                    changed = True
                    break


def _called_names(node: ast.AST) -> Iterator[str]:
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            if isinstance(call.func, ast.Name):
                yield call.func.id
            elif isinstance(call.func, ast.Attribute):
                yield call.func.attr


def _try_fallbacks(facts: ModuleFacts, scope: Scope, falls_back: dict[int, str]) -> Iterator[Hit]:
    by_name = {s.node.name: falls_back[id(s.node)] for s in facts.reachable if id(s.node) in falls_back}
    for node in scope.nodes:
        if not isinstance(node, ast.Try | ast.TryStar):
            continue
        for handler in node.handlers:
            detail = _handler_fallback(facts, scope, handler, by_name)
            if detail:
                yield hit_at(RuleId.TRY_EXCEPT_FALLBACK, handler, detail)


def _handler_fallback(facts: ModuleFacts, scope: Scope, handler: ast.ExceptHandler, by_name: dict[str, str]) -> str:
    for node in ast.walk(handler):
        found = _node_fallback(facts, scope, node)
        if found:
            return f"the except branch {found[1]}"
    for callee in _called_names(handler):
        if callee in by_name:
            return f"the except branch calls {callee}, which {by_name[callee]}"
    return ""


def _model_new_in_handler(facts: ModuleFacts) -> Iterator[Hit]:
    """A ModelNew defined only when something fails: the except branch picks the implementation."""
    for node in facts.nodes:
        if not isinstance(node, ast.ExceptHandler):
            continue
        for inner in ast.walk(node):
            if (isinstance(inner, ast.ClassDef) and inner.name == MODEL_NEW) or (
                isinstance(inner, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == MODEL_NEW for t in inner.targets)
            ):
                yield hit_at(RuleId.TRY_EXCEPT_FALLBACK, node, "ModelNew is (re)defined in an except branch")
                break
