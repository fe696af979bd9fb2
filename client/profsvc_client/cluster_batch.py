"""`profsvc batch --cluster`: one Dask task per problem, the results streamed into the batch's checkpoint.

    profsvc batch problems/ --out results.parquet --cluster tcp://scheduler:8786
    profsvc batch problems/ --out results.parquet --cluster local --gpus 2

Each worker runs the profsvc service its preload started (`--preload profsvc.cluster.worker`, the server
package): a task finds it through the worker plugin named PLUGIN_NAME and calls it over gRPC on the worker's
loopback, so this module, like the rest of the client, imports nothing of the server. A profile asks for a share
of the `GPU` resource (a worker per GPU declares `GPU=1`), so it runs only on GPU workers, `per_gpu` at a time
on each (one compiles while another holds the GPU); lint and analyze ask for nothing and run on any worker.

Dask does the placing, the retrying and the progress page: a worker lost mid-task has its task run again on
another (`distributed.scheduler.allowed-failures` times), and each task's record reaches the checkpoint once,
when its future completes. Problems are submitted a window at a time, so that an interruption leaves little
queued and the files' contents are not all in memory at once.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from distributed import Client, Future, as_completed, get_worker

from profsvc_client.batch import BatchSummary, Checkpoint, Problem, ProgressBar, record_of, run_one, run_task
from profsvc_client.client import ProfilerClient
from profsvc_client.cluster_local import local_cluster
from profsvc_contract import errors

PLUGIN_NAME = "profsvc"
# Problems per GPU worker at once: a GPU task asks for 1/per_gpu of the worker's GPU. Dask adds resource amounts
# in floating point; these fractions add up exactly, so no share is lost to rounding over a long batch.
PER_GPU_CHOICES = (1, 2, 4)
# Tasks submitted ahead per thread of the cluster (Dask balances them; more would only wait in its queue).
WINDOW_PER_THREAD = 2
# How long `--cluster ADDRESS` waits for a first worker (a SLURM job may still be queued).
FIRST_WORKER_TIMEOUT_S = 600
NO_GPU_WORKER = (
    "no worker of the cluster declares the GPU resource (a worker per GPU: dask worker --resources GPU=1"
    " --preload profsvc.cluster.worker, or profsvc cluster local)"
)

_clients: dict[tuple[str, str], ProfilerClient] = {}
_clients_lock = threading.Lock()


def _service_client(target: str, token: str) -> ProfilerClient:
    """The worker process's client of its service: one channel, shared by the worker's task threads."""
    with _clients_lock:
        client = _clients.get((target, token))
        if client is None:
            client = _clients[(target, token)] = ProfilerClient(target, token=token or None)
        return client


def run_on_worker(problem: Problem, content: bytes) -> dict[str, Any]:
    """The Dask task: do one problem on this worker's service; its checkpoint record, naming the worker."""
    worker = get_worker()
    service = worker.plugins.get(PLUGIN_NAME)
    target = getattr(service, "target", "")
    if not target:
        record = record_of(
            problem,
            None,
            "NO_SERVICE",
            f"Dask worker {worker.address} has no profsvc service: start it with --preload profsvc.cluster.worker",
            0.0,
        )
    else:
        client = _service_client(target, getattr(service, "token", ""))
        record = run_one(lambda p: run_task(client, p, content), problem)
    record["worker"] = worker.address
    return record


def _failed_task(problem: Problem, future: Future) -> dict[str, Any]:
    """The record of a task that did not answer: cancelled (the scheduler went away), or raised."""
    if future.cancelled():
        message = "the Dask scheduler dropped the task (was the cluster stopped?)"
        return record_of(problem, None, errors.Reason.UNAVAILABLE.value, message, 0.0)
    error = future.exception()
    # KilledWorker: every worker that ran it died (allowed-failures); the problem is tried again on a rerun.
    status = "KILLED_WORKER" if type(error).__name__ == "KilledWorker" else errors.Reason.INTERNAL.value
    return record_of(problem, None, status, f"{type(error).__name__}: {error}", 0.0)


def _resources(problem: Problem, per_gpu: int) -> dict[str, float] | None:
    return {"GPU": 1 / per_gpu} if problem.needs_gpu else None


def _workers(dask: Client) -> list[dict[str, Any]]:
    return list(dask.scheduler_info()["workers"].values())


class _Run:
    """One batch on a cluster: a window of futures in flight, each finished one into the checkpoint."""

    def __init__(
        self,
        dask: Client,
        checkpoint: Checkpoint,
        progress: ProgressBar,
        per_gpu: int,
        concurrency: int,
        on_record: Callable[[dict[str, Any]], None] | None,
    ) -> None:
        self.dask = dask
        self.checkpoint = checkpoint
        self.progress = progress
        self.per_gpu = per_gpu
        self.concurrency = concurrency
        self.on_record = on_record
        self.queue = iter(checkpoint.todo)
        self.pending = as_completed()
        self.submitted: dict[str, Problem] = {}
        # Keys unique to this run: a rerun never meets the tasks of a run killed a moment ago.
        self.keys = (f"profsvc-{uuid.uuid4().hex[:8]}-{n}" for n in itertools.count())
        # Asked once, at the start: a profile submitted to a cluster without a GPU worker would wait forever, but
        # one submitted while a GPU worker restarts (its node lost) waits for it, as it should.
        self.has_gpu = any(worker["resources"].get("GPU") for worker in _workers(dask))

    def submit_more(self) -> None:
        """Fill the window up (problems that cannot run at all are recorded at once)."""
        # Enough for every thread of the cluster as it is now (workers come and go).
        window = max(self.concurrency, WINDOW_PER_THREAD * sum(worker["nthreads"] for worker in _workers(self.dask)))
        if self.pending.count() >= window:
            return
        for problem in self.queue:
            if problem.needs_gpu and not self.has_gpu:
                self.finished(record_of(problem, None, errors.Reason.NO_GPU.value, NO_GPU_WORKER, 0.0))
                continue
            future = self.dask.submit(
                run_on_worker,
                problem,
                problem.content(),
                key=f"{next(self.keys)}-{problem.task}",
                resources=_resources(problem, self.per_gpu),
                pure=False,
            )
            self.submitted[future.key] = problem
            self.pending.add(future)
            if self.pending.count() >= window:
                return

    def finished(self, record: dict[str, Any]) -> None:
        """One problem done: checkpoint it (the one place a record is written), then tell."""
        self.checkpoint.add(record)
        self.progress.update(record["status"] == "ok")
        if self.on_record is not None:
            self.on_record(record)

    def run(self) -> None:
        """Until every problem has its record."""
        with self.checkpoint:
            self.submit_more()
            for future in self.pending:
                problem = self.submitted.pop(future.key)
                self.finished(future.result() if future.status == "finished" else _failed_task(problem, future))
                future.release()
                self.submit_more()


def run_on_cluster(
    problems: list[Problem],
    out: Path,
    dask: Client,
    *,
    per_gpu: int = 2,
    concurrency: int = 1,
    stream: IO[str] | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> BatchSummary:
    """Do the problems the checkpoint lacks on the cluster `dask` is connected to, then write the parquet.

    At least `concurrency` problems are in flight (more on a cluster with more threads). `on_record` sees each
    record once the checkpoint holds it. An interruption leaves the checkpoint holding every problem finished.
    """
    if per_gpu not in PER_GPU_CHOICES:
        raise errors.InvalidRequest(f"--per-gpu is one of {', '.join(map(str, PER_GPU_CHOICES))}")
    if concurrency < 1:
        raise errors.InvalidRequest("--concurrency must be at least 1")
    checkpoint = Checkpoint(problems, out)
    stream = stream or sys.stderr
    print(f"profsvc batch: Dask dashboard at {dask.dashboard_link}", file=stream, flush=True)
    try:
        # A cluster's workers may still be starting (a SLURM job in the queue).
        dask.wait_for_workers(1, timeout=FIRST_WORKER_TIMEOUT_S)
    except TimeoutError:
        raise errors.ServerUnavailable(f"no Dask worker joined in {FIRST_WORKER_TIMEOUT_S} s") from None
    progress = ProgressBar(len(checkpoint.todo), stream)
    try:
        _Run(dask, checkpoint, progress, per_gpu, concurrency, on_record).run()
    finally:
        progress.close()
    return checkpoint.finish()


@contextmanager
def connected(address: str, *, gpus: int | None = None, state_dir: Path | None = None) -> Iterator[Client]:
    """A Dask client of the cluster at `address`, or of a one-host cluster started here for "local"."""
    if address != "local":
        if gpus is not None:
            raise errors.InvalidRequest("--gpus goes with --cluster local (a running cluster has its workers)")
        try:
            client = Client(address, timeout=30)
        except OSError as error:
            raise errors.ServerUnavailable(f"no Dask scheduler answered at {address}: {error}") from None
        with client:
            yield client
        return
    with local_cluster(gpus=gpus, state_dir=state_dir) as cluster, Client(cluster) as client:
        client.wait_for_workers(len(cluster.workers))
        yield client


def batch_on_cluster(
    problems: list[Problem],
    out: Path,
    address: str,
    *,
    per_gpu: int,
    concurrency: int,
    gpus: int | None = None,
) -> BatchSummary:
    """`profsvc batch --cluster ADDRESS|local`."""
    start = time.monotonic()
    with connected(address, gpus=gpus) as dask:
        summary = run_on_cluster(problems, out, dask, per_gpu=per_gpu, concurrency=concurrency)
    # The time to start a local cluster counts: it is part of what the user waited for.
    return dataclasses.replace(summary, seconds=time.monotonic() - start)


__all__ = ["PER_GPU_CHOICES", "PLUGIN_NAME", "batch_on_cluster", "connected", "run_on_cluster", "run_on_worker"]
