"""The import direction of docs/architecture.md: client -> contract <- server, and nothing else crosses.

The contract (profsvc_contract) imports neither side; the client (profsvc_client) imports the contract and never
the server; the server (profsvc) imports the contract and never the client; inside the server, the pure layers
import nothing of the parts that run processes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {
    "profsvc_contract": REPO / "contract" / "profsvc_contract",
    "profsvc_client": REPO / "client" / "profsvc_client",
    "profsvc": REPO / "profsvc",
}
# What each package may not import (a name or any module under it).
FORBIDDEN = {
    "profsvc_contract": ("profsvc", "profsvc_client"),
    "profsvc_client": ("profsvc",),
    "profsvc": ("profsvc_client",),
}
PURE = ("metrics", "rules", "report", "staticcheck")
SERVER_SIDE = ("server", "scheduler", "build", "worker", "ncu", "jail", "kinds", "cluster")


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _crossing(root: Path, forbidden: tuple[str, ...]) -> set[str]:
    return {
        f"{path.relative_to(REPO)}: {name}"
        for path in root.rglob("*.py")
        for name in _imports(path)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    }


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_a_package_imports_only_across_the_contract(package):
    assert not _crossing(PACKAGES[package], FORBIDDEN[package])


@pytest.mark.parametrize("layer", PURE)
def test_a_pure_layer_imports_nothing_of_the_server(layer):
    assert not _crossing(REPO / "profsvc" / layer, tuple(f"profsvc.{part}" for part in SERVER_SIDE))


def test_the_scheduler_core_imports_none_of_the_paths_built_on_it():
    # The paths (profiling, reading, finishing, judging, evaluation) stand on the core; the core knows none of
    # them (docs/architecture.md), so a path changes without touching the queue, the lease or the lifecycle.
    scheduler = REPO / "profsvc" / "scheduler"
    core = "profsvc.scheduler.scheduler"
    on_top = {f"profsvc.scheduler.{path.stem}" for path in scheduler.glob("*.py") if core in _imports(path)}
    assert {"profsvc.scheduler.profiling", "profsvc.scheduler.reading", "profsvc.scheduler.judging"} <= on_top
    assert not _imports(scheduler / "scheduler.py") & on_top


def test_the_rule_can_fail():
    # The check reads real imports: a module that imports across is found.
    assert _crossing(REPO / "client" / "profsvc_client", ("profsvc_contract",))
