"""A small, safe expression language for the catalog's formulas and the rule table.

Expressions are Python syntax restricted to numbers, names, + - * /, floor
division // and modulo % (with Python's float semantics: `x // 1` is floor(x),
`-(-x // 1)` is ceil(x), `x % 1` the fractional part of x >= 0), unary -,
comparisons, and/or/not, and the functions min, max and abs. Each construct
means what it means in Python, so a test can check a formula with Python's own
`eval`. Expressions are parsed once (`compile_expr`) and evaluated many times
against a mapping of values.
A missing input (None) makes the whole value None, and so does a division (or
modulo) by zero: a figure that cannot be computed is absent, never 0.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping

Value = float | bool | None
Evaluator = Callable[[Mapping[str, Value]], Value]

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARE: dict[type[ast.cmpop], Callable[[float, float], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_FUNCTIONS: dict[str, Callable[..., float]] = {"min": min, "max": max, "abs": abs}


class ExpressionError(ValueError):
    """An expression uses syntax or names the language does not allow."""


def names_in(source: str) -> set[str]:
    """The variable names an expression reads."""
    tree = _parse(source)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in _FUNCTIONS}


def _parse(source: str) -> ast.expr:
    try:
        return ast.parse(source, mode="eval").body
    except SyntaxError as error:
        raise ExpressionError(f"cannot parse {source!r}: {error.msg}") from None


def compile_expr(source: str, allowed_names: set[str] | None = None) -> Evaluator:
    """Compile an expression; with `allowed_names`, reject any other variable."""
    tree = _parse(source)
    if allowed_names is not None:
        unknown = names_in(source) - allowed_names
        if unknown:
            raise ExpressionError(f"unknown name(s) {', '.join(sorted(unknown))} in {source!r}")
    return _build(tree, source)


def _build(node: ast.expr, source: str) -> Evaluator:  # noqa: C901 - one branch per node type
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        constant = float(node.value)
        return lambda values: constant
    if isinstance(node, ast.Name):
        name = node.id
        return lambda values: values.get(name)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _build(node.operand, source)
        return lambda values: None if (v := inner(values)) is None else -v
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _build(node.operand, source)
        return lambda values: None if (v := inner(values)) is None else not v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        op = _BINARY[type(node.op)]
        left, right = _build(node.left, source), _build(node.right, source)

        def binary(values: Mapping[str, Value]) -> Value:
            a, b = left(values), right(values)
            if a is None or b is None:
                return None
            try:
                return op(a, b)
            except ZeroDivisionError:
                return None

        return binary
    if isinstance(node, ast.Compare):
        parts = [_build(node.left, source), *(_build(c, source) for c in node.comparators)]
        ops = [_COMPARE[type(o)] for o in node.ops if type(o) in _COMPARE]
        if len(ops) != len(node.ops):
            raise ExpressionError(f"unsupported comparison in {source!r}")

        def compare(values: Mapping[str, Value]) -> Value:
            evaluated = [p(values) for p in parts]
            if any(v is None for v in evaluated):
                return None
            return all(op(evaluated[i], evaluated[i + 1]) for i, op in enumerate(ops))

        return compare
    if isinstance(node, ast.BoolOp):
        parts = [_build(v, source) for v in node.values]
        is_and = isinstance(node.op, ast.And)

        def boolean(values: Mapping[str, Value]) -> Value:
            evaluated = [p(values) for p in parts]
            # Three-valued logic: a known False decides an `and`, a known True an `or`.
            if is_and:
                return False if any(v is False for v in evaluated) else (None if None in evaluated else True)
            return True if any(v is True for v in evaluated) else (None if None in evaluated else False)

        return boolean
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        function = _FUNCTIONS[node.func.id]
        args = [_build(a, source) for a in node.args]

        def call(values: Mapping[str, Value]) -> Value:
            evaluated = [a(values) for a in args]
            return None if any(v is None for v in evaluated) else function(*evaluated)

        return call
    raise ExpressionError(f"unsupported syntax {ast.dump(node)[:60]} in {source!r}")
