"""Build one load_inline call on the fastest route that works, into a staging folder (run by the builder).

The routes, fastest first: `split-light` (torch headers kept out of nvcc's
unit by profsvc.worker.inline_split, the host glue compiled at -O1 against a
precompiled light stand-in for `torch/extension.h`), `split` (the same against
the full header), then `torch` (the call as written, so every compile error is
reported against the user's own source). torch's own load_inline does each
build; its import of the result is left out: the builder never loads what it
built (the job that asked does, in its jail).

Precompiled headers are read from the shared cache (read-only here) and, where
one is missing, made in the staging folder for the server to install beside
the build.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from profsvc.worker.inline_split import split_source

# Arguments that do not change the built library.
NOT_IN_KEY = frozenset({"build_directory", "verbose", "keep_intermediates"})
ROUTES = ("split-light", "split", "torch")
PCH_FOLDER = "pch"


def inline_key(arguments: dict[str, Any], environment: dict[str, str]) -> str:
    """The cache key of a load_inline call: everything that decides the built library."""
    keyed = {k: v for k, v in arguments.items() if k not in NOT_IN_KEY}
    blob = json.dumps({"call": keyed, "env": environment}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def route_folder(key: str, route: str) -> str:
    """The cache folder of a key's build on a route."""
    return key if route == "torch" else f"{key}-{route}"


def sources(value: str | list[str] | None) -> list[str]:
    """A load_inline sources argument as a list."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _host_cflags(extra_cflags: list[str] | None) -> list[str]:
    """Flags of the host glue unit: the user's, at -O1 (it only calls into torch; -O3 doubles its build)."""
    return [*(f for f in extra_cflags or [] if not re.fullmatch(r"-O\w*", f)), "-O1"]


def split_arguments(arguments: dict[str, Any], pch_include: list[str]) -> dict[str, Any] | None:
    """The load_inline arguments of the fast route, or None when the source does not allow it."""
    cuda = "\n".join(sources(arguments.get("cuda_sources")))
    if not cuda.strip() or arguments.get("functions") is None:
        return None
    split = split_source(cuda)
    if split is None:
        return None
    cpp = ["#include <torch/extension.h>", *sources(arguments.get("cpp_sources")), split.host]
    cflags = [*_host_cflags(arguments.get("extra_cflags")), *pch_include]
    fast = {"cpp_sources": cpp, "cuda_sources": split.cuda, "no_implicit_headers": True, "extra_cflags": cflags}
    return {**arguments, **fast}


def _torch_cxx_flags(extra_cflags: list[str], extra_include_paths: list[str]) -> list[str]:
    """The flags torch's ninja build gives a C++ unit, without the extension's name (that one varies)."""
    import sysconfig

    from torch.utils import cpp_extension

    source = inspect.getsource(cpp_extension._write_ninja_file_to_build_library)
    standard = "-std=c++20" if "-std=c++20" in source else "-std=c++17"
    system = [*cpp_extension.include_paths("cuda"), sysconfig.get_path("include", scheme="posix_prefix")]
    flags = ["-DTORCH_API_INCLUDE_EXTENSION_H", *(f"-I{os.path.abspath(p)}" for p in extra_include_paths)]
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
FULL_EXTENSION_H = "#include <torch/extension.h>\n"
# ninja's line for a failed step ("FAILED: main.o", from ninja 1.12 "FAILED: [code=1] main.o"); at a line's
# start, so that a compiler message quoting such text is not read as one.
_FAILED_STEP = re.compile(r"^FAILED: (?:\[code=\d+\] )?(\S+)", re.MULTILINE)
# Beside a precompiled header that g++ refused to make for its key: not tried again (it costs tens of seconds).
PCH_FAILED = "failed"
# The object file of load_inline's C++ unit (main.cpp): the only one the glue header reaches.
_GLUE_OBJECT = "main.o"


def _glue_may_be_the_cause(error: BaseException) -> bool:
    """Whether another glue header could mend this failed build: ninja says the C++ unit failed, or no step did."""
    failed = _FAILED_STEP.findall(str(error))
    return not failed or _GLUE_OBJECT in failed


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def prepare_pch(
    cache_root: Path, staging: Path, extra_cflags: list[str], extra_include_paths: list[str], *, light: bool = False
) -> list[str]:
    """The flags that make g++ use the glue unit's precompiled torch header for these flags.

    Read from the cache where it is there; else made once in `staging/pch/KEY` (the server installs it into the
    cache after the build). `light`: a `torch/extension.h` of LIGHT_EXTENSION_H, put ahead of torch's on the
    include path, so every `#include <torch/extension.h>` of the unit reads it. g++ only takes a precompiled
    header built with the same flags, so it is keyed by them; when g++ cannot use it, it reads the header as
    usual (slower, same result). A header g++ refused to precompile for a key raises CalledProcessError, then
    and, once installed, on every later call for that key.
    """
    from torch.utils import cpp_extension

    compiler = cpp_extension.get_cxx_compiler()
    flags = _torch_cxx_flags(extra_cflags, extra_include_paths)
    text = LIGHT_EXTENSION_H if light else FULL_EXTENSION_H
    key = hashlib.sha256(json.dumps([compiler, flags, _torch_version(), text]).encode()).hexdigest()[:24]

    def header_in(directory: Path) -> Path:
        return directory / "torch" / "extension.h" if light else directory / "torch_extension.h"

    def use(directory: Path) -> list[str]:
        return [*(["-I", str(directory)] if light else []), "-include", str(header_in(directory))]

    for directory in (cache_root / PCH_FOLDER / key, staging / PCH_FOLDER / key):
        command = [compiler, *flags, "-x", "c++-header", str(header_in(directory)), "-o", "-"]
        if (directory / PCH_FAILED).is_file():
            raise subprocess.CalledProcessError(1, command, stderr=(directory / PCH_FAILED).read_bytes())
        if header_in(directory).with_name(header_in(directory).name + ".gch").is_file():
            return use(directory)
    directory = staging / PCH_FOLDER / key
    header = header_in(directory)
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text(text)
    compiled = header.with_name(header.name + ".gch")
    command = [compiler, *flags, "-x", "c++-header", str(header), "-o", str(compiled)]
    done = subprocess.run(command, capture_output=True, check=False)
    if done.returncode > 0:
        # The compiler's own refusal (not a kill by a signal): it would refuse again.
        (directory / PCH_FAILED).write_bytes(done.stderr[-4000:])
    done.check_returncode()
    return use(directory)


@dataclass
class InlineOutcome:
    """What building one load_inline call gave."""

    ok: bool
    route: str = ""
    # The folder the library was built in (its object files' debug information names sources there).
    built_in: str = ""
    seconds: float = 0.0
    # Seconds spent on a fast route that failed before the route that worked.
    fallback_seconds: float = 0.0
    log: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def build_inline(
    arguments: dict[str, Any],
    key: str,
    cache_root: Path,
    staging: Path,
    load_inline: Callable[..., Any],
    prepare: Callable[..., list[str]] | None = None,
) -> InlineOutcome:
    """Build the call into `staging/<route folder>` on the fastest route that works (see the module's text).

    `load_inline` is torch's, with its import of the result turned off by the caller; `prepare` makes the
    precompiled headers (prepare_pch).
    """
    prepare = prepare or prepare_pch
    start = time.monotonic()
    fast = split_arguments(arguments, [])
    outcome = InlineOutcome(ok=False)
    if fast is not None:
        includes = list(arguments.get("extra_include_paths") or [])
        for route in ROUTES[:2]:
            folder = staging / route_folder(key, route)
            folder.mkdir(parents=True, exist_ok=True)
            try:
                pch = prepare(cache_root, staging, fast["extra_cflags"], includes, light=route == "split-light")
                # Fresh lists for each try: load_inline appends its bindings to the cpp_sources it is given.
                attempt = {
                    "cpp_sources": list(fast["cpp_sources"]),
                    "extra_cflags": [*fast["extra_cflags"], *pch],
                    "build_directory": str(folder),
                }
                load_inline(**{**fast, **attempt})
                outcome.ok, outcome.route, outcome.built_in = True, route, str(folder)
                break
            except (RuntimeError, OSError, ImportError, subprocess.CalledProcessError) as error:
                # A fast route is an optimisation: the next one, at last the build as written, which reports
                # the user's own errors. Where the kernel unit failed, the full header would fail too.
                outcome.fallback_seconds = time.monotonic() - start
                if not _glue_may_be_the_cause(error):
                    break
    if not outcome.ok:
        folder = staging / route_folder(key, "torch")
        folder.mkdir(parents=True, exist_ok=True)
        try:
            load_inline(**{**arguments, "build_directory": str(folder)})
            outcome.ok, outcome.route, outcome.built_in = True, "torch", str(folder)
        except (RuntimeError, OSError, ImportError, subprocess.CalledProcessError) as error:
            outcome.route, outcome.log = "torch", str(error)
    outcome.seconds = time.monotonic() - start
    return outcome


def torch_builder() -> Callable[..., Any]:
    """torch's load_inline with its final import turned off (a built library is never loaded by its builder)."""
    from torch.utils import cpp_extension

    original = getattr(cpp_extension.load_inline, "__wrapped__", cpp_extension.load_inline)

    def build(**arguments: Any) -> None:
        importer = cpp_extension._import_module_from_library
        cpp_extension._import_module_from_library = lambda *args, **kwargs: None
        try:
            original(**arguments)
        finally:
            cpp_extension._import_module_from_library = importer

    return build
