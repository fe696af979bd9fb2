"""profsvc client: the gRPC `ProfilerClient`, its asyncio twin, the `profsvc` CLI, MCP tools and batches.

The typed results and errors are the contract's (profsvc_contract), exported here too. The names below load on
first use, so that importing this package does not import grpc (nor pandas, for `read_results`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profsvc_client.aio import AsyncProfilerClient
    from profsvc_client.batch import read_results
    from profsvc_client.client import ProfilerClient, load_source
    from profsvc_contract.errors import ProfsvcError, Reason
    from profsvc_contract.models import (
        Capabilities,
        CompileResult,
        KernelFilter,
        KernelResult,
        KernelSource,
        ProfileResult,
        Progress,
        RepeatResult,
        SourceFile,
        SourceKind,
    )

__all__ = [
    "AsyncProfilerClient",
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
    "RepeatResult",
    "SourceFile",
    "SourceKind",
    "load_source",
    "read_results",
]
_MODULE_OF = {
    **dict.fromkeys(__all__, "profsvc_contract.models"),
    "ProfilerClient": "profsvc_client.client",
    "AsyncProfilerClient": "profsvc_client.aio",
    "load_source": "profsvc_client.client",
    "read_results": "profsvc_client.batch",
    "ProfsvcError": "profsvc_contract.errors",
    "Reason": "profsvc_contract.errors",
}


def __getattr__(name: str) -> Any:
    """Load an exported name from its module on first use."""
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'profsvc_client' has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE_OF[name]), name)
