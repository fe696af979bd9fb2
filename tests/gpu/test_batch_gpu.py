"""`profsvc batch` on a GPU: 20 real profiles, the batch process killed midway, resumed, nothing profiled twice."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter

import pytest

from profsvc_client.batch import checkpoint_path, read_checkpoint, read_results
from tests.conftest import FIXTURES

pytestmark = pytest.mark.gpu
ARCHETYPES = sorted((FIXTURES.parent.parent / "examples" / "archetypes").glob("*.cu"))
KILL_AFTER = 5


def _batch(manifest, out, served) -> list[str]:
    command = ["batch", str(manifest), "--out", str(out), "--server", served, "--concurrency", "4"]
    # The basic set (about 10 passes) keeps 20 profiles short; it has the duration.
    return [sys.executable, "-m", "profsvc_client.cli", *command, "--metric-set", "basic"]


def _complete_lines(path) -> list[dict]:
    # A kill can cut the last line short; only whole lines are finished problems.
    return [json.loads(line) for line in path.read_text().splitlines(keepends=True) if line.endswith("\n")]


def test_batch_killed_and_resumed(served, tmp_path):
    assert len(ARCHETYPES) == 10
    # The same ten programs twice, as two folders: a problem is its path, content, metric set and filter.
    lines = []
    for copy in ("first", "again"):
        (tmp_path / copy).mkdir()
        for program in ARCHETYPES:
            shutil.copy(program, tmp_path / copy / program.name)
            tags = {"archetype": program.stem, "copy": copy}
            lines.append(json.dumps({"file": f"{copy}/{program.name}", "tags": tags}))
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    out = tmp_path / "results" / "archetypes.parquet"
    checkpoint = checkpoint_path(out)

    process = subprocess.Popen(_batch(manifest, out, served), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 900
    while not (checkpoint.exists() and len(_complete_lines(checkpoint)) >= KILL_AFTER):
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "the batch finished no problem in time"
        time.sleep(0.5)
    process.kill()
    process.wait(timeout=60)
    assert not out.exists()
    before = {record["key"] for record in _complete_lines(checkpoint)}
    assert KILL_AFTER <= len(before) < 20

    rerun = subprocess.run(_batch(manifest, out, served), capture_output=True, text=True, timeout=1800)
    assert rerun.returncode == 0, rerun.stderr
    assert f"20 problems ({len(before)} from the checkpoint, {20 - len(before)} run): 20 ok" in rerun.stderr

    records = _complete_lines(checkpoint)
    assert len(records) == 20 and len({r["key"] for r in records}) == 20  # no problem profiled twice
    assert len(read_checkpoint(checkpoint)) == 20

    frame = read_results(out)
    assert frame["problem"].nunique() == 20 and set(frame["status"]) == {"ok"}
    assert str(frame["duration"].dtype) == "float64" and (frame["duration"] > 0).all()
    assert frame.attrs["units"]["duration"] == "ns"
    # Each archetype runs its kernel under test once inside its NVTX range: one row per problem.
    assert (frame.groupby("problem").size() == 1).all()
    tags = [json.loads(t) for t in frame["tags"]]
    assert {t["archetype"] for t in tags} == {p.stem for p in ARCHETYPES}
    assert Counter(t["copy"] for t in tags) == {"first": 10, "again": 10}
    assert (frame["wall_seconds"] > 0).all() and (frame["ncu_seconds"] > 0).all()
    # Each row's provenance: the set ncu collected, the driver it ran under, the server that answered.
    assert set(frame["metric_set"]) == {"basic"} and frame["driver_version"].str.len().min() > 0
    assert set(frame["host"]) == {socket.gethostname()} and set(frame["ncu_version"]) != {""}
