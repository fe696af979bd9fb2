"""Parameter sweeps: a Python problem's module constants set to each point of a grid (pure).

KernelBench-style problems size their inputs with module-level constants (`batch_size = 16`, `dim = 16384`) that
`get_inputs` and `get_init_inputs` read. A sweep names such constants and their values; each point of the grid
(every combination of one value per name) is the problem with those assignments rewritten. Only a constant the
module binds once, at its top level, by `NAME = LITERAL` is swept: anything else would leave the run reading
another value than the one the results table names, so it is refused with a line naming it.
"""

from __future__ import annotations

import ast
import itertools
import keyword
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from profsvc_contract import errors

Sweep = Mapping[str, Sequence[Any]]
Point = Mapping[str, Any]


def _literal(value: Any, what: str) -> Any:
    """`value` when Python source can spell it (its repr reads back as the same literal), else an error."""
    try:
        if ast.literal_eval(repr(value)) == value:
            return value
    except (ValueError, SyntaxError, RecursionError):
        pass
    raise errors.InvalidRequest(f"{what}: {value!r} is not a Python literal a problem can be given")


def _check_name(name: str, what: str) -> None:
    if not name.isidentifier() or keyword.iskeyword(name):
        raise errors.InvalidRequest(f"{what}: {name!r} is not a Python name")


def parse_sweeps(specs: Sequence[str]) -> dict[str, list[Any]]:
    """`--sweep NAME=V1,V2 ...` as {name: values}; the values are Python literals (quote strings)."""
    sweep: dict[str, list[Any]] = {}
    for spec in specs:
        name, sep, values = spec.partition("=")
        name = name.strip()
        what = f"--sweep {spec}"
        if not sep or not values.strip():
            raise errors.InvalidRequest(f"{what}: give NAME=VALUE,VALUE... (for example dim=1024,4096)")
        _check_name(name, what)
        if name in sweep:
            raise errors.InvalidRequest(f"{what}: {name} is swept twice; give its values in one --sweep")
        try:
            parsed = ast.literal_eval(f"({values},)")
        except (ValueError, SyntaxError):
            raise errors.InvalidRequest(
                f"{what}: the values are Python literals separated by commas (quote strings: mode='a','b')"
            ) from None
        sweep[name] = [_literal(value, what) for value in parsed]
    return sweep


def manifest_sweep(value: object, where: str) -> dict[str, list[Any]]:
    """A manifest entry's `"sweep": {"NAME": [values]}`, checked."""
    if not isinstance(value, dict) or not value:
        raise errors.InvalidRequest(f'{where}: "sweep" maps constant names to lists of values')
    sweep: dict[str, list[Any]] = {}
    for name, values in value.items():
        what = f'{where}: "sweep" {name}'
        _check_name(name, what)
        if not isinstance(values, list) or not values:
            raise errors.InvalidRequest(f"{what}: give a non-empty list of values")
        sweep[name] = [_literal(item, what) for item in values]
    return sweep


def grid(sweep: Sweep) -> list[dict[str, Any]]:
    """Every point of the grid, the first name's values varying slowest ([{}] for no sweep)."""
    names = list(sweep)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*(sweep[n] for n in names))]


def _bound_names(node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """The module-level names `node` binds, and where: not inside functions, classes or comprehensions."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        yield node.name, node
        return
    if isinstance(node, ast.Import | ast.ImportFrom):
        for alias in node.names:
            yield (alias.asname or alias.name.partition(".")[0]), node
        return
    if isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        return
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
        yield node.id, node
    if isinstance(node, ast.ExceptHandler) and node.name:
        yield node.name, node
    for child in ast.iter_child_nodes(node):
        yield from _bound_names(child)


def _globals_declared(tree: ast.Module) -> set[str]:
    """Names some function or class rebinds through `global`."""
    return {name for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names}


def _assignment(tree: ast.Module, name: str, where: str) -> ast.expr:
    """The literal `name` is set to by the module's one `name = LITERAL`, else the error saying why not."""
    bindings = [node for statement in tree.body for bound, node in _bound_names(statement) if bound == name]
    cannot = f"{where}: cannot sweep {name}:"
    if not bindings:
        raise errors.InvalidRequest(f"{cannot} the module has no top-level assignment `{name} = ...`")
    lines = ", ".join(str(getattr(node, "lineno", "?")) for node in bindings)
    if len(bindings) > 1:
        raise errors.InvalidRequest(f"{cannot} it is bound {len(bindings)} times at module level (lines {lines})")
    if name in _globals_declared(tree):
        raise errors.InvalidRequest(f"{cannot} a function rebinds it (`global {name}`)")
    statement = next(top for top in tree.body if any(bound == name for bound, _ in _bound_names(top)))
    value: ast.expr | None = None
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        value = statement.value
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        value = statement.value
    target = statement.targets[0] if isinstance(statement, ast.Assign) else getattr(statement, "target", None)
    if value is None or not (isinstance(target, ast.Name) and target.id == name):
        raise errors.InvalidRequest(f"{cannot} line {statement.lineno} is not a simple `{name} = LITERAL`")
    try:
        ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError):
        raise errors.InvalidRequest(
            f"{cannot} line {statement.lineno} sets it to an expression, not a literal (a number, a string, a tuple)"
        ) from None
    return value


def _parse(source: bytes, where: str) -> ast.Module:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError) as error:
        line = f" (line {error.lineno})" if isinstance(error, SyntaxError) and error.lineno else ""
        raise errors.InvalidRequest(f"{where}: cannot sweep a file that does not parse{line}") from None


def check_constants(source: bytes, names: Sequence[str], where: str) -> None:
    """Refuse, naming it, a swept name the module does not set once by `NAME = LITERAL` at its top level."""
    tree = _parse(source, where)
    for name in names:
        _assignment(tree, name, where)


def override_constants(source: bytes, point: Point, where: str) -> bytes:
    """`source` with each named constant's literal replaced by the point's value (the rest byte for byte)."""
    tree = _parse(source, where)
    lines = source.splitlines(keepends=True)
    starts = list(itertools.accumulate((len(line) for line in lines), initial=0))
    # ast's columns are UTF-8 byte offsets within a line; replaced from the end, earlier offsets stay true.
    spans = []
    for name, value in point.items():
        node = _assignment(tree, name, where)
        assert node.end_lineno is not None and node.end_col_offset is not None
        start = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset
        spans.append((start, end, repr(value).encode()))
    for start, end, text in sorted(spans, reverse=True):
        source = source[:start] + text + source[end:]
    return source


__all__ = ["check_constants", "grid", "manifest_sweep", "override_constants", "parse_sweeps"]
