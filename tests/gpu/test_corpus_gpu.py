"""The build-form corpus on a GPU: every candidate builds through profsvc's wrapper on the route its manifest states,
and its ModelNew matches its Model.

Each file runs in a fresh process (its extensions loaded once, as in a job), several at once; the server's glue
headers are precompiled first, as a running server has them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"
MANIFEST = tomllib.loads((CORPUS / "manifest.toml").read_text())["file"]
# Outputs compared as the correctness check compares them: |candidate - reference| <= atol + rtol * |reference|.
TOLERANCES = {"float32": (1e-3, 1e-3), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2), "int64": (0, 0)}

CHECK = """
import importlib.util, json, sys
from pathlib import Path
import torch
from profsvc.worker import inline_cache
from profsvc.worker.prebuild import prebuild
path, cache = Path(sys.argv[1]), Path(sys.argv[2])
tolerances = json.loads(sys.argv[3])
recorder = inline_cache.InlineRecorder()
inline_cache.install(cache, lineinfo=True, user_text=path.read_text(), recorder=recorder)
spec = importlib.util.spec_from_file_location(path.stem, path)
module = importlib.util.module_from_spec(spec)
sys.modules[path.stem] = module
spec.loader.exec_module(module)
prebuild(module)
init = module.get_init_inputs()
torch.manual_seed(0)
reference = module.Model(*init).cuda()
torch.manual_seed(0)
candidate = module.ModelNew(*init).cuda()
torch.manual_seed(1)
inputs = module.get_inputs()
with torch.no_grad():
    expected = reference(*inputs)
    got = candidate(*inputs)
torch.cuda.synchronize()
atol, rtol = tolerances[str(expected.dtype).removeprefix("torch.")]
same_shape = tuple(got.shape) == tuple(expected.shape) and got.dtype == expected.dtype
diff = (got.double() - expected.double()).abs()
bad = int((diff > atol + rtol * expected.double().abs()).sum()) if same_shape else -1
routes = [b["route"] for b in recorder.as_dicts()]
reasons = [f"{b['route_reason']}: {b['route_detail']}" for b in recorder.as_dicts() if b["route_reason"]]
print(json.dumps({"routes": routes, "reasons": reasons, "shape_ok": same_shape, "bad": bad,
                  "max_abs_diff": float(diff.max()) if same_shape else None}))
"""

PCH = """
import sys
from pathlib import Path
from profsvc.worker import inline_cache
print(inline_cache.prepare_server_headers(Path(sys.argv[1])))
"""


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "client"), os.environ.get("PYTHONPATH", "")]),
    }


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every corpus file built and checked, 8 at a time: file name -> outcome (or error)."""
    server = tmp_path_factory.mktemp("server-cache")
    env = _env()
    subprocess.run([sys.executable, "-c", PCH, str(server)], env=env, check=True, timeout=300)

    def one(entry: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        cache = tmp_path_factory.mktemp(entry["name"].removesuffix(".py"))
        (cache / "pch").symlink_to(server / "pch")
        command = [sys.executable, "-c", CHECK, str(CORPUS / entry["name"]), str(cache), json.dumps(TOLERANCES)]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=400, check=False)
        if done.returncode != 0:
            return entry["name"], {"error": done.stderr[-3000:]}
        return entry["name"], json.loads(done.stdout.strip().splitlines()[-1])

    with ThreadPoolExecutor(8) as pool:
        return dict(pool.map(one, MANIFEST))


@pytest.mark.gpu
@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: e["name"].removesuffix(".py"))
def test_corpus_candidate_builds_on_its_route_and_matches_its_model(entry, outcomes):
    outcome = outcomes[entry["name"]]
    assert "error" not in outcome, outcome.get("error")
    assert outcome["routes"] == [call["route"] for call in entry.get("call", [])], outcome["reasons"]
    assert outcome["shape_ok"]
    assert outcome["bad"] == 0, f"{outcome['bad']} elements out of tolerance (max |diff| {outcome['max_abs_diff']})"
