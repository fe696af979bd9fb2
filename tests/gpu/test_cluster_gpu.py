"""`profsvc batch --cluster` on a GPU host: 20 distinct problems through a one-GPU local Dask cluster, against
today's batch through one `profsvc serve`, in the same run; with two GPUs, the same through two.

Each batch starts cold (a state folder of its own: the same builds to make) and keeps four problems in flight
(`--concurrency 4` against the server, `--per-gpu 4` on the cluster). Figures: jobs per minute, and how much of
the batch's wall a profile held the GPU (the records' ncu seconds over the wall; one profile at a time per GPU).
They go to PROFSVC_CLUSTER_RESULTS (a folder; default the test's tmp folder) as cluster-throughput.json and
print as one line per batch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_fastpath import make_problems
from profsvc_client.batch import BatchSummary, checkpoint_path, discover, profile_with, read_checkpoint, run_batch
from profsvc_client.client import ProfilerClient
from tests.conftest import free_port, wait_healthy

pytestmark = pytest.mark.gpu
distributed = pytest.importorskip("distributed", reason="carry the cluster wheels (README: Clusters)")

from profsvc_client.cluster_batch import run_on_cluster  # noqa: E402
from profsvc_client.cluster_local import local_cluster, visible_devices  # noqa: E402

PROBLEMS = 20
IN_FLIGHT = 4
RESULTS: dict[str, Any] = {}


def _figures(label: str, summary: BatchSummary, out: Path, wall: float, **extra: Any) -> dict[str, Any]:
    records = list(read_checkpoint(checkpoint_path(out)).values())
    held = sum(record["ncu_seconds"] or 0.0 for record in records)
    figures = {
        "problems": summary.total,
        "ok": summary.ok,
        "wall_s": round(wall, 2),
        "jobs_per_min": round(60 * summary.total / wall, 2),
        "gpu_held_fraction": round(held / wall, 3),
        "workers": sorted({record["worker"] for record in records}),
        **extra,
    }
    RESULTS[label] = figures
    folder = Path(os.environ.get("PROFSVC_CLUSTER_RESULTS") or out.parent)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cluster-throughput.json").write_text(json.dumps(RESULTS, indent=2) + "\n")
    print(f"\n{label}: {json.dumps(figures)}")
    return figures


def _server_batch(tmp_path: Path, problems: list) -> dict[str, Any]:
    port = free_port()
    command = [sys.executable, "-m", "profsvc_client.cli", "serve", "--port", str(port)]
    with (tmp_path / "server.log").open("wb") as log:
        server = subprocess.Popen([*command, "--state-dir", str(tmp_path / "server-state")], stdout=log, stderr=log)
    try:
        wait_healthy(f"127.0.0.1:{port}", timeout=120)
        out = tmp_path / "server.parquet"
        start = time.monotonic()
        with ProfilerClient(f"127.0.0.1:{port}", timeout=600) as client:
            summary = run_batch(problems, out, profile_with(client), concurrency=IN_FLIGHT)
        return _figures("one server", summary, out, time.monotonic() - start)
    finally:
        server.terminate()
        server.wait(timeout=60)


def _cluster_batch(tmp_path: Path, problems: list, gpus: int) -> dict[str, Any]:
    started = time.monotonic()
    with local_cluster(gpus=gpus, state_dir=tmp_path / f"cluster{gpus}-state") as cluster:
        with distributed.Client(cluster) as dask:
            dask.wait_for_workers(len(cluster.workers))
            up = time.monotonic() - started
            out = tmp_path / f"cluster{gpus}.parquet"
            start = time.monotonic()
            summary = run_on_cluster(problems, out, dask, per_gpu=IN_FLIGHT)
            wall = time.monotonic() - start
    return _figures(f"cluster, {gpus} GPU", summary, out, wall, cluster_start_s=round(up, 2))


@pytest.fixture
def problems(tmp_path: Path) -> list:
    found = discover(make_problems(tmp_path / "problems", PROBLEMS)[0].parent)
    assert len(found) == PROBLEMS
    return found


def test_one_gpu_cluster_against_one_server(problems, tmp_path):
    server = _server_batch(tmp_path, problems)
    cluster = _cluster_batch(tmp_path, problems, 1)
    assert server["ok"] == cluster["ok"] == PROBLEMS
    assert len(cluster["workers"]) == 1  # the one GPU worker did every profile
    # The GPU held by a profile most of the batch's wall, and Dask's dispatch costs little against the server.
    assert cluster["gpu_held_fraction"] > 0.5, cluster
    assert cluster["jobs_per_min"] > 0.8 * server["jobs_per_min"], (cluster, server)


@pytest.mark.skipif(len(visible_devices()) < 2, reason="needs two GPUs")
def test_two_gpus_about_double_one(problems, tmp_path):
    one = _cluster_batch(tmp_path, problems, 1)
    two = _cluster_batch(tmp_path, problems, 2)
    assert one["ok"] == two["ok"] == PROBLEMS
    assert len(two["workers"]) == 2  # both GPUs profiled
    assert two["jobs_per_min"] > 1.6 * one["jobs_per_min"], (two, one)
