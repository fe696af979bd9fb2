"""What every input kind provides: one module per kind, registered in profsvc.kinds.

A kind says which files it claims, what each verb needs of them (checked
before any job starts, from the source text alone), how it builds, and what
runs under ncu for a Profile (its command line in a cell, the files the cell
gets, the folders it reads, how kernels are selected when the request says
nothing). The scheduler runs all of it: a kind holds no queue, lane or process
of its own.
"""

from __future__ import annotations

import ast
import asyncio
import enum
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from profsvc.build.python_problem import HarnessStatus
from profsvc.build.service import BuildCacheIndex
from profsvc.config import ServerConfig
from profsvc.host import HostInfo
from profsvc.scheduler.cells import Cells
from profsvc.scheduler.compiled import CompiledSources
from profsvc.scheduler.jobs import SourceSpec
from profsvc.telemetry import Telemetry
from profsvc_contract.errors import InvalidRequest, Reason
from profsvc_contract.models import CompileResult, SourceKind


class Verb(enum.StrEnum):
    """What a request asks of a source."""

    COMPILE = "compile"
    PROFILE = "profile"
    LINT = "lint"
    CHECK = "check"
    TIME = "time"
    EVALUATE = "evaluate"


@dataclass(frozen=True)
class KindContext:
    """What a kind's build may use of the server: its configuration and host, cells, the cache and its index."""

    config: ServerConfig
    host: HostInfo
    cells: Cells
    cache_root: Path
    index: BuildCacheIndex
    compile_slots: asyncio.Semaphore
    telemetry: Telemetry
    compiled: CompiledSources

    @property
    def arch(self) -> str:
        """nvcc's target architecture."""
        return self.config.cuda_arch or self.host.default_arch


@dataclass(frozen=True)
class Built:
    """What a build gave: its result, and what the run needs of it."""

    compile: CompileResult
    # A built program (CUDA program), and the folder nvcc compiled it in (its debug information names it).
    program: Path | None = None
    compiled_in: str = ""
    # The compile step's harness status (Python problem): its load_inline builds.
    status: HarnessStatus | None = None

    @property
    def ok(self) -> bool:
        """True when there is something to run."""
        return self.compile.ok


# What a result says ran when the input is a program (its failures are told in the program's terms).
PROGRAM_TARGET = "program"


@dataclass(frozen=True)
class RunTarget:
    """What runs under ncu for a Profile."""

    argv: Callable[[Path], list[str]]
    files: Mapping[str, str | bytes | Path]
    readonly: list[Path]
    # NVTX ranges profiled when the request names no filter (ncu --nvtx-include syntax; empty: every launch).
    default_nvtx: list[str] = field(default_factory=list)
    # The harness's status file in the cell ("" where nothing writes one).
    status_name: str = ""
    # What the result says ran: "candidate", "reference", "program".
    target: str = ""
    # Whether the GPU's warm ncu worker (the harness, started under ncu with the default options) may run it.
    warm: bool = False
    # Generated source file -> (the user's file, line offset), for hotspot lines.
    locations: dict[str, tuple[str, int]] = field(default_factory=dict)


class InputKind(Protocol):
    """One kind of input (see the module's text)."""

    kind: SourceKind
    verbs: frozenset[Verb]

    def claims(self, file_name: str, text: str) -> bool:
        """Whether a file of unspecified kind is this kind's."""
        ...

    def validate(self, source: SourceSpec, verb: Verb) -> SourceSpec:
        """The source as this verb takes it (its target resolved); InvalidRequest with one line otherwise."""
        ...

    async def build(self, context: KindContext, source: SourceSpec) -> Built:
        """Build the source (a compile error is a result)."""
        ...

    def run_target(self, context: KindContext, source: SourceSpec, built: Built) -> RunTarget:
        """What runs under ncu."""
        ...


def parse_python(text: str, name: str) -> ast.Module:
    """A Python file's syntax tree; InvalidRequest naming the line of a syntax error."""
    try:
        return ast.parse(text, filename=name)
    except SyntaxError as error:
        where = f"{name}:{error.lineno}:{error.offset}" if error.lineno else name
        raise InvalidRequest(f"{where}: syntax error: {error.msg}", Reason.SYNTAX_ERROR) from None
    except (MemoryError, RecursionError):
        # The parser's own limit, reached by deeply nested expressions.
        raise InvalidRequest(f"{name}: nested too deeply for Python's parser", Reason.SYNTAX_ERROR) from None
    except ValueError as error:
        # A NUL byte: no module Python would run.
        raise InvalidRequest(f"{name}: {error}", Reason.SYNTAX_ERROR) from None


def _module_level(statements: list[ast.stmt]) -> list[ast.stmt]:
    """Statements that run at module level, inside if/try/with blocks too (a name defined under `try:` counts)."""
    found: list[ast.stmt] = []
    for node in statements:
        found.append(node)
        if isinstance(node, ast.If | ast.With | ast.Try | ast.TryStar):
            for block in ("body", "orelse", "finalbody"):
                found += _module_level(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                found += _module_level(handler.body)
    return found


@functools.lru_cache(maxsize=8)
def defined_names(text: str, name: str) -> frozenset[str]:
    """The names a Python file defines at top level, parsed once however many questions a request's validation
    asks of it (which kind it is, what its verb needs): parsing a MiB takes seconds."""
    return frozenset(top_level_names(parse_python(text, name)))


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


def refuse_verb(kind: str, verb: Verb, name: str, instead: str) -> InvalidRequest:
    """The one-line refusal of a verb a kind does not take."""
    return InvalidRequest(f"{name} is a {kind}: {verb.value} does not take one; {instead}", Reason.BAD_SOURCE_KIND)
