"""Check a request's input before any job starts: one clear error per problem.

Nothing here runs user code: Python sources are only parsed (ast), CUDA
sources only searched for main().
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from profsvc.config import Limits
from profsvc.ncu.metric_sets import MetricSetSpec, metric_sets, resolve
from profsvc.scheduler.jobs import SourceSpec
from profsvc.staticcheck import Policy, PolicyError, make_policy
from profsvc_client.errors import InvalidRequest, Reason
from profsvc_client.models import KernelFilter, KernelSource, SourceFile, SourceKind, StaticPolicy

_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
_CUDA_MAIN = re.compile(r"\bint\s+main\s*\(")
# nvcc flags a request may pass: defines, optimisation, language level, register cap, fast math.
_NVCC_FLAG = re.compile(
    r"^(-D[A-Za-z_]\w*(=[\w.+\-]*)?|-O[0-3]|-std=c\+\+(14|17|20)|-maxrregcount=\d{1,3}|--use_fast_math|-use_fast_math"
    r"|-Xptxas=-v|--extended-lambda|--expt-relaxed-constexpr)$"
)
# Lengths of strings no other rule bounds: they reach the worker's command line, one-line errors and logs.
MAX_PATTERN_CHARS = 1024  # a kernel name regex, an NVTX include
MAX_NAME_CHARS = 256  # an nvcc flag, a metric set's name
MAX_PATH_CHARS = 4096  # an uploaded report's file name, as the client's system wrote it
PYTHON_SUFFIXES = (".py",)
CUDA_SUFFIXES = (".cu",)
REFERENCE_NAMES = ("Model", "get_inputs", "get_init_inputs")
CANDIDATE_NAMES = ("ModelNew",)


def _decode(file: SourceFile, role: str, limits: Limits) -> str:
    if not file.content:
        raise InvalidRequest(f"the {role} file {file.name or '(unnamed)'} is empty", Reason.EMPTY_SOURCE)
    if len(file.content) > limits.max_source_bytes:
        raise InvalidRequest(
            f"the {role} file {file.name} is {len(file.content):,} bytes; the limit is {limits.max_source_bytes:,}",
            Reason.SOURCE_TOO_LARGE,
        )
    try:
        text = file.content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidRequest(
            f"the {role} file {file.name} is not UTF-8 (invalid byte at offset {error.start})",
            Reason.SOURCE_NOT_UTF8,
        ) from None
    if not text.strip():
        raise InvalidRequest(f"the {role} file {file.name} holds only whitespace", Reason.EMPTY_SOURCE)
    return text


def _check_name(file: SourceFile, role: str) -> None:
    if not _FILE_NAME.match(file.name):
        raise InvalidRequest(
            f"the {role} file name {file.name!r} is not allowed"
            " (letters, digits, _ . - only, not starting with . or -, no folders)",
            Reason.BAD_ARGUMENT,
        )


def _kind(source: KernelSource) -> SourceKind:
    if source.kind != SourceKind.UNSPECIFIED:
        return source.kind
    if source.main.name.endswith(PYTHON_SUFFIXES):
        return SourceKind.PYTHON_PROBLEM
    if source.main.name.endswith(CUDA_SUFFIXES):
        return SourceKind.CUDA_PROGRAM
    raise InvalidRequest(
        f"cannot tell what {source.main.name!r} is: name it .py (a Python problem) or .cu (a CUDA program)",
        Reason.BAD_SOURCE_KIND,
    )


def _module_level(statements: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run at module level, inside if/try/with blocks too (a name defined under `try:` counts)."""
    for node in statements:
        yield node
        if isinstance(node, ast.If | ast.With | ast.Try | ast.TryStar):
            for block in ("body", "orelse", "finalbody"):
                yield from _module_level(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from _module_level(handler.body)


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module defines at top level (classes, functions, assignments, imports)."""
    names: set[str] = set()
    for node in _module_level(tree.body):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _parse_python(text: str, name: str) -> set[str]:
    try:
        tree = ast.parse(text, filename=name)
    except SyntaxError as error:
        where = f"{name}:{error.lineno}:{error.offset}" if error.lineno else name
        raise InvalidRequest(f"{where}: syntax error: {error.msg}", Reason.SYNTAX_ERROR) from None
    except (MemoryError, RecursionError):
        # The parser's own limit, reached by deeply nested expressions.
        raise InvalidRequest(f"{name}: nested too deeply for Python's parser", Reason.SYNTAX_ERROR) from None
    return top_level_names(tree)


def _require(defined: set[str], needed: tuple[str, ...], name: str) -> None:
    missing = [n for n in needed if n not in defined]
    if missing:
        raise InvalidRequest(f"{name} defines no {', '.join(missing)}", Reason.MISSING_SYMBOL)


def validate_source(source: KernelSource, limits: Limits, *, check_symbols: bool = True) -> SourceSpec:
    """Decode and check a KernelSource; raise InvalidRequest with one clear line.

    `check_symbols=False` (static check) accepts a candidate without the reference's names.
    """
    _check_name(source.main, "main")
    kind = _kind(source)
    main_text = _decode(source.main, "main", limits)
    reference_text = ""
    if source.reference.name or source.reference.content:
        _check_name(source.reference, "reference")
        reference_text = _decode(source.reference, "reference", limits)
        if source.reference.name == source.main.name:
            raise InvalidRequest("the reference and main files have the same name", Reason.BAD_ARGUMENT)
    if kind == SourceKind.PYTHON_PROBLEM:
        defined = _parse_python(main_text, source.main.name)
        reference_defined = _parse_python(reference_text, source.reference.name) if reference_text else set()
        if check_symbols and reference_text:
            _require(reference_defined, REFERENCE_NAMES, source.reference.name)
            _require(defined, CANDIDATE_NAMES, source.main.name)
        elif check_symbols:
            _require(defined, REFERENCE_NAMES + CANDIDATE_NAMES, source.main.name)
    elif not _CUDA_MAIN.search(main_text):
        raise InvalidRequest(f"{source.main.name} has no `int main(`: a .cu program needs one", Reason.MISSING_SYMBOL)
    if len(source.nvcc_flags) > limits.max_nvcc_flags:
        raise InvalidRequest(f"too many nvcc flags (limit {limits.max_nvcc_flags})", Reason.BAD_ARGUMENT)
    for flag in source.nvcc_flags:
        _check_length(flag, "an nvcc flag", MAX_NAME_CHARS, Reason.BAD_ARGUMENT)
        if not _NVCC_FLAG.match(flag):
            raise InvalidRequest(f"nvcc flag {flag!r} is not allowed", Reason.BAD_ARGUMENT)
    return SourceSpec(
        kind=kind,
        main_name=source.main.name,
        main_text=main_text,
        reference_name=source.reference.name if reference_text else "",
        reference_text=reference_text,
        nvcc_flags=tuple(source.nvcc_flags),
    )


def _check_length(text: str, what: str, limit: int, reason: Reason) -> None:
    if len(text) > limit:
        raise InvalidRequest(f"{what} is {len(text):,} characters long; the limit is {limit:,}", reason)


def validate_filter(kernel_filter: KernelFilter, limits: Limits) -> KernelFilter:
    """Check the kernel filter's regex, NVTX expressions and counts."""
    _check_length(kernel_filter.name_regex, "the kernel name regex", MAX_PATTERN_CHARS, Reason.BAD_FILTER)
    if len(kernel_filter.nvtx_include) > limits.max_nvtx_includes:
        raise InvalidRequest(
            f"the filter names {len(kernel_filter.nvtx_include):,} NVTX ranges;"
            f" the limit is {limits.max_nvtx_includes}",
            Reason.BAD_FILTER,
        )
    if kernel_filter.name_regex:
        try:
            re.compile(kernel_filter.name_regex)
        except re.error as error:
            raise InvalidRequest(
                f"kernel name regex {kernel_filter.name_regex!r}: {error}", Reason.BAD_FILTER
            ) from None
    for include in kernel_filter.nvtx_include:
        _check_length(include, "an NVTX include", MAX_PATTERN_CHARS, Reason.BAD_FILTER)
        if not include.strip() or any(c in include for c in "\n\r\0"):
            raise InvalidRequest(f"NVTX include {include!r} is empty or holds control characters", Reason.BAD_FILTER)
        # "/" alone (no range name) makes ncu_report abort the process that reads the report.
        if not include.removeprefix("regex:").rsplit("@", 1)[-1].strip("/ "):
            raise InvalidRequest(f"NVTX include {include!r} names no range (e.g. 'profsvc/')", Reason.BAD_FILTER)
    if kernel_filter.launch_count > limits.max_launches:
        raise InvalidRequest(
            f"launch_count {kernel_filter.launch_count} is over the server's limit of {limits.max_launches}",
            Reason.BAD_FILTER,
        )
    return kernel_filter


def validate_count(value: int, name: str, limit: int) -> int:
    """A requested count (0 means the default) within the server's limit."""
    if value > limit:
        raise InvalidRequest(f"{name} {value} is over the server's limit of {limit}", Reason.BAD_ARGUMENT)
    return value


def validate_session_id(session_id: str) -> str:
    """A session id: up to 128 printable characters without spaces ('' for none)."""
    if len(session_id) > 128 or not all(c.isprintable() and not c.isspace() for c in session_id):
        raise InvalidRequest("a session id is at most 128 printable characters without spaces", Reason.BAD_ARGUMENT)
    return session_id


def validate_metric_set(name: str) -> MetricSetSpec:
    """The metric set a request names; raise InvalidRequest listing the known ones."""
    _check_length(name, "the metric set's name", MAX_NAME_CHARS, Reason.UNKNOWN_METRIC_SET)
    spec = resolve(name)
    if spec is None:
        known = ", ".join(metric_sets())
        raise InvalidRequest(f"unknown metric set {name!r}; this server offers: {known}", Reason.UNKNOWN_METRIC_SET)
    return spec


def validate_policy(policy: StaticPolicy) -> Policy:
    """A request's static-check policy against the rule table (unset: the default policy)."""
    try:
        return make_policy(policy.name, {o.rule_id: o.severity for o in policy.overrides})
    except PolicyError as error:
        raise InvalidRequest(str(error), Reason.BAD_POLICY) from None


def validate_upload_name(filename: str) -> str:
    """An uploaded report's file name, as the client sent it (the server keeps only its last part)."""
    _check_length(filename, "the report's file name", MAX_PATH_CHARS, Reason.BAD_ARGUMENT)
    return filename
