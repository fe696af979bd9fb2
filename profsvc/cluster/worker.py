"""The Dask preload that gives a worker its profsvc service.

    dask worker tcp://scheduler:8786 --resources GPU=1 --preload profsvc.cluster.worker
    dask worker ... --preload profsvc.cluster.worker --preload-argv "--no-warm-workers"

The service listens on a loopback port of the worker's host and takes a token made here, so another user of a
shared node cannot call it. Its state (job folders, warm workers) is a folder per worker; the build cache is one
folder per node (STATE_DIR/cache), shared by the node's workers (builds lock per key).
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
from pathlib import Path
from typing import Any

import click
from distributed import WorkerPlugin

from profsvc.config import ServerConfig, default_state_dir
from profsvc.server.app import EmbeddedServer

# The name the batch's tasks look the plugin up by (profsvc_client.cluster_batch.PLUGIN_NAME).
PLUGIN_NAME = "profsvc"


def worker_state_dir(root: Path, worker_name: object) -> Path:
    """The worker's own state folder under `root`, with `cache` and its `index` (the builds' hashes) linked to the
    node's shared ones."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(worker_name)).strip("._") or "worker"
    state = root / "dask-workers" / safe
    state.mkdir(parents=True, exist_ok=True)
    for name in ("cache", "index"):
        shared = root / name
        shared.mkdir(parents=True, exist_ok=True)
        link = state / name
        if not link.is_symlink():
            link.symlink_to(shared, target_is_directory=True)
    return state


class ProfsvcService(WorkerPlugin):
    """One warm profsvc service per Dask worker, for the GPU its CUDA_VISIBLE_DEVICES names.

    Tasks read `target` and `token` to call it over gRPC; `gpus` says which GPUs it drives.
    """

    name = PLUGIN_NAME

    def __init__(
        self,
        *,
        state_dir: Path | None = None,
        warm_workers: bool = True,
        ncu_warmup: bool = True,
        compile_workers: int | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.warm_workers = warm_workers
        self.ncu_warmup = ncu_warmup
        self.compile_workers = compile_workers
        self.target = ""
        self.token = ""
        self.gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        self._server: EmbeddedServer | None = None

    def _start(self, worker_name: object) -> None:
        self.token = secrets.token_urlsafe(32)
        options: dict[str, Any] = {
            "state_dir": worker_state_dir(self.state_dir or default_state_dir(), worker_name),
            "warm_workers": self.warm_workers,
            "ncu_warmup": self.ncu_warmup,
            "security": {"tokens": {"cluster": self.token}},
        }
        if self.compile_workers is not None:
            options["compile_workers"] = self.compile_workers
        self._server = EmbeddedServer(ServerConfig(**options), keep_warm=self.warm_workers)
        self.target = self._server.start()

    async def setup(self, worker: Any) -> None:
        """Start the service before the worker takes its first task (server start-up runs off the event loop)."""
        await asyncio.to_thread(self._start, worker.name)

    async def teardown(self, worker: Any) -> None:
        """Stop the service and its warm workers with the worker."""
        if self._server is not None:
            await asyncio.to_thread(self._server.stop)
            self._server = None


@click.command()
@click.option("--state-dir", type=click.Path(path_type=Path), default=None, help="state root (default as serve)")
@click.option("--no-warm-workers", is_flag=True, help="start every job's worker fresh")
@click.option("--no-ncu-warmup", is_flag=True, help="warm ncu workers do not profile a kernel of their own first")
@click.option("--compile-workers", type=int, default=None, help="parallel builds (default: the host's cores)")
async def dask_setup(
    worker: Any, state_dir: Path | None, no_warm_workers: bool, no_ncu_warmup: bool, compile_workers: int | None
) -> None:
    """Dask's preload hook: register (and so start) the worker's service."""
    plugin = ProfsvcService(
        state_dir=state_dir,
        warm_workers=not no_warm_workers,
        ncu_warmup=not no_ncu_warmup,
        compile_workers=compile_workers,
    )
    await worker.plugin_add(plugin, name=PLUGIN_NAME, catch_errors=False)
