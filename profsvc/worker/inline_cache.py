"""Route every `torch.utils.cpp_extension.load_inline` call into the content-addressed build cache.

Installed in the worker before the user's module is imported, so the module's
own `from torch.utils.cpp_extension import load_inline` picks up the wrapper.
The wrapper chooses the build directory (by the hash of everything that
decides the build), adds `-lineinfo` for profiling so ncu can map samples to
CUDA source lines, and takes the fast route where the source allows it: the
torch headers kept out of nvcc's translation unit (inline_split) and, for g++,
a precompiled light stand-in for `torch/extension.h` (LIGHT_EXTENSION_H), or
the precompiled full header when the user's host code needs more. torch still does the build; when the
fast route fails, the call is built exactly as the user wrote it, so every
compile error is reported against the user's own source.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import re
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from profsvc.worker.inline_split import split_source

# Arguments that do not change the built library.
_NOT_IN_KEY = frozenset({"build_directory", "verbose", "keep_intermediates"})


@dataclass
class InlineBuild:
    """One load_inline call as the worker saw it."""

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
    route: str = "torch"
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


def _sources(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _host_cflags(extra_cflags: list[str] | None) -> list[str]:
    """Flags of the host glue unit: the user's, at -O1 (it only calls into torch; -O3 doubles its build)."""
    return [*(f for f in extra_cflags or [] if not re.fullmatch(r"-O\w*", f)), "-O1"]


def split_arguments(arguments: dict[str, Any], pch_include: list[str]) -> dict[str, Any] | None:
    """The load_inline arguments of the fast route, or None when the source does not allow it."""
    cuda = "\n".join(_sources(arguments.get("cuda_sources")))
    if not cuda.strip() or arguments.get("functions") is None:
        return None
    split = split_source(cuda)
    if split is None:
        return None
    cpp = ["#include <torch/extension.h>", *_sources(arguments.get("cpp_sources")), split.host]
    cflags = [*_host_cflags(arguments.get("extra_cflags")), *pch_include]
    fast = {"cpp_sources": cpp, "cuda_sources": split.cuda, "no_implicit_headers": True, "extra_cflags": cflags}
    return {**arguments, **fast}


def _cache_key(keyed: dict[str, Any], environment: dict[str, str]) -> str:
    blob = json.dumps({"call": keyed, "env": environment}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _built(directory: Path, name: str) -> bool:
    return any(directory.glob(f"{name}*.so"))


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
_PCH_FAILED = "failed"
# The object file of load_inline's C++ unit (main.cpp): the only one the glue header reaches.
_GLUE_OBJECT = "main.o"


def _glue_may_be_the_cause(error: BaseException) -> bool:
    """Whether another glue header could mend this failed build: ninja says the C++ unit failed, or no step did."""
    failed = _FAILED_STEP.findall(str(error))
    return not failed or _GLUE_OBJECT in failed


def prepare_pch(
    cache_root: Path, extra_cflags: list[str], extra_include_paths: list[str], *, light: bool = False
) -> list[str]:
    """Precompile the glue unit's torch header for these flags once (shared by all workers, kept across restarts).

    Returns the flags that make g++ use it. `light`: a `torch/extension.h` of LIGHT_EXTENSION_H, put ahead
    of torch's on the include path, so every `#include <torch/extension.h>` of the unit reads it. g++ only
    takes a precompiled header built with the same flags, so it is keyed by them; when g++ cannot use it, it
    reads the header as usual (slower, same result). A header g++ refused to precompile for a key raises
    CalledProcessError, then and on every later call for that key (remove the folder to try again).
    """
    from torch.utils import cpp_extension

    compiler = cpp_extension.get_cxx_compiler()
    flags = _torch_cxx_flags(extra_cflags, extra_include_paths)
    text = LIGHT_EXTENSION_H if light else FULL_EXTENSION_H
    key = hashlib.sha256(json.dumps([compiler, flags, _torch_version(), text]).encode()).hexdigest()[:24]
    directory = cache_root / "pch" / key
    header = directory / "torch" / "extension.h" if light else directory / "torch_extension.h"
    compiled = header.with_name(header.name + ".gch")
    header.parent.mkdir(parents=True, exist_ok=True)
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not compiled.is_file():
            header.write_text(text)
            partial = directory / "partial.gch"
            command = [compiler, *flags, "-x", "c++-header", str(header), "-o", str(partial)]
            if (directory / _PCH_FAILED).is_file():
                raise subprocess.CalledProcessError(1, command, stderr=(directory / _PCH_FAILED).read_bytes())
            done = subprocess.run(command, capture_output=True, check=False)
            if done.returncode > 0:
                # The compiler's own refusal (not a kill by a signal): it would refuse again.
                (directory / _PCH_FAILED).write_bytes(done.stderr[-4000:])
            done.check_returncode()
            partial.rename(compiled)
    return [*(["-I", str(directory)] if light else []), "-include", str(header)]


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


def install(cache_root: Path, *, lineinfo: bool, user_text: str, recorder: InlineRecorder) -> None:
    """Replace torch's load_inline with the caching wrapper."""
    import torch
    from torch.utils import cpp_extension

    original = cpp_extension.load_inline
    signature = inspect.signature(original)
    environment = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "arch": os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
    }

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        if lineinfo and arguments.get("cuda_sources"):
            arguments["extra_cuda_cflags"] = [*(arguments.get("extra_cuda_cflags") or []), "-lineinfo"]
        arguments["verbose"] = False
        name = arguments["name"]
        key = _cache_key({k: v for k, v in arguments.items() if k not in _NOT_IN_KEY}, environment)
        directory = cache_root / key
        fast = split_arguments(arguments, [])
        # The fast routes, fastest first: the glue unit against the light header, then against the full one.
        fast_routes = [(cache_root / f"{key}-split-light", "split-light"), (cache_root / f"{key}-split", "split")]
        build = InlineBuild(
            name=name,
            cache_key=key,
            cached=_built(directory, name) or (fast is not None and any(_built(d, name) for d, _ in fast_routes)),
            cuda_first_line=_first_line(user_text, bound.arguments.get("cuda_sources")),
            cpp_first_line=_first_line(user_text, bound.arguments.get("cpp_sources")),
        )
        recorder.builds.append(build)
        start = time.monotonic()
        try:
            for built, route in ((directory, "torch"), *fast_routes):
                module = _load_built(name, built, bool(arguments.get("is_python_module", True)))
                if module is not None and (route == "torch" or fast is not None):
                    build.route, build.build_directory = route, str(built)
                    return module
            if fast is not None and not _built(directory, name):
                includes = list(arguments.get("extra_include_paths") or [])
                for fast_directory, route in fast_routes:
                    fast_directory.mkdir(parents=True, exist_ok=True)
                    try:
                        pch = prepare_pch(cache_root, fast["extra_cflags"], includes, light=route == "split-light")
                        # Fresh lists for each try: load_inline appends its bindings to the cpp_sources it is given.
                        attempt = {
                            "cpp_sources": list(fast["cpp_sources"]),
                            "extra_cflags": [*fast["extra_cflags"], *pch],
                            "build_directory": str(fast_directory),
                        }
                        module = original(**{**fast, **attempt})
                        build.route, build.build_directory = route, str(fast_directory)
                        return module
                    except (RuntimeError, OSError, ImportError, subprocess.CalledProcessError) as error:
                        # A fast route is an optimisation: the next one, at last the build as written, which
                        # reports the user's own errors. Where the kernel unit failed, the full header would too.
                        build.fallback_seconds = time.monotonic() - start
                        if not _glue_may_be_the_cause(error):
                            break
            directory.mkdir(parents=True, exist_ok=True)
            build.build_directory = str(directory)
            return original(**{**arguments, "build_directory": str(directory)})
        finally:
            build.seconds = time.monotonic() - start

    cpp_extension.load_inline = load_inline
