"""profsvc client: typed results, the gRPC `ProfilerClient` and the `profsvc` CLI."""

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
