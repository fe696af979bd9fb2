"""The build-form corpus on a GPU, through a server as users send it: every candidate compiles on the route its
manifest states, and passes the correctness check against its Model.

One server (warm workers, so it makes its precompiled glue headers at start; jailed) takes every file, 8 at a
time: Compile gives each build's route and reason, CheckCorrectness runs the candidate against its reference in
the judge (the service's own tolerances by dtype).
"""

from __future__ import annotations

import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from profsvc.config import ServerConfig
from profsvc.server.app import EmbeddedServer
from profsvc_client.client import ProfilerClient
from profsvc_contract.models import KernelSource, SourceFile

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"
MANIFEST = tomllib.loads((CORPUS / "manifest.toml").read_text())["file"]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every corpus file compiled and checked through one server: file name -> outcome."""
    embedded = EmbeddedServer(ServerConfig(state_dir=tmp_path_factory.mktemp("state")), keep_warm=True)
    target = embedded.start()

    def one(entry: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        path = CORPUS / entry["name"]
        source = KernelSource(main=SourceFile(name=path.name, content=path.read_bytes()))
        with ProfilerClient(target, timeout=600) as client:
            compiled = client.compile(source)
            if not compiled.ok:
                return entry["name"], {"error": f"{compiled.diagnostics}\n{compiled.log[-3000:]}"}
            checked = client.check_correctness(source)
        return entry["name"], {
            "routes": [unit.route for unit in compiled.units],
            "reasons": [f"{u.route_reason}: {u.route_detail}" for u in compiled.units if u.route_reason],
            "correct": checked.ok,
            "message": checked.message or checked.error.message,
            "max_abs_error": checked.max_abs_error,
        }

    try:
        with ThreadPoolExecutor(8) as pool:
            yield dict(pool.map(one, MANIFEST))
    finally:
        embedded.stop()


@pytest.mark.gpu
@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: e["name"].removesuffix(".py"))
def test_corpus_candidate_builds_on_its_route_and_matches_its_model(entry, outcomes):
    outcome = outcomes[entry["name"]]
    assert "error" not in outcome, outcome.get("error")
    # split-light's build takes split-bind once the server has made the shared binding of its signatures.
    taken = [route.replace("split-bind", "split-light") for route in outcome["routes"]]
    assert taken == [call["route"] for call in entry.get("call", [])], outcome["reasons"]
    assert outcome["correct"], f"{outcome['message']} (max |diff| {outcome['max_abs_error']})"
