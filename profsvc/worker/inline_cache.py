"""Route every `torch.utils.cpp_extension.load_inline` call into the content-addressed build cache.

Installed in the worker before the user's module is imported, so the module's
own `from torch.utils.cpp_extension import load_inline` picks up the wrapper.
The wrapper only chooses the build directory (by the hash of everything that
decides the build) and, for profiling, adds `-lineinfo` so ncu can map samples
to CUDA source lines; torch still does the build.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

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
        arguments = bound.arguments
        if lineinfo and arguments.get("cuda_sources"):
            arguments["extra_cuda_cflags"] = [*(arguments.get("extra_cuda_cflags") or []), "-lineinfo"]
        keyed = {k: v for k, v in arguments.items() if k not in _NOT_IN_KEY}
        blob = json.dumps({"call": keyed, "env": environment}, sort_keys=True, default=str)
        key = hashlib.sha256(blob.encode()).hexdigest()[:32]
        directory = cache_root / key
        directory.mkdir(parents=True, exist_ok=True)
        name = arguments["name"]
        cached = any(directory.glob(f"{name}*.so"))
        arguments["build_directory"] = str(directory)
        arguments["verbose"] = False
        build = InlineBuild(
            name=name,
            cache_key=key,
            cached=cached,
            cuda_first_line=_first_line(user_text, arguments.get("cuda_sources")),
            cpp_first_line=_first_line(user_text, arguments.get("cpp_sources")),
            build_directory=str(directory),
        )
        recorder.builds.append(build)
        start = time.monotonic()
        try:
            return original(*bound.args, **bound.kwargs)
        finally:
            build.seconds = time.monotonic() - start

    cpp_extension.load_inline = load_inline
