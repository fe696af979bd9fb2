"""profsvc client: typed results, the gRPC `ProfilerClient` and the `profsvc` CLI.

The names below load on first use, so that importing `profsvc_client.models` alone does not import grpc: a
process that reads reports (ncu_report) must not load grpc first (`IRange.actions_by_nvtx` then crashes it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profsvc_client.client import ProfilerClient
    from profsvc_client.errors import ProfsvcError, Reason
    from profsvc_client.models import (
        Capabilities,
        CompileResult,
        KernelFilter,
        KernelResult,
        KernelSource,
        ProfileResult,
        Progress,
        SourceFile,
        SourceKind,
    )

__all__ = [
    "Capabilities",
    "CompileResult",
    "KernelFilter",
    "KernelResult",
    "KernelSource",
    "ProfileResult",
    "ProfilerClient",
    "ProfsvcError",
    "Progress",
    "Reason",
    "SourceFile",
    "SourceKind",
]
_MODULE_OF = {
    **dict.fromkeys(__all__, "profsvc_client.models"),
    "ProfilerClient": "profsvc_client.client",
    "ProfsvcError": "profsvc_client.errors",
    "Reason": "profsvc_client.errors",
}


def __getattr__(name: str) -> Any:
    """Load an exported name from its module on first use."""
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'profsvc_client' has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE_OF[name]), name)
