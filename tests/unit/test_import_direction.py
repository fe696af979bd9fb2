"""The import direction of docs/architecture.md: pure layers import nothing of the server, the client nothing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PURE = ("metrics", "rules", "report")
SERVER_SIDE = ("server", "scheduler", "build", "worker", "ncu")


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", PURE)
def test_a_pure_layer_imports_nothing_of_the_server(layer):
    forbidden = tuple(f"profsvc.{part}" for part in SERVER_SIDE)
    found = {
        f"{path.relative_to(REPO)}: {name}"
        for path in (REPO / "profsvc" / layer).rglob("*.py")
        for name in _imports(path)
        if name.startswith(forbidden)
    }
    assert not found


def test_the_client_imports_nothing_of_the_server():
    found = {
        f"{path.relative_to(REPO)}: {name}"
        for path in (REPO / "client" / "profsvc_client").rglob("*.py")
        for name in _imports(path)
        if name == "profsvc" or name.startswith("profsvc.")
    }
    # Only `profsvc serve` loads the server, inside the command, where the server package is installed.
    assert found <= {
        "client/profsvc_client/cli.py: profsvc.config",
        "client/profsvc_client/cli.py: profsvc.server.app",
        "client/profsvc_client/cli.py: profsvc.telemetry",
    }
