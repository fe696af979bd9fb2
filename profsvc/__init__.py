"""profsvc: a GPU kernel profiling service built on NVIDIA Nsight Compute."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "read_results"]


def __getattr__(name: str) -> Any:
    # `profsvc.read_results` loads the batch reader (and pandas) only when asked for, so the pure
    # layers (metrics, rules, staticcheck) import nothing of the client or gRPC.
    if name == "read_results":
        from profsvc_client.batch import read_results

        return read_results
    raise AttributeError(f"module 'profsvc' has no attribute {name!r}")
