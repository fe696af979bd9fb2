"""Which build a load_inline (or load) call gets, and why: pure decisions over the call's arguments.

Nothing here imports torch or builds anything: a builder gives these functions the arguments of the user's
call and gets back the arguments to build with, the route to try first, and, where a faster route was
declined, a reason code and its text. The routes, fastest first:

- `split-bind`: as split-light, the functions bound by a shared object made once per list of signatures
  (profsvc.build.binding), the host glue unit against torch's tensor headers alone (GLUE_TYPES, or
  GLUE_TYPES_CUDA with torch's CUDA context and guard);
- `split-light`: the torch headers kept out of nvcc's unit (inline_split), the host glue unit compiled at
  -O1 against a precompiled light stand-in for `torch/extension.h` (GLUE_LIGHT, or GLUE_LIGHT_CUDA where
  the host code includes torch's CUDA context or guard headers);
- `split`: the same, the glue unit against the full header (where the light one lacks what it uses);
- `torch`: the call built as written.

Flags that mean nothing (empty strings, surrounding whitespace, repeats) are removed before the cache key
and the decision, so they change neither.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from profsvc.build.binding import Bound, bound
from profsvc.worker.inline_split import Declined, mask, split_source

ROUTE_SPLIT_BIND = "split-bind"
ROUTE_SPLIT_LIGHT = "split-light"
ROUTE_SPLIT = "split"
ROUTE_TORCH = "torch"

# The glue unit's precompiled header: the light one, the light one with torch's CUDA context, the full one.
GLUE_LIGHT = "light"
GLUE_LIGHT_CUDA = "light-cuda"
GLUE_FULL = "full"
# The split-bind route's: torch's tensor headers for the host unit (with its CUDA context where the light one
# has it), pybind11 and torch's casters for the binding.
GLUE_TYPES = "types"
GLUE_TYPES_CUDA = "types-cuda"
GLUE_BIND = "bind"
# The host unit's header on split-bind, for each light one.
TYPES_FOR = {GLUE_LIGHT: GLUE_TYPES, GLUE_LIGHT_CUDA: GLUE_TYPES_CUDA}

# Reason codes: why a faster route was not taken.
SPLIT_DECLINED = "split_declined"  # the source does something the split does not follow
SPLIT_FAILED = "split_failed"  # the split build failed; built as written
LIGHT_HEADER_FAILED = "light_header_failed"  # the glue unit needed the full torch header
CPP_ONLY = "cpp_only"  # no CUDA source: nothing for the split to keep out of nvcc
SYCL = "sycl"  # SYCL sources: built as written
LOAD_FILES = "load_files"  # a load() of files the split does not take as one unit each
BINDING_DECLINED = "binding_declined"  # the functions are bound in the glue unit (why: the detail)
BINDING_NOT_MADE = "binding_not_made"  # the shared binding of these signatures was not made yet
BINDING_FAILED = "binding_failed"  # the split-bind build failed; built on the next route

# load_inline arguments that do not change the built library.
NOT_IN_KEY = frozenset({"build_directory", "verbose", "keep_intermediates", "use_pch"})
FLAG_ARGUMENTS = ("extra_cflags", "extra_cuda_cflags", "extra_sycl_cflags", "extra_ldflags")
# Options whose value may come as the next flag (`-Xcompiler -fopenmp`, `-gencode arch=...`): one unit with it.
_TAKES_VALUE = frozenset(
    "-Xcompiler -Xptxas -Xlinker -Xnvlink -Xcudafe -Xfatbin -Xarchive --compiler-options --ptxas-options "
    "--linker-options --nvlink-options -gencode --generate-code -arch --gpu-architecture -code --gpu-code "
    "-I -D -U -include --pre-include -isystem -iquote -idirafter -L -l -o -x -ccbin --compiler-bindir "
    "-maxrregcount --maxrregcount -rdc --relocatable-device-code -MF -MT -MQ --threads -t -std".split()
)
# Options that search in order (joined to their value or not), where the first of two equal ones counts.
_FIRST_WINS = ("-I", "-isystem", "-iquote", "-idirafter", "-L")
_OPTIMISATION = re.compile(r"-O\w*")
_ABI_NEUTRAL = re.compile(r"-O\w*|-W[\w=-]*|-w|-g\w*")
# nvcc's target options: -arch/--gpu-architecture, -gencode/--generate-code, -code/--gpu-code.
_ARCH_OPTION = re.compile(r"(?:-arch|--gpu-architecture|-gencode|--generate-code|-code|--gpu-code)(?:[= ]|$)")
# Targets that mean "this GPU" or "every GPU": the job runs on the server's GPU, so its one target serves.
_ARCH_ANY = re.compile(r"(?:-arch|--gpu-architecture)[= ](?:native|all|all-major)")
_ARCH_LIST_ENTRY = re.compile(r"(\d+)\.(\d+)([af]?)(\+PTX)?")
_CUDA_CONTEXT_INCLUDE = re.compile(r"#\s*include\s*[<\"](?:ATen/cuda/|c10/cuda/)", re.MULTILINE)
_CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++", ".C")


@dataclass(frozen=True)
class RouteDecision:
    """The route a call tries first and, where that is not the fastest, why.

    `fast`: the split route's load_inline arguments (the glue unit's precompiled header flags not yet added),
    None on the torch route. `glue_header`: which precompiled header the glue unit reads first. `split`: the
    split's own refusal (its reason and the line of cuda_sources), from which `detail` is worded for a file.
    """

    route: str
    reason: str = ""
    detail: str = ""
    fast: dict[str, Any] | None = None
    glue_header: str = ""
    split: Declined | None = None
    # The functions' shared binding (split-bind), or why they are bound in the glue unit.
    binding: Bound | None = None
    binding_declined: str = ""

    @property
    def declined(self) -> str:
        """`code: text`, or "" where the fastest route is the one decided."""
        return f"{self.reason}: {self.detail}" if self.reason else ""


def _units(flags: list[str]) -> list[tuple[str, ...]]:
    """The flags as units: an option that takes its value as the next flag together with that value."""
    units, i = [], 0
    while i < len(flags):
        if flags[i] in _TAKES_VALUE and i + 1 < len(flags):
            units.append((flags[i], flags[i + 1]))
            i += 2
        else:
            units.append((flags[i],))
            i += 1
    return units


def _words(flag: str) -> list[str]:
    """One flag, or the words of a flag that holds several (`"-O3 --use_fast_math"`: torch's ninja file and its
    shell make two of them); a flag with quotes or escapes is left whole, as its shell words depend on them."""
    flag = flag.strip()
    if not flag:
        return []
    return flag.split() if not re.search(r"[\"'\\]", flag) else [flag]


def normalize_flags(flags: Any) -> list[str]:
    """A flag list without what means nothing: empty strings, surrounding whitespace, repeated flags.

    Of repeated flags the last is kept (the last -O counts), except for search paths (the first counts).
    A single string is taken as the flags it holds (torch would take its characters one by one).
    """
    if flags is None:
        return []
    if isinstance(flags, str):
        flags = shlex.split(flags)
    words = [w for f in flags for w in (_words(f) if isinstance(f, str) else [f])]
    units = _units(words)
    kept = []
    for i, unit in enumerate(units):
        first_wins = isinstance(unit[0], str) and unit[0].startswith(_FIRST_WINS)
        if unit not in (units[:i] if first_wins else units[i + 1 :]):
            kept.append(unit)
    return [flag for unit in kept for flag in unit]


def server_arch_flags(arch_list: str) -> list[str]:
    """nvcc flags for a TORCH_CUDA_ARCH_LIST value ("9.0", "8.0;9.0+PTX"), as torch makes them."""
    flags = []
    for major, minor, suffix, ptx in _ARCH_LIST_ENTRY.findall(arch_list):
        number = f"{major}{minor}{suffix}"
        flags.append(f"-gencode=arch=compute_{number},code=sm_{number}")
        if ptx:
            flags.append(f"-gencode=arch=compute_{number},code=compute_{number}")
    return flags


def normalize_cuda_flags(flags: Any, server_arch: str = "") -> list[str]:
    """nvcc's flags normalized, with the target the user asked for.

    torch drops the server's target (TORCH_CUDA_ARCH_LIST, `server_arch`) when any flag contains "arch". A
    real target option (-arch=sm_90, -gencode ...) replaces it, as the user asked; -arch=native/all/all-major
    become the server's target (the job runs on the server's GPU; `all` would compile for every GPU there
    is); a flag that only contains the word (`-Xcompiler -march=native`) gets the server's target back.
    """
    units = [u for u in _units(normalize_flags(flags)) if not _ARCH_ANY.match(" ".join(u))]
    flat = [flag for unit in units for flag in unit]
    targets = any(_ARCH_OPTION.match(" ".join(u)) for u in units)
    if not targets and any("arch" in f for f in flat):
        flat += server_arch_flags(server_arch)
    return flat


def normalize_arguments(arguments: dict[str, Any], *, server_arch: str = "", lineinfo: bool = False) -> dict[str, Any]:
    """A load_inline call's arguments with its flag lists normalized (what the cache key and the build use).

    `lineinfo`: nvcc also writes line tables (for profiling), where the call has CUDA sources.
    """
    normalized = dict(arguments)
    for name in FLAG_ARGUMENTS:
        normalized[name] = normalize_flags(normalized.get(name))
    cuda_flags = normalized["extra_cuda_cflags"]
    if lineinfo and _sources(normalized.get("cuda_sources")):
        cuda_flags = [*cuda_flags, "-lineinfo"]
    normalized["extra_cuda_cflags"] = normalize_cuda_flags(cuda_flags, server_arch)
    paths = normalized.get("extra_include_paths")
    paths = [paths] if isinstance(paths, str) else list(paths or [])
    normalized["extra_include_paths"] = list(dict.fromkeys(str(p).strip() for p in paths if str(p).strip()))
    # A request for torch's own precompiled header, which it writes into torch's install: the routes here
    # precompile their own, and the library is the same.
    normalized.pop("use_pch", None)
    return normalized


def _sources(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def glue_cflags(extra_cflags: list[str] | None) -> list[str]:
    """Flags of the host glue unit: the user's, at -O1 (it only calls into torch; -O3 doubles its build)."""
    return [*(f for f in extra_cflags or [] if not _OPTIMISATION.fullmatch(f)), "-O1"]


def fast_arguments(arguments: dict[str, Any], split_host: str, split_cuda: str) -> dict[str, Any]:
    """The split route's load_inline arguments (the glue header's flags are added per try)."""
    cpp = ["#include <torch/extension.h>", *_sources(arguments.get("cpp_sources")), split_host]
    fast = {
        "cpp_sources": cpp,
        "cuda_sources": split_cuda,
        "no_implicit_headers": True,
        "extra_cflags": glue_cflags(arguments.get("extra_cflags")),
    }
    return {**arguments, **fast}


def decide(arguments: dict[str, Any], *, first_line: int = 0) -> RouteDecision:
    """The first route to try for a (normalized) load_inline call, and why a faster one is declined.

    `first_line`: the line of the user's file where the CUDA source starts (0: unknown), for the reason's line.
    """
    if _sources(arguments.get("sycl_sources")):
        return RouteDecision(ROUTE_TORCH, SYCL, "SYCL sources are built as written")
    cuda = "\n".join(_sources(arguments.get("cuda_sources")))
    if not cuda.strip():
        return RouteDecision(ROUTE_TORCH, CPP_ONLY, "no CUDA sources: nvcc has no torch headers to skip")
    if arguments.get("with_cuda") is False:
        return RouteDecision(ROUTE_TORCH, SPLIT_DECLINED, "with_cuda=False is built as written")
    split = split_source(cuda)
    if isinstance(split, Declined):
        return RouteDecision(ROUTE_TORCH, SPLIT_DECLINED, split.text(first_line), split=split)
    fast = fast_arguments(arguments, split.host, split.cuda)
    glue = "\n".join(_sources(fast["cpp_sources"]))
    header = GLUE_LIGHT_CUDA if _CUDA_CONTEXT_INCLUDE.search(glue) else GLUE_LIGHT
    # split-bind is taken where the binding of these signatures has been made (the builder looks).
    shared = _binding(arguments, fast, glue)
    if isinstance(shared, str):
        return RouteDecision(ROUTE_SPLIT_LIGHT, fast=fast, glue_header=header, binding_declined=shared)
    return RouteDecision(ROUTE_SPLIT_LIGHT, fast=fast, glue_header=header, binding=shared)


def _binding(arguments: dict[str, Any], fast: dict[str, Any], glue: str) -> Bound | str:
    """The call's shared binding, or why its functions are bound in the glue unit."""
    # The binding object is compiled without the user's flags: the host unit may only have ones that leave
    # the ABI as it is (warnings, debug information).
    if any(not _ABI_NEUTRAL.fullmatch(flag) for flag in fast["extra_cflags"]):
        return "the glue unit has flags of its own"
    return bound(arguments, mask(glue))


def cache_key(arguments: dict[str, Any], environment: dict[str, str], include_files: dict[str, str]) -> str:
    """The build cache's key: everything that decides the library (normalized arguments, torch, CUDA, target).

    The caller names the folders whose files it keys by content (`include_files`: "@N/name" -> digest) "@N" in
    the arguments, in place of their paths: a module that writes its headers or sources into its own folder at
    import (a new folder per job) finds its build again, and one whose files change gets a new one. A folder
    named by its path (a system tree) stands for itself.
    """
    keyed = {k: v for k, v in arguments.items() if k not in NOT_IN_KEY}
    blob = json.dumps({"call": keyed, "env": environment, "includes": include_files}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def source_paths(arguments: dict[str, Any]) -> list[str]:
    """The source files of a `torch.utils.cpp_extension.load` call."""
    return [str(s) for s in _sources(arguments.get("sources"))]


def load_call(
    arguments: dict[str, Any], texts: dict[str, str], *, server_arch: str = "", lineinfo: bool = False
) -> tuple[dict[str, Any], RouteDecision]:
    """A `torch.utils.cpp_extension.load(name, sources, ...)` call: (its normalized arguments, the decision).

    The arguments are the load_inline call that builds the same library (the sources' text in place of their
    paths) where there is one, else the load call with its sources' text, flags normalized either way.
    `texts`: each source path's text. One C++ file and one CUDA file at most are taken as a load_inline
    call (torch compiles each file as its own unit; two of a kind joined in one unit could clash), and no
    standalone executable. The files' folders join the fast route's include path, so that their
    `#include "..."` of neighbouring headers still resolves from main.cpp and cuda.cu.
    """
    sources = source_paths(arguments)
    cpp = [s for s in sources if PurePath(s).suffix in _CPP_SUFFIXES]
    cuda = [s for s in sources if PurePath(s).suffix == ".cu"]
    why_not = ""
    if arguments.get("is_standalone"):
        why_not = "a standalone executable is built as written"
    elif len(cpp) + len(cuda) != len(sources) or len(cpp) > 1 or len(cuda) > 1 or not sources:
        names = ", ".join(PurePath(s).name for s in sources)
        why_not = f"load() of {len(sources)} files ({names}): one C++ and one .cu file at most are joined"
    if why_not:
        keyed = {**arguments, "sources": [texts[s] for s in sources]}
        keyed = normalize_arguments(keyed, server_arch=server_arch)
        if lineinfo and cuda:
            keyed["extra_cuda_cflags"] = normalize_cuda_flags([*keyed["extra_cuda_cflags"], "-lineinfo"], server_arch)
        return keyed, RouteDecision(ROUTE_TORCH, LOAD_FILES, why_not)
    inline = {
        "name": arguments["name"],
        "cpp_sources": [texts[s] for s in cpp],
        "cuda_sources": [texts[s] for s in cuda] or None,
        "functions": None,
        "extra_cflags": arguments.get("extra_cflags"),
        "extra_cuda_cflags": arguments.get("extra_cuda_cflags"),
        "extra_ldflags": arguments.get("extra_ldflags"),
        "extra_include_paths": arguments.get("extra_include_paths"),
        "with_cuda": arguments.get("with_cuda"),
        "is_python_module": arguments.get("is_python_module", True),
        # load() adds no header of its own.
        "no_implicit_headers": True,
    }
    keyed = normalize_arguments(inline, server_arch=server_arch, lineinfo=lineinfo)
    folders = list(dict.fromkeys(str(PurePath(s).parent) for s in sources))
    decision = decide({**keyed, "extra_include_paths": [*keyed["extra_include_paths"], *folders]})
    return keyed, decision
