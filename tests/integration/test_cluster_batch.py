"""`profsvc batch --cluster`: a real Dask cluster on this host, its workers each running a profsvc service.

Two workers declare a GPU (`GPU=1`, CUDA_VISIBLE_DEVICES 0 and 1; without a GPU here their services answer a
profile with NO_GPU), one declares none. The jobs are CPU work on committed files: analyze of the real H200
reports in tests/fixtures/, the static check of the corpus in tests/staticcheck_corpus/. Things are ordered by
events: a worker plugin kills its worker as its first task starts; a batch client blocks in its record hook,
after a set event, until it is killed.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from profsvc_client.batch import checkpoint_path, discover, read_checkpoint, read_results
from tests.conftest import FIXTURES, HAS_GPU, first_action, run_cli

pytest.importorskip("distributed", reason="clusters need Dask: pip install './client[cluster]'")
pytest.importorskip("pyarrow", reason="batch results need pandas and pyarrow")

from distributed import Client, WorkerPlugin

from profsvc_client.cluster_batch import run_on_cluster
from profsvc_client.cluster_local import local_cluster

CORPUS = FIXTURES.parent / "staticcheck_corpus"
REPORTS = sorted(FIXTURES.glob("*.ncu-rep"))
LINTED = sorted((CORPUS / "gaming").glob("*.py"))[:4] + sorted((CORPUS / "honest").glob("*.py"))[:3]
# What a problem's own outcome may be here (anything else is the cluster's failure): gaming candidates fail lint.
OWN_OUTCOMES = {"ok", "static_check_failed"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Client]]:
    state = tmp_path_factory.mktemp("cluster-state")
    with (
        local_cluster(devices=["0", "1"], cpu_workers=1, warm_workers=False, state_dir=state) as spec,
        Client(spec) as dask,
    ):
        dask.wait_for_workers(3)
        yield spec, dask


def _workers(dask: Client) -> dict[str, dict[str, Any]]:
    """The workers by name."""
    return {info["name"]: info | {"address": address} for address, info in dask.scheduler_info()["workers"].items()}


def _folder(tmp_path: Path, files: list[Path]) -> Path:
    folder = tmp_path / "input"
    folder.mkdir(exist_ok=True)
    for path in files:
        shutil.copy(path, folder / path.name)
    return folder


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_batch_of_analyze_lint_and_profile_jobs(cluster, tmp_path, reader):
    _, dask = cluster
    problems = discover(_folder(tmp_path, REPORTS + LINTED), task="lint")
    (tmp_path / "gpu").mkdir()
    shutil.copy(FIXTURES / "seed47.py", tmp_path / "gpu" / "seed47.py")
    problems += discover(tmp_path / "gpu")
    assert [p.task for p in problems].count("analyze") == len(REPORTS) and problems[-1].task == "profile"
    out = tmp_path / "results.parquet"
    summary = run_on_cluster(problems, out, dask)

    records = _lines(checkpoint_path(out))
    assert sorted(r["problem"] for r in records) == sorted(p.name for p in problems)  # each once
    assert summary.total == len(problems) and summary.resumed == 0
    workers = _workers(dask)
    gpu_workers = {workers["gpu0"]["address"], workers["gpu1"]["address"]}
    by_name = {r["problem"]: r for r in records}

    profile = by_name["seed47.py"]
    assert profile["task"] == "profile" and profile["worker"] in gpu_workers  # placed by the GPU resource
    if not HAS_GPU:
        assert profile["status"] == "NO_GPU"

    frame = read_results(out)
    for report in REPORTS:
        row = by_name[report.name]
        assert row["task"] == "analyze" and row["status"] == "ok", row["error"]
        first = frame[(frame["problem"] == report.name)].iloc[0]
        # The figure as NVIDIA's reader reads it from the same report.
        action = first_action(reader, report)
        assert first["duration"] == action.metric_by_name("gpu__time_duration.sum").value()
        assert first["kernel"] == action.name()
    for path in LINTED:
        row = by_name[path.name]
        assert row["task"] == "lint" and row["kernels"] == []
        if path.parent.name == "honest":
            assert row["status"] == "ok", row["error"]
        else:
            # The corpus names each gaming file after the rule that must catch it.
            assert path.stem.split("__")[0] in {f["rule_id"] for f in row["findings"]}
    assert set(frame["worker"]) <= {info["address"] for info in workers.values()}
    lint_rows = frame[frame["task"] == "lint"]
    assert all(isinstance(json.loads(f), list) for f in lint_rows["findings"])


class KillOnFirstTask(WorkerPlugin):
    """Kills its worker's process (SIGKILL, as a lost node) as the first task starts on the worker named `victim`;
    the marker file, created once, holds the dead worker's address and keeps a restarted worker alive."""

    name = "kill-on-first-task"

    def __init__(self, victim: str, marker: str) -> None:
        self.victim = victim
        self.marker = marker

    def setup(self, worker: Any) -> None:
        self.worker = worker

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        if finish != "executing" or self.worker.name != self.victim:
            return
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, self.worker.address.encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_killed_mid_batch_loses_nothing_and_writes_nothing_twice(cluster, tmp_path):
    _, dask = cluster
    problems = discover(_folder(tmp_path, REPORTS + LINTED), task="lint")
    marker = tmp_path / "killed"
    dask.register_plugin(KillOnFirstTask("gpu1", str(marker)))
    try:
        summary = run_on_cluster(problems, tmp_path / "results.parquet", dask)
    finally:
        dask.unregister_worker_plugin(KillOnFirstTask.name)
    killed = marker.read_text()  # the worker did die, holding a task
    records = _lines(checkpoint_path(tmp_path / "results.parquet"))
    assert len(records) == len(problems) and len({r["key"] for r in records}) == len(problems)
    assert {r["status"] for r in records} <= OWN_OUTCOMES, [(r["problem"], r["status"], r["error"]) for r in records]
    assert summary.ok == len(problems) - summary.failed["static_check_failed"]
    assert killed not in {r["worker"] for r in records}  # its task was done again elsewhere
    dask.wait_for_workers(3)  # its nanny restarted it


def _batch_until_killed(address: str, problems: list, out: Path, reached: Any, after: int) -> None:
    """A batch client that, after `after` records, says so and waits to be killed."""
    count = 0

    def hook(record: dict[str, Any]) -> None:
        nonlocal count
        count += 1
        if count == after:
            reached.set()
            threading.Event().wait()

    with Client(address) as dask:
        run_on_cluster(problems, out, dask, on_record=hook)


def test_resume_after_the_client_is_killed(cluster, tmp_path):
    spec, dask = cluster
    problems = discover(_folder(tmp_path, REPORTS + LINTED), task="lint")
    out = tmp_path / "results.parquet"
    context = multiprocessing.get_context("spawn")
    reached = context.Event()
    client = context.Process(target=_batch_until_killed, args=(spec.scheduler_address, problems, out, reached, 4))
    client.start()
    try:
        assert reached.wait(timeout=600), "the batch client finished no 4 problems"
    finally:
        client.kill()
        client.join()
    assert client.exitcode == -signal.SIGKILL
    checkpoint = checkpoint_path(out)
    first = _lines(checkpoint)
    assert len(first) == 4 and not out.exists()

    summary = run_on_cluster(problems, out, dask)
    assert (summary.total, summary.resumed) == (len(problems), 4)
    records = _lines(checkpoint)
    assert {r["status"] for r in records} <= OWN_OUTCOMES
    assert records[:4] == first and len({r["key"] for r in records}) == len(records) == len(problems)
    assert len(read_checkpoint(checkpoint)) == len(problems)
    assert read_results(out)["problem"].nunique() == len(problems)


def test_cli_cluster_local_and_batch_against_it(tmp_path):
    """`profsvc cluster local` as a user starts it: it prints its address; `profsvc batch --cluster` uses it."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
    command = [sys.executable, "-m", "profsvc_client.cli", "cluster", "local", "--port", "0", "--dashboard-port", "0"]
    process = subprocess.Popen(
        [*command, "--cpu-workers", "1", "--no-warm-workers", "--state-dir", str(tmp_path / "state")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # written once the workers are up
        assert first.startswith("profsvc cluster: scheduler at tcp://127.0.0.1:"), first
        address = first.split()[4].rstrip(";")
        assert "workers: gpu0 (GPU 0), cpu0 (no GPU)" in process.stdout.readline()
        folder = _folder(tmp_path, REPORTS[:2])
        done = run_cli("batch", folder, "--out", tmp_path / "r.parquet", "--cluster", address)
        assert done.returncode == 0, done.stderr
        assert "Dask dashboard at http://127.0.0.1:" in done.stderr
        assert done.stderr.strip().splitlines()[-1].startswith("profsvc batch: 2 problems (0 from the checkpoint")
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 0


def test_cluster_flags_that_do_not_go_together_are_one_line(tmp_path):
    folder = _folder(tmp_path, REPORTS[:1])
    out = tmp_path / "r.parquet"
    both = run_cli("batch", folder, "--out", out, "--cluster", "local", "--server", "127.0.0.1:1")
    assert both.returncode == 2 and "--server and --cluster" in both.stderr
    gpus = run_cli("batch", folder, "--out", out, "--gpus", "1", "--server", "127.0.0.1:1")
    assert gpus.returncode == 2 and "--gpus goes with --cluster local" in gpus.stderr
    for done in (both, gpus):
        assert len(done.stderr.strip().splitlines()) == 1
