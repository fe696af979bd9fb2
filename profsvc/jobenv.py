"""The scrubbed environment every job process runs with.

User code sees only what it needs to build and run: no server secrets, no
credentials from the server's environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# Variables passed through from the server's environment when set.
_PASS_THROUGH = (
    "PATH",
    "LANG",
    "LC_ALL",
    "PYTHONPATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_LIBRARY_PATH",
    "PROFSVC_NCU_REPORT_PATH",
)


def torch_arch_list(cuda_arch: str) -> str:
    """TORCH_CUDA_ARCH_LIST of one nvcc target ("sm_90" -> "9.0"): torch's default builds for several."""
    return cuda_arch.removeprefix("sm_")[:-1] + "." + cuda_arch[-1] if cuda_arch else ""


def job_environment(
    workspace: Path, *, gpu_index: int | None, cuda_arch: str = "", extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Environment for a job process running in `workspace` on GPU `gpu_index` (None: no GPU)."""
    env = {name: os.environ[name] for name in _PASS_THROUGH if name in os.environ}
    tmp = workspace / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(workspace),
        TMPDIR=str(tmp),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        CUDA_VISIBLE_DEVICES="" if gpu_index is None else str(gpu_index),
    )
    if cuda_arch:
        env["TORCH_CUDA_ARCH_LIST"] = torch_arch_list(cuda_arch)
    env.update(extra or {})
    return env
