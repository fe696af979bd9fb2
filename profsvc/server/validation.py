"""Check a request's input before any job starts: one clear error per problem.

Nothing here runs user code: sources are only decoded and handed to their
kind's checks (profsvc.kinds), which parse Python and search CUDA for main().
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from profsvc.config import Limits
from profsvc.kinds import Verb, kind_of
from profsvc.metrics.catalog import load_catalog
from profsvc.metrics.derived import METRIC_NAME, parse_derived
from profsvc.metrics.name_filter import NamePatternError, name_pattern
from profsvc.ncu.metric_sets import MetricSetSpec, metric_sets, resolve
from profsvc.scheduler.jobs import SourceSpec
from profsvc.staticcheck import Policy, PolicyError, make_policy
from profsvc_contract.errors import InvalidRequest, Reason
from profsvc_contract.models import (
    DEFAULT_CLOCK_CONTROL,
    DEFAULT_PRECISION,
    ClockControl,
    KernelFilter,
    KernelSource,
    Precision,
    SourceFile,
    StaticPolicy,
)

_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
# nvcc flags a request may pass: defines, optimisation, language level, register cap, fast math.
_NVCC_FLAG = re.compile(
    r"^(-D[A-Za-z_]\w*(=[\w.+\-]*)?|-O[0-3]|-std=c\+\+(14|17|20)|-maxrregcount=\d{1,3}|--use_fast_math|-use_fast_math"
    r"|-Xptxas=-v|--extended-lambda|--expt-relaxed-constexpr)$"
)
# Lengths of strings no other rule bounds: they reach the worker's command line, one-line errors and logs.
MAX_PATTERN_CHARS = 1024  # a kernel name regex, an NVTX include
MAX_NAME_CHARS = 256  # an nvcc flag, a metric set's name
MAX_PATH_CHARS = 4096  # an uploaded report's file name, as the client's system wrote it


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


def validate_source(source: KernelSource, limits: Limits, verb: Verb) -> SourceSpec:
    """Decode and check a KernelSource for a verb; raise InvalidRequest with one clear line.

    What the source must hold is its kind's to say (profsvc.kinds): a problem's names, a program's main().
    """
    _check_name(source.main, "main")
    main_text = _decode(source.main, "main", limits)
    reference_text = ""
    if source.reference.name or source.reference.content:
        _check_name(source.reference, "reference")
        reference_text = _decode(source.reference, "reference", limits)
        if source.reference.name == source.main.name:
            raise InvalidRequest("the reference and main files have the same name", Reason.BAD_ARGUMENT)
    kind = kind_of(source.kind, source.main.name, main_text)
    if len(source.nvcc_flags) > limits.max_nvcc_flags:
        raise InvalidRequest(f"too many nvcc flags (limit {limits.max_nvcc_flags})", Reason.BAD_ARGUMENT)
    for flag in source.nvcc_flags:
        _check_length(flag, "an nvcc flag", MAX_NAME_CHARS, Reason.BAD_ARGUMENT)
        if not _NVCC_FLAG.match(flag):
            raise InvalidRequest(f"nvcc flag {flag!r} is not allowed", Reason.BAD_ARGUMENT)
    if len(source.args) > limits.max_program_args:
        raise InvalidRequest(f"too many program arguments (limit {limits.max_program_args})", Reason.BAD_ARGUMENT)
    for arg in source.args:
        _check_length(arg, "a program argument", MAX_PATTERN_CHARS, Reason.BAD_ARGUMENT)
        if "\0" in arg:
            raise InvalidRequest("a program argument holds a NUL character", Reason.BAD_ARGUMENT)
    spec = SourceSpec(
        kind=kind.kind,
        main_name=source.main.name,
        main_text=main_text,
        reference_name=source.reference.name if reference_text else "",
        reference_text=reference_text,
        nvcc_flags=tuple(source.nvcc_flags),
        target=source.target,
        args=tuple(source.args),
    )
    return kind.validate(spec, verb)


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
            name_pattern(kernel_filter.name_regex)
        except NamePatternError as error:
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


def validate_precision(value: str) -> Precision:
    """A request's precision mode, as the models spell it (`unspecified`: fp32); InvalidRequest listing the modes
    for anything else (a number a newer client sends)."""
    named = Precision.named(value, "precision")
    return DEFAULT_PRECISION if named is Precision.UNSPECIFIED else named


def validate_clock_control(value: str) -> ClockControl:
    """A request's clock control for ncu (`unspecified`: none); InvalidRequest listing the choices otherwise."""
    named = ClockControl.named(value, "clock control")
    return DEFAULT_CLOCK_CONTROL if named is ClockControl.UNSPECIFIED else named


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


# Most metrics one request may name (ncu collects each; a full set holds about 2,200), and derived ones.
MAX_METRICS = 256
MAX_DERIVED = 64
MAX_FORMULA_CHARS = 1000


def validate_metrics(names: Sequence[str]) -> tuple[str, ...]:
    """The ncu metrics a request names, in ncu's own name syntax, once each."""
    if len(names) > MAX_METRICS:
        raise InvalidRequest(f"{len(names)} metrics named: at most {MAX_METRICS} per request", Reason.BAD_ARGUMENT)
    for name in names:
        _check_length(name, "a metric's name", MAX_NAME_CHARS, Reason.BAD_ARGUMENT)
        if not METRIC_NAME.fullmatch(name):
            raise InvalidRequest(
                f"{name!r} is not an ncu metric name (like dram__bytes_read.sum; `ncu --query-metrics` lists them)",
                Reason.BAD_ARGUMENT,
            )
    return tuple(dict.fromkeys(names))


def validate_derived(texts: Sequence[str], metrics: Sequence[str]) -> tuple[str, ...]:
    """The derived metrics a request defines (NAME=FORMULA), each parsed, names distinct from each other, from
    the metrics it names and from the catalog's figures (a batch's columns hold all three)."""
    if len(texts) > MAX_DERIVED:
        raise InvalidRequest(f"{len(texts)} derived metrics: at most {MAX_DERIVED} per request", Reason.BAD_ARGUMENT)
    names: set[str] = set(metrics)
    for text in texts:
        _check_length(text, "a derived metric", MAX_FORMULA_CHARS, Reason.BAD_ARGUMENT)
        try:
            derived = parse_derived(text)
        except ValueError as error:
            raise InvalidRequest(str(error), Reason.BAD_ARGUMENT) from None
        if derived.name in names:
            raise InvalidRequest(f"{derived.name!r} is named twice", Reason.BAD_ARGUMENT)
        if derived.name in load_catalog().entries:
            raise InvalidRequest(f"{derived.name!r} is a catalog figure's name: choose another", Reason.BAD_ARGUMENT)
        names.add(derived.name)
    return tuple(texts)


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
