"""Route every `torch.utils.cpp_extension.load_inline` and `load` call into the content-addressed build cache.

Installed in the worker before the user's module is imported, so the module's
own `from torch.utils.cpp_extension import load_inline` picks up the wrapper.
The wrapper normalizes the call's flags, chooses the build directory (by the
hash of everything that decides the build), adds `-lineinfo` for profiling so
ncu can map samples to CUDA source lines, and takes the route that
`profsvc.build.routes.decide` picks: where the source allows it, the torch
headers kept out of nvcc's translation unit (inline_split) and, for g++, a
precompiled light stand-in for `torch/extension.h` (LIGHT_EXTENSION_H, or
LIGHT_CUDA_EXTENSION_H where the host code includes torch's CUDA context), or
the precompiled full header when the user's host code needs more. torch still
does the build; when the fast route fails, the call is built exactly as the
user wrote it, so every compile error is reported against the user's own
source. Each build records its route and, where a faster one was declined, why.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import inspect
import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from profsvc.build import routes
from profsvc.build.routes import GLUE_FULL, GLUE_LIGHT, GLUE_LIGHT_CUDA, ROUTE_SPLIT, ROUTE_SPLIT_LIGHT, ROUTE_TORCH

# Beside a library in its build directory: the route that built it and why (read back when it is reused).
ROUTE_FILE = "profsvc-route.json"


@dataclass
class InlineBuild:
    """One load_inline (or load) call as the worker saw it."""

    name: str
    cache_key: str
    cached: bool
    seconds: float = 0.0
    # Where each generated file's line 1 sits in the user's source (for diagnostics).
    cuda_first_line: int = 0
    cpp_first_line: int = 0
    build_directory: str = ""
    # "split-light" and "split": torch headers kept out of nvcc's unit, the glue unit against the light or the
    # full torch header; "torch": built as written.
    route: str = ROUTE_TORCH
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


# Headers in an include folder that key a build, and how many of them are read at most (a system folder).
_HEADER_SUFFIXES = (".h", ".hpp", ".hh", ".cuh", ".inl", ".inc")
_HEADERS_READ = 256


def _header_digests(folders: list[str]) -> dict[str, str]:
    """The headers directly in each include folder: "index/name" -> sha256 of the content."""
    digests = {}
    for index, folder in enumerate(dict.fromkeys(folders)):
        with contextlib.suppress(OSError):
            headers = sorted(p for p in Path(folder).iterdir() if p.suffix in _HEADER_SUFFIXES and p.is_file())
            for path in headers[:_HEADERS_READ]:
                digests[f"{index}/{path.name}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def _built(directory: Path, name: str) -> bool:
    return any(directory.glob(f"{name}*.so"))


def _torch_cxx_flags(extra_cflags: list[str]) -> list[str]:
    """The flags torch's ninja build gives a C++ unit, without the extension's name (that one varies)."""
    import sysconfig

    from torch.utils import cpp_extension

    source = inspect.getsource(cpp_extension._write_ninja_file_to_build_library)
    standard = "-std=c++20" if "-std=c++20" in source else "-std=c++17"
    system = [*cpp_extension.include_paths("cuda"), sysconfig.get_path("include", scheme="posix_prefix")]
    flags = ["-DTORCH_API_INCLUDE_EXTENSION_H"]
    for include in system:
        flags += ["-isystem", include]
    return [*flags, "-fPIC", standard, *extra_cflags]


# The glue unit's usual needs of torch/extension.h (torch/all.h + torch/python.h): tensors and their factories,
# the pybind11 casters and wrap_pybind_function; and the full header's configuration macros (TORCH_VERSION_*,
# AT_*), which an `#if` would otherwise read as 0 and compile the other branch. g++ instantiates a header's
# pending templates in every unit, a precompiled header or not, so fewer headers is what makes the unit faster
# (the C++ frontend is most of them).
LIGHT_EXTENSION_H = """#ifndef PROFSVC_LIGHT_TORCH_EXTENSION_H
#define PROFSVC_LIGHT_TORCH_EXTENSION_H
#include <torch/version.h>
#include <ATen/Config.h>
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/Exceptions.h>
#endif
"""
# The same with torch's CUDA context and device guard, for host code that includes them (the current stream,
# cuBLAS handle, device properties, CUDAGuard): precompiled too, where read as text they cost seconds.
LIGHT_CUDA_EXTENSION_H = LIGHT_EXTENSION_H.replace(
    "#endif\n", "#include <ATen/cuda/CUDAContext.h>\n#include <c10/cuda/CUDAGuard.h>\n#endif\n"
)
FULL_EXTENSION_H = "#include <torch/extension.h>\n"
GLUE_HEADERS = {GLUE_LIGHT: LIGHT_EXTENSION_H, GLUE_LIGHT_CUDA: LIGHT_CUDA_EXTENSION_H, GLUE_FULL: FULL_EXTENSION_H}
# ninja's line for a failed step ("FAILED: main.o", from ninja 1.12 "FAILED: [code=1] main.o"); at a line's
# start, so that a compiler message quoting such text is not read as one.
_FAILED_STEP = re.compile(r"^FAILED: (?:\[code=\d+\] )?(\S+)", re.MULTILINE)
# Beside a precompiled header that g++ refused to make for its key: not tried again (it costs tens of seconds).
_PCH_FAILED = "failed"
# The object file of load_inline's C++ unit (main.cpp): the only one the glue header reaches.
_GLUE_OBJECT = "main.o"


def _glue_may_be_the_cause(error: BaseException) -> bool:
    """Whether another glue header could mend this failed build: ninja says the C++ unit failed, or no step did."""
    failed = _FAILED_STEP.findall(str(error))
    return not failed or _GLUE_OBJECT in failed


def prepare_pch(cache_root: Path, glue_cflags: list[str], *, header: str = GLUE_FULL) -> list[str]:
    """Precompile the glue unit's torch header for these flags once (shared by all workers, kept across restarts).

    Returns the flags that make g++ use it. `header`: GLUE_LIGHT or GLUE_LIGHT_CUDA, a `torch/extension.h` of
    that text put ahead of torch's on the include path, so every `#include <torch/extension.h>` of the unit
    reads it; GLUE_FULL, torch's own. g++ only takes a precompiled header built with the same flags, so it is
    built with and keyed by the unit's flags less those it does not depend on (routes.pch_cflags: macros,
    include paths); when g++ cannot use it, it reads the header as usual (slower, same result). A header g++
    refused to precompile for a key raises CalledProcessError, then and on every later call for that key
    (remove the folder to try again).
    """
    from torch.utils import cpp_extension

    compiler = cpp_extension.get_cxx_compiler()
    flags = _torch_cxx_flags(routes.pch_cflags(glue_cflags))
    text = GLUE_HEADERS[header]
    light = header != GLUE_FULL
    key = hashlib.sha256(json.dumps([compiler, flags, _torch_version(), text]).encode()).hexdigest()[:24]
    directory = cache_root / "pch" / key
    header_file = directory / "torch" / "extension.h" if light else directory / "torch_extension.h"
    compiled = header_file.with_name(header_file.name + ".gch")
    header_file.parent.mkdir(parents=True, exist_ok=True)
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not compiled.is_file():
            header_file.write_text(text)
            partial = directory / "partial.gch"
            command = [compiler, *flags, "-x", "c++-header", str(header_file), "-o", str(partial)]
            if (directory / _PCH_FAILED).is_file():
                raise subprocess.CalledProcessError(1, command, stderr=(directory / _PCH_FAILED).read_bytes())
            done = subprocess.run(command, capture_output=True, check=False)
            if done.returncode > 0:
                # The compiler's own refusal (not a kill by a signal): it would refuse again.
                (directory / _PCH_FAILED).write_bytes(done.stderr[-4000:])
            done.check_returncode()
            partial.rename(compiled)
    return [*(["-I", str(directory)] if light else []), "-include", str(header_file)]


def prepare_server_headers(cache_root: Path) -> dict[str, str]:
    """Precompile the glue headers a server's builds use with the usual flags (none of the user's): light,
    light with torch's CUDA context, full. Returns each header's outcome ("ok" or the compiler's last line)."""
    outcome = {}
    for header in GLUE_HEADERS:
        try:
            prepare_pch(cache_root, routes.glue_cflags([]), header=header)
            outcome[header] = "ok"
        except (OSError, subprocess.CalledProcessError) as error:
            stderr = getattr(error, "stderr", b"") or b""
            outcome[header] = (stderr.decode(errors="replace").strip().splitlines() or [str(error)])[-1]
    return outcome


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def _load_built(name: str, directory: Path, is_python_module: bool) -> Any:
    """Import a library the cache already holds, or None.

    The directory's key covers everything that decides the build, so its library is current: this skips
    torch's up-to-date check, which starts ninja and the compiler (each a process ncu follows).
    """
    from torch.utils import cpp_extension

    importer = getattr(cpp_extension, "_import_module_from_library", None)
    if importer is None or not (directory / f"{name}.so").is_file():
        return None
    try:
        return importer(name, str(directory), is_python_module)
    except (ImportError, OSError):
        return None  # a damaged library: torch's own path rebuilds it


def _record_route(build: InlineBuild, route: str, directory: Path, reason: str = "", detail: str = "") -> None:
    build.route, build.build_directory = route, str(directory)
    build.route_reason, build.route_detail = reason, detail


def _remember_route(build: InlineBuild) -> None:
    """Write the route beside the library, for the builds that reuse it."""
    route = {"route": build.route, "reason": build.route_reason, "detail": build.route_detail}
    with contextlib.suppress(OSError):
        (Path(build.build_directory) / ROUTE_FILE).write_text(json.dumps(route))


def _remembered_route(build: InlineBuild, route: str, directory: Path, decision: routes.RouteDecision) -> None:
    """The route of a reused library: as its build recorded it, else as decided now."""
    try:
        saved = json.loads((directory / ROUTE_FILE).read_text())
        _record_route(build, str(saved["route"]), directory, str(saved["reason"]), str(saved["detail"]))
    except (OSError, ValueError, KeyError, TypeError):
        _record_route(build, route, directory, decision.reason, decision.detail)


def _failure(error: BaseException) -> str:
    """Why the split route's build failed, in a few words (the build as written reports the error itself)."""
    failed = _FAILED_STEP.findall(str(error))
    if isinstance(error, subprocess.CalledProcessError):
        return "the glue unit's precompiled header could not be made"
    if failed and _GLUE_OBJECT not in failed:
        return f"the kernel unit failed without the torch headers (ninja: {', '.join(failed)})"
    if failed:
        return "the glue unit failed with the light and the full torch header"
    return f"{type(error).__name__}: {str(error).strip().splitlines()[-1] if str(error).strip() else ''}"


def build(
    cache_root: Path,
    arguments: dict[str, Any],
    decision: routes.RouteDecision,
    build: InlineBuild,
    *,
    original_inline: Callable[..., Any],
    as_written: Callable[[str], Any],
) -> Any:
    """Build (or reuse) one call on the decided route, falling back to the build as written; fills `build`.

    `as_written(build_directory)` makes the call as the user wrote it (load_inline or load), into that folder.
    """
    name = arguments["name"]
    directory = cache_root / build.cache_key
    fast = decision.fast
    # The fast routes, fastest first: the glue unit against the light header, then against the full one.
    fast_routes = [
        (cache_root / f"{build.cache_key}-split-light", ROUTE_SPLIT_LIGHT, decision.glue_header),
        (cache_root / f"{build.cache_key}-split", ROUTE_SPLIT, GLUE_FULL),
    ]
    build.cached = _built(directory, name) or (fast is not None and any(_built(d, name) for d, _, _ in fast_routes))
    start = time.monotonic()
    try:
        for built, route in ((directory, ROUTE_TORCH), *((d, r) for d, r, _ in fast_routes)):
            module = _load_built(name, built, bool(arguments.get("is_python_module", True)))
            if module is not None and (route == ROUTE_TORCH or fast is not None):
                _remembered_route(build, route, built, decision)
                return module
        reason, detail = decision.reason, decision.detail
        if fast is not None and not _built(directory, name):
            for fast_directory, route, header in fast_routes:
                fast_directory.mkdir(parents=True, exist_ok=True)
                try:
                    pch = prepare_pch(cache_root, fast["extra_cflags"], header=header)
                    # Fresh lists for each try: load_inline appends its bindings to the cpp_sources it is given.
                    attempt = {
                        "cpp_sources": list(fast["cpp_sources"]),
                        "extra_cflags": [*fast["extra_cflags"], *pch],
                        "build_directory": str(fast_directory),
                    }
                    module = original_inline(**{**fast, **attempt})
                    _record_route(build, route, fast_directory, reason, detail)
                    _remember_route(build)
                    return module
                except (RuntimeError, OSError, ImportError, subprocess.CalledProcessError) as error:
                    # A fast route is an optimisation: the next one, at last the build as written, which
                    # reports the user's own errors. Where the kernel unit failed, the full header would too.
                    build.fallback_seconds = time.monotonic() - start
                    reason, detail = routes.LIGHT_HEADER_FAILED, "the glue unit needs more than the light header"
                    if not _glue_may_be_the_cause(error) or route == ROUTE_SPLIT:
                        reason, detail = routes.SPLIT_FAILED, _failure(error)
                        break
        directory.mkdir(parents=True, exist_ok=True)
        _record_route(build, ROUTE_TORCH, directory, reason, detail)
        module = as_written(str(directory))
        _remember_route(build)
        return module
    finally:
        build.seconds = time.monotonic() - start


def install(cache_root: Path, *, lineinfo: bool, user_text: str, recorder: InlineRecorder) -> None:
    """Replace torch's load_inline and load with the caching wrappers."""
    import torch
    from torch.utils import cpp_extension

    original_inline, original_load = cpp_extension.load_inline, cpp_extension.load
    inline_signature, load_signature = inspect.signature(original_inline), inspect.signature(original_load)
    server_arch = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    environment = {"torch": torch.__version__, "cuda": torch.version.cuda, "arch": server_arch}

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        bound = inline_signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = routes.normalize_arguments(dict(bound.arguments), server_arch=server_arch, lineinfo=lineinfo)
        arguments["verbose"] = False
        cuda_first_line = _first_line(user_text, bound.arguments.get("cuda_sources"))
        decision = routes.decide(arguments, first_line=cuda_first_line)
        record = InlineBuild(
            name=arguments["name"],
            cache_key=routes.cache_key(arguments, environment, _header_digests(arguments["extra_include_paths"])),
            cached=False,
            cuda_first_line=cuda_first_line,
            cpp_first_line=_first_line(user_text, bound.arguments.get("cpp_sources")),
        )
        recorder.builds.append(record)

        def as_written(directory: str) -> Any:
            # Copies of the source lists: torch inserts its headers into the lists it is given, which would change
            # the key of the module's next call with the same lists.
            sources = {k: list(v) for k, v in arguments.items() if k.endswith("_sources") and isinstance(v, list)}
            return original_inline(**{**arguments, **sources, "build_directory": directory})

        return build(cache_root, arguments, decision, record, original_inline=original_inline, as_written=as_written)

    def load(*args: Any, **kwargs: Any) -> Any:
        bound = load_signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = {**bound.arguments, "verbose": False}
        try:
            texts = {s: Path(s).read_text() for s in routes.source_paths(arguments)}
        except (OSError, UnicodeDecodeError):
            return original_load(**arguments)  # torch says what is wrong with the sources
        keyed, decision = routes.load_call(arguments, texts, server_arch=server_arch, lineinfo=lineinfo)
        folders = [*keyed.get("extra_include_paths", []), *(str(Path(s).parent) for s in texts)]
        record = InlineBuild(
            name=arguments["name"],
            cache_key=routes.cache_key(keyed, environment, _header_digests(folders)),
            cached=False,
        )
        recorder.builds.append(record)
        flags = {k: keyed[k] for k in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags")}

        def as_written(directory: str) -> Any:
            return original_load(**{**arguments, **flags, "build_directory": directory})

        return build(cache_root, keyed, decision, record, original_inline=original_inline, as_written=as_written)

    cpp_extension.load_inline = load_inline
    cpp_extension.load = load
