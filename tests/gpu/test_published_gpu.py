"""`profsvc batch` over published reference problems (tests/problems) on a GPU: each profiles its reference.

By default a spread of the corpus's problems (every third file of level1/, every composition of level2/);
PROFSVC_PUBLISHED=all runs every one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from profsvc_client.batch import read_results

pytestmark = pytest.mark.gpu
CORPUS = Path(__file__).parents[1] / "problems"
ALL = sorted(CORPUS.rglob("*.py"))


def _chosen() -> list[Path]:
    if os.environ.get("PROFSVC_PUBLISHED") == "all":
        return ALL
    level1 = [p for p in ALL if p.parent.name == "level1"]
    return level1[::3] + [p for p in ALL if p.parent.name == "level2"]


def test_a_batch_of_published_problems_profiles_every_reference(served, tmp_path):
    chosen = _chosen()
    assert len(chosen) >= 20
    folder = tmp_path / "problems"
    for path in chosen:
        (folder / path.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, folder / path.parent.name / path.name)
    out = tmp_path / "published.parquet"
    command = [sys.executable, "-m", "profsvc_client.cli", "batch", str(folder), "--out", str(out)]
    # At the CLI's default concurrency, as a researcher runs it.
    done = subprocess.run([*command, "--server", served], capture_output=True, text=True, timeout=1800)
    print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "")
    frame = read_results(out)
    failed = frame[frame["status"] != "ok"][["problem", "status", "error"]].drop_duplicates()
    assert failed.empty, failed.to_string()
    assert done.returncode == 0, done.stderr
    names = {f"{p.parent.name}/{p.name}" for p in chosen}
    assert set(frame["problem"]) == names
    # Every row a profiled kernel of the problem's reference, in the harness's range of profsvc's own domain.
    assert set(frame["target"]) == {"reference"}
    assert (frame["kernel"].str.len() > 0).all() and (frame["duration"] > 0).all()
    assert frame.attrs["units"]["duration"] == "ns"
    for ranges in frame["nvtx"]:
        assert {"domain": "profsvc", "push_pop": ["profsvc"], "start_end": []} in json.loads(ranges)
    kernels = frame.groupby("problem")["kernel"].count()
    print(f"{len(names)} published problems, {len(frame)} kernels; most in one call: {kernels.max()}")
