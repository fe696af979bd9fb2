"""Build one load_inline or load call on the fastest route that works, into a staging folder (run by the builder).

The request (profsvc.build.request) carries the call's normalized arguments and the files of the job's own
folders; they are written under `staging/inputs` and the arguments pointed there. profsvc.build.routes
decides the route to try first and, where it is not the fastest, why. The routes, fastest first:
`split-light` (torch headers kept out of nvcc's unit by profsvc.worker.inline_split, the host glue compiled
at -O1 against a precompiled light stand-in for `torch/extension.h`, with or without torch's CUDA context),
`split` (the same against the full header), then `torch` (the call as written, so every compile error is
reported against the user's own source). torch's own load_inline (or load) does each build; its import of the
result is left out: the builder never loads what it built (the job that asked does, in its jail). Beside the
library, ROUTE_FILE records the route and why, for the builds that reuse it.

The precompiled glue headers are the server's: made once, with no user input, by prepare_server_headers (the
server installs them into the cache); a build reads them from the cache, which it sees read-only, and reads a
header as text where the cache has none. Nothing a build writes is shared but its library.
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

from profsvc.build import routes
from profsvc.build.binding import BINDING_FOLDER, BINDING_MODULE, BINDING_OBJECT, BindingPlan, Bound
from profsvc.build.request import ENCODING, LOAD, BuildRequest, relative_name
from profsvc.build.routes import (
    GLUE_BIND,
    GLUE_FULL,
    GLUE_LIGHT,
    GLUE_LIGHT_CUDA,
    GLUE_TYPES,
    GLUE_TYPES_CUDA,
    ROUTE_SPLIT,
    ROUTE_SPLIT_BIND,
    ROUTE_SPLIT_LIGHT,
    ROUTE_TORCH,
)

ROUTES = (ROUTE_SPLIT_BIND, ROUTE_SPLIT_LIGHT, ROUTE_SPLIT, ROUTE_TORCH)
PCH_FOLDER = "pch"
# Beside a library in its cache folder: the route that built it and why (read back when it is reused).
ROUTE_FILE = "profsvc-route.json"
_BUILD_KEY = re.compile(r"[0-9a-f]{32}")


def route_folder(key: str, route: str) -> str:
    """The cache folder of a key's build on a route."""
    return key if route == ROUTE_TORCH else f"{key}-{route}"


def is_route_folder(name: str) -> bool:
    """Whether `name` is one route_folder gives: a build's key (32 hex digits), its route after a dash."""
    key, dash, route = name.partition("-")
    return _BUILD_KEY.fullmatch(key) is not None and (not dash or (route in ROUTES and route != ROUTE_TORCH))


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
CUDA_CONTEXT_H = "#include <ATen/cuda/CUDAContext.h>\n#include <c10/cuda/CUDAGuard.h>\n"
LIGHT_CUDA_EXTENSION_H = LIGHT_EXTENSION_H.replace("#endif\n", CUDA_CONTEXT_H + "#endif\n")
FULL_EXTENSION_H = "#include <torch/extension.h>\n"
# split-bind's two: the host unit's tensors without pybind11 (whose machinery is most of a glue unit's time),
# and the shared binding's pybind11 and torch's casters without the tensor operators (names: `torch::` as
# torch/types.h gives them).
TYPES_EXTENSION_H = LIGHT_EXTENSION_H.replace(
    "#include <torch/csrc/utils/pybind.h>\n#include <torch/csrc/Exceptions.h>\n", ""
)
BIND_EXTENSION_H = LIGHT_EXTENSION_H.replace("#include <torch/types.h>\n", "").replace(
    "#endif\n", "namespace torch {\nusing namespace at;\n}\n#endif\n"
)
GLUE_HEADERS = {
    GLUE_LIGHT: LIGHT_EXTENSION_H,
    GLUE_LIGHT_CUDA: LIGHT_CUDA_EXTENSION_H,
    GLUE_FULL: FULL_EXTENSION_H,
    GLUE_TYPES: TYPES_EXTENSION_H,
    GLUE_TYPES_CUDA: TYPES_EXTENSION_H.replace("#endif\n", CUDA_CONTEXT_H + "#endif\n"),
    GLUE_BIND: BIND_EXTENSION_H,
}
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


class _Glue(NamedTuple):
    """Where a glue header lives, given the folder of its key."""

    header: str

    def file(self, directory: Path) -> Path:
        return directory / "torch" / "extension.h" if self.header != GLUE_FULL else directory / "torch_extension.h"

    def flags(self, directory: Path) -> list[str]:
        # The light ones are put ahead of torch's on the include path: every `#include <torch/extension.h>` of
        # the unit reads them.
        light = ["-I", str(directory)] if self.header != GLUE_FULL else []
        return [*light, "-include", str(self.file(directory))]


def _pch_key(header: str) -> tuple[str, list[str]]:
    """(the key of a glue header's precompiled form, g++'s command line without the input and output)."""
    from torch.utils import cpp_extension

    compiler = cpp_extension.get_cxx_compiler()
    command = [compiler, *_torch_cxx_flags(routes.glue_cflags([]))]
    key = hashlib.sha256(json.dumps([command, _torch_version(), GLUE_HEADERS[header]]).encode()).hexdigest()[:24]
    return key, command


def prepare_pch(cache_root: Path, staging: Path, *, header: str = GLUE_FULL) -> list[str]:
    """The flags that make g++ use a glue header, precompiled with the glue unit's usual flags (none of the user's).

    Read from the cache where it is there; else made once in `staging/pch/KEY` (the server installs it). g++
    takes a precompiled header only where the unit's flags allow it, and reads the header as usual where they
    do not (slower, same result). A header g++ refused to precompile raises CalledProcessError, then and, once
    installed, on every later call for that key.
    """
    key, command = _pch_key(header)
    glue = _Glue(header)
    for directory in (cache_root / PCH_FOLDER / key, staging / PCH_FOLDER / key):
        if (directory / PCH_FAILED).is_file():
            raise subprocess.CalledProcessError(1, command, stderr=(directory / PCH_FAILED).read_bytes())
        if glue.file(directory).with_name(glue.file(directory).name + ".gch").is_file():
            return glue.flags(directory)
    directory = staging / PCH_FOLDER / key
    source = glue.file(directory)
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(GLUE_HEADERS[header])
    compiled = source.with_name(source.name + ".gch")
    done = subprocess.run(
        [*command, "-x", "c++-header", str(source), "-o", str(compiled)], capture_output=True, check=False
    )
    if done.returncode > 0:
        # The compiler's own refusal (not a kill by a signal): it would refuse again.
        (directory / PCH_FAILED).write_bytes(done.stderr[-4000:])
    done.check_returncode()
    return glue.flags(directory)


def prepare_server_headers(cache_root: Path, staging: Path) -> dict[str, str]:
    """Precompile the glue headers every build reads (light, light with torch's CUDA context, full), at once.

    Returns each header's outcome: "ok", or the compiler's last line.
    """

    def one(header: str) -> tuple[str, str]:
        try:
            prepare_pch(cache_root, staging, header=header)
            return header, "ok"
        except (OSError, subprocess.CalledProcessError) as error:
            stderr = getattr(error, "stderr", b"") or b""
            return header, (stderr.decode(errors="replace").strip().splitlines() or [str(error)])[-1]

    with ThreadPoolExecutor(len(GLUE_HEADERS)) as pool:
        return dict(pool.map(one, GLUE_HEADERS))


def server_pch(cache_root: Path, staging: Path, header: str) -> list[str]:
    """A build's glue header: the server's precompiled one where the cache holds it, else its text (in staging)."""
    key, _ = _pch_key(header)
    glue = _Glue(header)
    made = cache_root / PCH_FOLDER / key
    if glue.file(made).with_name(glue.file(made).name + ".gch").is_file() and not (made / PCH_FAILED).exists():
        return glue.flags(made)
    text = staging / "glue" / header
    glue.file(text).parent.mkdir(parents=True, exist_ok=True)
    glue.file(text).write_text(GLUE_HEADERS[header])
    return glue.flags(text)


class TorchBuilders(NamedTuple):
    """torch's load_inline and load, their final import turned off (a built library is never loaded by its
    builder)."""

    load_inline: Callable[..., Any]
    load: Callable[..., Any]
    # Where torch is a build without CUDA, it named ("torch 2.13.0+cpu"): it cannot build CUDA code itself.
    without_cuda: str = ""


def torch_builders() -> TorchBuilders:
    """torch's builders as TorchBuilders (the originals where profsvc's wrappers are installed)."""
    from torch.utils import cpp_extension

    def without_import(function: Callable[..., Any]) -> Callable[..., Any]:
        original = getattr(function, "__wrapped__", function)

        def build(**arguments: Any) -> None:
            # torch names a second build of one name in a process NAME_v1.so: a builder's next route (each in a
            # folder of its own) must make NAME.so, the library the cache installs.
            cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(arguments.get("name"), None)
            importer = cpp_extension._import_module_from_library
            cpp_extension._import_module_from_library = lambda *args, **kwargs: None
            try:
                original(**arguments)
            finally:
                cpp_extension._import_module_from_library = importer

        return build

    import torch

    without_cuda = "" if torch.version.cuda else f"torch {torch.__version__}"
    return TorchBuilders(without_import(cpp_extension.load_inline), without_import(cpp_extension.load), without_cuda)


def materialize(request: BuildRequest, inputs: Path) -> dict[str, Any]:
    """Write the request's folders under `inputs` (one folder each) and return its arguments with their paths
    pointing there: the include folders it sent, a load()'s sources."""
    where: dict[str, str] = {}
    for index, folder in enumerate(request.folders):
        root = inputs / str(index)
        root.mkdir(parents=True, exist_ok=True)
        for name, text in folder.files.items():
            if not relative_name(name):  # checked by the server already: this process writes nowhere else
                raise ValueError(f"not a relative name: {name!r}")
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, **ENCODING)
        where[folder.path] = str(root)
    arguments = dict(request.arguments)
    arguments["extra_include_paths"] = [where.get(p, p) for p in arguments.get("extra_include_paths") or []]
    if request.call == LOAD:
        arguments["sources"] = [_moved(source, where) for source in arguments["sources"]]
    return arguments


def _moved(path: str, where: dict[str, str]) -> str:
    for folder, root in where.items():
        name = path.removeprefix(folder.rstrip("/") + "/")
        if name != path:
            return str(Path(root) / name)
    return path


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


@dataclass
class InlineOutcome:
    """What building one call gave: the route, why a faster one was declined, where it was built.

    `split_reason`/`split_line`: the split's own refusal and its line of cuda_sources, so that the reason can be
    worded for each file that holds the same source (routes.RouteDecision.split).
    """

    ok: bool
    route: str = ROUTE_TORCH
    reason: str = ""
    detail: str = ""
    split_reason: str = ""
    split_line: int = 0
    # The folder the library was built in (its object files' debug information names sources there).
    built_in: str = ""
    seconds: float = 0.0
    # Seconds spent on a fast route that failed before the route that worked.
    fallback_seconds: float = 0.0
    log: str = ""
    # The binding plan (binding.BindingPlan's message) whose shared object the server is to make: split-bind
    # was declined because it was not made yet.
    binding: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    def record(self) -> dict[str, Any]:
        """What ROUTE_FILE holds."""
        fields = ("route", "reason", "detail", "split_reason", "split_line")
        return {name: getattr(self, name) for name in fields}


_BUILD_ERRORS = (RuntimeError, OSError, ImportError, subprocess.CalledProcessError)


def _decided(
    request: BuildRequest, arguments: dict[str, Any], builders: TorchBuilders
) -> tuple[routes.RouteDecision, Callable[[str], None]]:
    """The call's route decision, and how to build it as written into a folder."""
    server_arch = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    if request.call == LOAD:
        texts = {s: Path(s).read_text(**ENCODING) for s in routes.source_paths(arguments)}
        keyed, decision = routes.load_call(arguments, texts, server_arch=server_arch)
        flags = {k: keyed[k] for k in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags")}

        def load(directory: str) -> None:
            builders.load(**{**arguments, **flags, "build_directory": directory})

        return decision, load

    def load_inline(directory: str) -> None:
        # Copies of the source lists: torch inserts its headers into the lists it is given.
        sources = {k: list(v) for k, v in arguments.items() if k.endswith("_sources") and isinstance(v, list)}
        builders.load_inline(**{**arguments, **sources, "build_directory": directory})

    return routes.decide(arguments), load_inline


def _split_routes(
    fast: dict[str, Any],
    glue_header: str,
    outcome: InlineOutcome,
    folder: Callable[[str], Path],
    builders: TorchBuilders,
    glue: Callable[[str], list[str]],
) -> None:
    """Try the fast routes, fastest first (the glue unit against the light header, then the full one); fill
    `outcome` with the one that built, or why none did."""
    start = time.monotonic()
    for route, header in ((ROUTE_SPLIT_LIGHT, glue_header), (ROUTE_SPLIT, GLUE_FULL)):
        try:
            # Fresh lists for each try: load_inline appends its bindings to the cpp_sources it is given.
            attempt = {
                "cpp_sources": list(fast["cpp_sources"]),
                "extra_cflags": [*fast["extra_cflags"], *glue(header)],
                "build_directory": str(folder(route)),
            }
            builders.load_inline(**{**fast, **attempt})
            outcome.ok, outcome.route, outcome.built_in = True, route, attempt["build_directory"]
            return
        except _BUILD_ERRORS as error:
            # A fast route is an optimisation: the next one, at last the build as written, which reports the
            # user's own errors. Where the kernel unit failed, the full header would fail too.
            outcome.fallback_seconds = time.monotonic() - start
            outcome.reason = routes.LIGHT_HEADER_FAILED
            outcome.detail = "the glue unit needs more than the light header"
            if not _glue_may_be_the_cause(error) or route == ROUTE_SPLIT:
                outcome.reason, outcome.detail = routes.SPLIT_FAILED, _failure(error)
                return


def _split_bind(
    fast: dict[str, Any],
    header: str,
    shared: Bound,
    made: Path,
    outcome: InlineOutcome,
    folder: Callable[[str], Path],
    builders: TorchBuilders,
    glue: Callable[[str], list[str]],
) -> None:
    """Try split-bind: the host unit against torch's tensor headers (`header`: the light header they stand
    in for), linked with the shared binding `made`."""
    start = time.monotonic()
    directory = str(folder(ROUTE_SPLIT_BIND))
    try:
        attempt = {
            "cpp_sources": [*fast["cpp_sources"], shared.host_source()],
            "functions": None,
            "extra_cflags": [*fast["extra_cflags"], *glue(routes.TYPES_FOR[header])],
            "extra_ldflags": [*fast.get("extra_ldflags", []), str(made)],
            "build_directory": directory,
        }
        builders.load_inline(**{**fast, **attempt})
        outcome.ok, outcome.route, outcome.built_in = True, ROUTE_SPLIT_BIND, directory
    except _BUILD_ERRORS as error:
        outcome.fallback_seconds = time.monotonic() - start
        outcome.reason, outcome.detail = routes.BINDING_FAILED, _failure(error)


def _bound_route(
    decision: routes.RouteDecision,
    outcome: InlineOutcome,
    folder: Callable[[str], Path],
    builders: TorchBuilders,
    glue: Callable[[str], list[str]],
    binding: Callable[[BindingPlan], Path | None],
) -> None:
    """Try split-bind where the call's shared binding is made; else say why not (and, where it is only not
    made yet, ask for it through `outcome.binding`)."""
    assert decision.fast is not None
    if decision.binding is None:
        if decision.binding_declined:
            outcome.reason, outcome.detail = routes.BINDING_DECLINED, decision.binding_declined
        return
    try:
        made = binding(decision.binding.plan)
    except _BUILD_ERRORS:
        # Its key names the glue command, which a torch without CUDA's headers cannot make: the split routes
        # fail the same way and say why.
        return
    if made is not None:
        _split_bind(decision.fast, decision.glue_header, decision.binding, made, outcome, folder, builders, glue)
        return
    outcome.binding = decision.binding.plan.as_message()
    outcome.reason = routes.BINDING_NOT_MADE
    outcome.detail = (
        "the shared binding of these signatures was not made yet: builds with them once it is take split-bind"
    )


def binding_key(plan: BindingPlan) -> str:
    """The cache folder (under BINDING_FOLDER) of a plan's shared binding, for this torch and compiler."""
    return plan.key(_pch_key(GLUE_BIND)[0])


def made_binding(cache_root: Path, plan: BindingPlan) -> Path | None:
    """The shared binding of a plan where the cache holds it (the server installed and verified it)."""
    path = _binding_object(cache_root, binding_key(plan))
    return path if path.is_file() else None


def _binding_object(root: Path, key: str) -> Path:
    return root / BINDING_FOLDER / key / BINDING_OBJECT


def make_binding(cache_root: Path, staging: Path, plan: BindingPlan, builders: TorchBuilders) -> str:
    """Compile a plan's shared binding into `staging/binding/KEY` (the server installs it); its key.

    As torch compiles a load_inline C++ unit (its flags, none of the user's), at the glue unit's -O1, against
    the server's precompiled binding header; torch links it too, which nothing uses.
    """
    key = binding_key(plan)
    if _binding_object(cache_root, key).is_file():
        return key
    build = staging / "binding-build"
    build.mkdir(parents=True, exist_ok=True)
    builders.load_inline(
        name=BINDING_MODULE,
        cpp_sources=[plan.source()],
        extra_cflags=[*routes.glue_cflags([]), *server_pch(cache_root, staging, GLUE_BIND)],
        no_implicit_headers=True,
        build_directory=str(build),
    )
    target = _binding_object(staging, key)
    target.parent.mkdir(parents=True, exist_ok=True)
    (build / "main.o").rename(target)
    return key


def build_call(
    request: BuildRequest,
    key: str,
    staging: Path,
    builders: TorchBuilders,
    glue: Callable[[str], list[str]],
    binding: Callable[[BindingPlan], Path | None] = lambda _plan: None,
) -> InlineOutcome:
    """Build the call into `staging/<route folder>` on the fastest route that works (see the module's text).

    `glue(header)`: the flags of the glue unit's header (server_pch or prepare_pch). `binding(plan)`: the
    shared binding of a plan where it has been made (split-bind), else None.
    """
    start = time.monotonic()

    def folder(route: str) -> Path:
        path = staging / route_folder(key, route)
        path.mkdir(parents=True, exist_ok=True)
        return path

    arguments = materialize(request, staging / "inputs" / key)
    decision, as_written = _decided(request, arguments, builders)
    outcome = InlineOutcome(ok=False, reason=decision.reason, detail=decision.detail)
    if decision.split is not None:
        outcome.split_reason, outcome.split_line = decision.split.reason, decision.split.line
    if decision.fast is not None:
        _bound_route(decision, outcome, folder, builders, glue, binding)
    if decision.fast is not None and not outcome.ok:
        _split_routes(decision.fast, decision.glue_header, outcome, folder, builders, glue)
    if not outcome.ok and request.has_cuda and (lacking := builders.without_cuda):
        # torch's own build of CUDA code links torch's CUDA libraries: a server whose torch has none cannot make
        # it (the split routes can, with nvcc alone). Worded as torch words a missing GPU, for the compile step.
        outcome.log = f"torch's own build of CUDA code requires CUDA support, which this server's {lacking} lacks"
    elif not outcome.ok:
        try:
            as_written(str(folder(ROUTE_TORCH)))
            outcome.ok, outcome.built_in = True, str(folder(ROUTE_TORCH))
        except _BUILD_ERRORS as error:
            outcome.log = str(error)
    if outcome.ok:
        (Path(outcome.built_in) / ROUTE_FILE).write_text(json.dumps(outcome.record()))
    outcome.seconds = time.monotonic() - start
    return outcome


def recorded_route(folder: Path) -> dict[str, Any]:
    """The route a cached build recorded (ROUTE_FILE); empty where it recorded none."""
    try:
        record = json.loads((folder / ROUTE_FILE).read_text())
        if isinstance(record, dict):
            return record
    except (OSError, ValueError):
        pass
    return {}
