"""Route every `torch.utils.cpp_extension.load_inline` call to the server's trusted builder.

Installed in the worker before the user's module is imported, so the module's
own `from torch.utils import cpp_extension` picks up the wrapper. The wrapper
adds `-lineinfo` for profiling (so ncu can map samples to CUDA source lines),
sends the call's arguments over the worker's control channel, and imports the
library the server answers with, from the shared cache that this jail sees
read-only. The builds themselves (profsvc.build.inline_builder) run outside
the job's process: a job can neither write another job's build nor load one the
server has not verified. Without a channel (the harness run by hand, a
benchmark) the same builder runs in this process, into `cache_root`.
"""

from __future__ import annotations

import inspect
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from profsvc.build.inline_builder import build_inline, inline_key, route_folder, torch_builder
from profsvc.worker.control import ControlChannel


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
    # Where the library lives, and where it was compiled (the folder its debug information names).
    build_directory: str = ""
    compiled_in: str = ""
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


class BuildError(RuntimeError):
    """A failed build, worded as torch words its own (the harness tells build errors apart by that prefix)."""


def _build_locally(arguments: dict[str, Any], key: str, cache_root: Path) -> dict[str, Any]:
    """The builder's work done in this process (no server): into the cache folder itself."""
    for route in ("torch", "split-light", "split"):
        folder = cache_root / route_folder(key, route)
        if (folder / f"{arguments['name']}.so").is_file():
            return {"ok": True, "cached": True, "route": route, "directory": str(folder), "built_in": str(folder)}
    outcome = build_inline(arguments, key, cache_root, cache_root, torch_builder())
    return {**outcome.as_dict(), "cached": False, "directory": outcome.built_in}


def _import(name: str, directory: str, arguments: dict[str, Any]) -> Any:
    from torch.utils import cpp_extension

    if arguments.get("is_standalone"):
        return cpp_extension._get_exec_path(name, directory)
    return cpp_extension._import_module_from_library(name, directory, bool(arguments.get("is_python_module", True)))


def install(
    cache_root: Path,
    *,
    lineinfo: bool,
    user_text: str,
    recorder: InlineRecorder,
    channel: ControlChannel | None = None,
) -> None:
    """Replace torch's load_inline with the wrapper (see the module's text)."""
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
        arguments = {k: v for k, v in bound.arguments.items() if k not in ("build_directory", "verbose")}
        if lineinfo and arguments.get("cuda_sources"):
            arguments["extra_cuda_cflags"] = [*(arguments.get("extra_cuda_cflags") or []), "-lineinfo"]
        name = arguments["name"]
        key = inline_key(arguments, environment)
        build = InlineBuild(
            name=name,
            cache_key=key,
            cached=False,
            cuda_first_line=_first_line(user_text, bound.arguments.get("cuda_sources")),
            cpp_first_line=_first_line(user_text, bound.arguments.get("cpp_sources")),
        )
        recorder.builds.append(build)
        start = time.monotonic()
        try:
            if channel is None:
                reply = _build_locally(arguments, key, cache_root)
            else:
                reply = channel.request("build", arguments=arguments, environment=environment)
            build.route = str(reply.get("route", ""))
            build.fallback_seconds = float(reply.get("fallback_seconds", 0.0))
            if not reply.get("ok"):
                raise BuildError(f"Error building extension '{name}': {reply.get('log') or reply.get('error')}")
            build.cached = bool(reply.get("cached"))
            build.build_directory = str(reply["directory"])
            build.compiled_in = str(reply.get("built_in") or reply["directory"])
            return _import(name, build.build_directory, arguments)
        finally:
            build.seconds = time.monotonic() - start

    load_inline.__wrapped__ = original  # type: ignore[attr-defined]
    cpp_extension.load_inline = load_inline
