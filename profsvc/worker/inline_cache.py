"""Route every `torch.utils.cpp_extension.load_inline` and `load` call to the server's trusted builder.

Installed in the worker before the user's module is imported, so the module's
own `from torch.utils.cpp_extension import load_inline` picks up the wrapper.
The wrapper does only what needs the job's view: it normalizes the call's
flags (profsvc.build.routes: flags that mean nothing removed, `-lineinfo` added
for profiling so ncu can map samples to CUDA source lines), reads what the
build needs from the job's own folders (the headers of extra_include_paths
folders in the job's cell or temporary folders, the sources of a load() and
their neighbours) and sends it all by value over the worker's control channel
(profsvc.build.request). The server keys the build, answers from its verified
cache or has its builder build it (profsvc.build.inline_builder: the route, and
why a faster one was declined), and the wrapper imports the library from the
shared cache, which this jail sees read-only. Without a channel (the harness
run by hand, a benchmark) the same builder runs in this process, into
`cache_root`, making the glue headers there as it needs them.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from profsvc.build import request as wire
from profsvc.build import routes
from profsvc.build.inline_builder import ROUTES, build_call, made_binding, recorded_route, route_folder, torch_builders
from profsvc.build.request import BuildRequest, SentFolder
from profsvc.worker.control import ControlChannel


@dataclass
class InlineBuild:
    """One load_inline (or load) call as the worker saw it."""

    name: str
    cache_key: str = ""
    cached: bool = False
    seconds: float = 0.0
    # Where each generated file's line 1 sits in the user's source (for diagnostics).
    cuda_first_line: int = 0
    cpp_first_line: int = 0
    # Where the library lives, and where it was compiled (the folder its debug information names).
    build_directory: str = ""
    compiled_in: str = ""
    # "split-bind", "split-light" and "split": torch headers kept out of nvcc's unit, the functions bound by a
    # shared binding or the glue unit against the light or the full torch header; "torch": built as written.
    route: str = routes.ROUTE_TORCH
    # Where a faster route was declined or failed: a reason code (routes.SPLIT_DECLINED, ...) and its text.
    route_reason: str = ""
    route_detail: str = ""
    # Seconds spent on a fast route that failed before the build as written.
    fallback_seconds: float = 0.0


@dataclass
class InlineRecorder:
    """Collects the builds of one worker run."""

    builds: list[InlineBuild] = field(default_factory=list)

    def as_dicts(self) -> list[dict[str, Any]]:
        """The builds as JSON-ready dicts."""
        return [asdict(b) for b in self.builds]


def _first_line(user_text: str, generated: str | list[str] | None) -> int:
    """1-based line of the user's file where a source string starts, 0 when not found verbatim."""
    if not isinstance(generated, str) or not generated.strip():
        return 0
    index = user_text.find(generated)
    return user_text.count("\n", 0, index) + 1 if index >= 0 else 0


class BuildError(RuntimeError):
    """A failed build, worded as torch words its own (the harness tells build errors apart by that prefix)."""


def _own_roots() -> list[Path]:
    """The folders that are the job's own (its cell, its temporary folders): the builder sees none of them."""
    roots = [Path.cwd(), Path(tempfile.gettempdir()), Path("/tmp"), Path("/dev/shm"), Path("/var/tmp")]
    with contextlib.suppress(KeyError):
        roots.append(Path(os.environ["TMPDIR"]))
    return [root.resolve() for root in roots]


def _system_roots() -> list[Path]:
    """The interpreter's trees (torch's headers among them): system folders even where they sit under /tmp."""
    return [Path(p).resolve() for p in dict.fromkeys([sys.prefix, sys.base_prefix, sys.exec_prefix])]


def _is_own(path: str) -> bool:
    resolved = Path(path).resolve()

    def under(roots: list[Path]) -> bool:
        return any(resolved == root or root in resolved.parents for root in roots)

    return under(_own_roots()) and not under(_system_roots())


def read_folder(path: str, name: str, also: frozenset[str] = frozenset()) -> SentFolder:
    """A folder's files a build may read (request.SENT_SUFFIXES, its subfolders too, and the files `also` names),
    within the request's bounds.

    `name`: the extension's, for the error where the folder holds more than a request may send.
    """
    files: dict[str, str] = {}
    total = 0
    for folder, subfolders, names in os.walk(path):
        depth = len(Path(folder).relative_to(path).parts)
        subfolders[:] = sorted(subfolders) if depth + 1 < wire.MAX_DEPTH else []
        for file_name in sorted(names):
            file = Path(folder) / file_name
            wanted = file_name.endswith(wire.SENT_SUFFIXES) or str(file) in also
            if not wanted or not file.is_file():
                continue
            size = file.stat().st_size
            total += size
            if size > wire.MAX_FILE_BYTES or len(files) >= wire.MAX_FILES or total > wire.MAX_TOTAL_BYTES:
                raise BuildError(
                    f"Error building extension '{name}': {path} holds more than a build may send to the server"
                    f" ({wire.MAX_FILES} files, {wire.MAX_FILE_BYTES >> 20} MiB each, {wire.MAX_TOTAL_BYTES >> 20}"
                    " MiB in all, of the kinds a build reads)"
                )
            files[str(file.relative_to(path))] = file.read_bytes().decode(**wire.ENCODING)
    return SentFolder(path, files)


def _import(name: str, directory: str, arguments: dict[str, Any]) -> Any:
    from torch.utils import cpp_extension

    if arguments.get("is_standalone"):
        return cpp_extension._get_exec_path(name, directory)
    return cpp_extension._import_module_from_library(name, directory, bool(arguments.get("is_python_module", True)))


def build_here(request: BuildRequest, key: str, cache_root: Path) -> dict[str, Any]:
    """The server's and its builder's work done in this process (no server): into the cache folder itself.

    Precompiled glue headers are made in the cache where it lacks them (inline_builder.prepare_pch).
    """
    for route in ROUTES:
        folder = cache_root / route_folder(key, route)
        if (folder / request.artifact).is_file():
            record = {**recorded_route(folder), "route": route}
            return {**record, "ok": True, "cached": True, "directory": str(folder), "built_in": str(folder)}

    def glue(header: str) -> list[str]:
        from profsvc.build import inline_builder  # looked up at each call: a benchmark replaces prepare_pch

        return inline_builder.prepare_pch(cache_root, cache_root, header=header)

    # A shared binding is used where a server made one in this cache; none is made here.
    outcome = build_call(request, key, cache_root, torch_builders(), glue, partial(made_binding, cache_root))
    return {**outcome.as_dict(), "cached": False, "directory": outcome.built_in}


def _local_environment() -> dict[str, str]:
    import torch

    return {
        "torch": str(torch.__version__),
        "cuda": torch.version.cuda or "",
        "arch": os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
    }


def install(
    cache_root: Path,
    *,
    lineinfo: bool,
    user_text: str,
    recorder: InlineRecorder,
    channel: ControlChannel | None = None,
) -> None:
    """Replace torch's load_inline and load with the wrappers (see the module's text)."""
    from torch.utils import cpp_extension

    original_inline, original_load = cpp_extension.load_inline, cpp_extension.load
    inline_signature, load_signature = inspect.signature(original_inline), inspect.signature(original_load)
    server_arch = os.environ.get("TORCH_CUDA_ARCH_LIST", "")

    def build(request: BuildRequest, record: InlineBuild) -> Any:
        recorder.builds.append(record)
        start = time.monotonic()
        try:
            if channel is None:
                key = request.key(_local_environment())
                reply = {**build_here(request, key, cache_root), "key": key}
            else:
                reply = channel.request("build", **request.as_message())
            record.cache_key = str(reply.get("key", ""))
            record.route = str(reply.get("route", ""))
            record.route_reason, record.route_detail = str(reply.get("reason", "")), str(reply.get("detail", ""))
            record.fallback_seconds = float(reply.get("fallback_seconds") or 0.0)
            if not reply.get("ok"):
                why = reply.get("log") or reply.get("error")
                raise BuildError(f"Error building extension '{request.name}': {why}")
            record.cached = bool(reply.get("cached"))
            record.build_directory = str(reply["directory"])
            record.compiled_in = str(reply.get("built_in") or reply["directory"])
            return _import(request.name, record.build_directory, request.arguments)
        finally:
            record.seconds = time.monotonic() - start

    def folders(arguments: dict[str, Any], sources: list[str]) -> tuple[SentFolder, ...]:
        """The include folders that are the job's own (the others, system trees, go by path) and the sources'
        folders, whoever's they are (the builder reads the sources from there), by value."""
        own = [p for p in arguments["extra_include_paths"] if _is_own(p) and Path(p).is_dir()]
        chosen = dict.fromkeys([*own, *(os.path.dirname(s) for s in sources)])
        return tuple(read_folder(p, arguments["name"], frozenset(sources)) for p in chosen)

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        bound = inline_signature.bind(*args, **kwargs)
        bound.apply_defaults()
        given = {k: v for k, v in bound.arguments.items() if k not in ("build_directory", "verbose")}
        arguments = routes.normalize_arguments(given, server_arch=server_arch, lineinfo=lineinfo)
        arguments["extra_include_paths"] = [os.path.abspath(p) for p in arguments["extra_include_paths"]]
        cuda_first_line = _first_line(user_text, bound.arguments.get("cuda_sources"))
        request = BuildRequest(wire.LOAD_INLINE, arguments, folders(arguments, []), cuda_first_line)
        record = InlineBuild(
            name=arguments["name"],
            cuda_first_line=cuda_first_line,
            cpp_first_line=_first_line(user_text, bound.arguments.get("cpp_sources")),
        )
        return build(request, record)

    def load(*args: Any, **kwargs: Any) -> Any:
        bound = load_signature.bind(*args, **kwargs)
        bound.apply_defaults()
        given = {k: v for k, v in bound.arguments.items() if k not in ("build_directory", "verbose")}
        given["sources"] = [os.path.abspath(s) for s in routes.source_paths(given)]
        arguments = routes.normalize_arguments(given, server_arch=server_arch)
        arguments["extra_include_paths"] = [os.path.abspath(p) for p in arguments["extra_include_paths"]]
        if lineinfo and any(s.endswith(".cu") for s in arguments["sources"]):
            cuda_flags = [*arguments["extra_cuda_cflags"], "-lineinfo"]
            arguments["extra_cuda_cflags"] = routes.normalize_cuda_flags(cuda_flags, server_arch)
        for source in arguments["sources"]:
            if not Path(source).is_file():
                raise BuildError(f"Error building extension '{arguments['name']}': no source file {source}")
        request = BuildRequest(wire.LOAD, arguments, folders(arguments, arguments["sources"]))
        return build(request, InlineBuild(name=arguments["name"]))

    load_inline.__wrapped__ = original_inline  # type: ignore[attr-defined]
    load.__wrapped__ = original_load  # type: ignore[attr-defined]
    cpp_extension.load_inline, cpp_extension.load = load_inline, load
