"""The client package's public names: exactly these, each importable, each documented."""

from __future__ import annotations

import importlib

import profsvc_client

EXPORTED = [
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


def test_the_client_exports_exactly_its_public_names():
    assert profsvc_client.__all__ == EXPORTED


def test_every_exported_name_loads_and_says_what_it_is():
    for name in EXPORTED:
        value = getattr(profsvc_client, name)
        assert value.__doc__, f"profsvc_client.{name} has no docstring"


def test_the_contract_modules_load_without_the_client_or_grpc():
    # A process that reads reports imports the models: grpc must not come with them.
    import subprocess
    import sys

    code = (
        "import sys; import profsvc_contract.models, profsvc_contract.units; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'profsvc_client', 'profsvc')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]", loaded
    assert importlib.import_module("profsvc_contract.errors").ProfsvcError
