"""A one-host Dask cluster for profsvc: a worker per GPU, its CUDA_VISIBLE_DEVICES set, `GPU=1` declared.

    profsvc cluster local --gpus 2     # prints the scheduler's address for `profsvc batch --cluster ADDRESS`

Built on distributed's own SpecCluster, as dask-cuda's LocalCUDACluster is, without dask-cuda: its wheels bring
cuda-core, nvidia-ml-py and RAPIDS' pins of dask and distributed to the GPU host, and none of what they add
(CUDA memory pools, UCX) serves workers that never touch CUDA themselves (profsvc's jobs run in processes of
their own). Each worker loads `profsvc.cluster.worker` (by name: the server package must be installed where the
workers run), which starts its profsvc service.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from distributed import Nanny, Scheduler, SpecCluster

from profsvc_contract import errors

PRELOAD = "profsvc.cluster.worker"
# Threads of a GPU worker: up to four problems on its GPU (`--per-gpu`), and CPU tasks beside them.
GPU_WORKER_THREADS = 4
CPU_WORKER_THREADS = 2


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach."""
    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def visible_devices() -> list[str]:
    """This host's GPUs as CUDA_VISIBLE_DEVICES entries: the variable's own list when set, else nvidia-smi's."""
    setting = os.environ.get("CUDA_VISIBLE_DEVICES")
    if setting is not None:
        return [entry.strip() for entry in setting.split(",") if entry.strip()]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    listed = subprocess.run(
        [smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, timeout=60, check=False
    )
    return (
        [line.strip() for line in listed.stdout.splitlines() if line.strip().isdigit()] if not listed.returncode else []
    )


def preload_argv(*, state_dir: Path | None, warm_workers: bool, ncu_warmup: bool, compile_workers: int) -> list[str]:
    """The arguments of the profsvc preload (profsvc.cluster.worker's dask_setup)."""
    argv = ["--compile-workers", str(compile_workers)]
    if state_dir is not None:
        argv += ["--state-dir", str(state_dir)]
    if not warm_workers:
        argv.append("--no-warm-workers")
    if not ncu_warmup:
        argv.append("--no-ncu-warmup")
    return argv


def worker_specs(
    devices: list[str],
    *,
    cpu_workers: int = 0,
    state_dir: Path | None = None,
    warm_workers: bool = True,
    host: str = "127.0.0.1",
) -> dict[str, dict[str, Any]]:
    """SpecCluster's worker specs: one per GPU (`gpu<entry>`) and `cpu_workers` without a GPU (`cpu<n>`).

    The host's cores are shared out for builds. Warm ncu workers prime only with one GPU on the host: whether a
    primed worker's hold on ncu spans GPUs is not measured (the server does the same).
    """
    count = len(devices) + cpu_workers
    argv = preload_argv(
        state_dir=state_dir,
        warm_workers=warm_workers,
        ncu_warmup=len(devices) == 1,
        compile_workers=max(1, (os.cpu_count() or 1) // max(count, 1)),
    )

    def spec(name: str, threads: int, env: dict[str, str], resources: dict[str, float]) -> dict[str, Any]:
        options = {
            "name": name,
            "host": host,
            "nthreads": threads,
            "env": env,
            "resources": resources,
            "preload": [PRELOAD],
            "preload_argv": [argv],
            # The worker holds little itself (its jobs run in processes of their own): no memory limit to police.
            "memory_limit": 0,
            "silence_logs": logging.WARNING,
        }
        return {"cls": Nanny, "options": options}

    specs = {f"gpu{d}": spec(f"gpu{d}", GPU_WORKER_THREADS, {"CUDA_VISIBLE_DEVICES": d}, {"GPU": 1}) for d in devices}
    for n in range(cpu_workers):
        specs[f"cpu{n}"] = spec(f"cpu{n}", CPU_WORKER_THREADS, {"CUDA_VISIBLE_DEVICES": ""}, {})
    return specs


def local_cluster(
    *,
    gpus: int | None = None,
    devices: list[str] | None = None,
    cpu_workers: int = 0,
    state_dir: Path | None = None,
    warm_workers: bool = True,
    host: str = "127.0.0.1",
    port: int = 0,
    dashboard_port: int = 0,
) -> SpecCluster:
    """Start the cluster: the first `gpus` of `devices` (default: this host's), and `cpu_workers` more.

    Without a GPU it keeps one CPU worker, for lint and analyze. Port 0: any free port.
    """
    available = visible_devices() if devices is None else devices
    chosen = available if gpus is None else available[:gpus]
    if gpus is not None and (gpus < 0 or gpus > len(available)):
        raise errors.InvalidRequest(f"--gpus {gpus}: this host shows {len(available)} GPU(s) (nvidia-smi)")
    if cpu_workers < 0:
        raise errors.InvalidRequest("--cpu-workers must be 0 or more")
    cpu_workers = cpu_workers or (0 if chosen else 1)
    scheduler = {
        "cls": Scheduler,
        "options": {"host": host, "port": port, "dashboard_address": f"{host}:{dashboard_port}"},
    }
    specs = worker_specs(chosen, cpu_workers=cpu_workers, state_dir=state_dir, warm_workers=warm_workers, host=host)
    return SpecCluster(workers=specs, scheduler=scheduler, name="profsvc", silence_logs=logging.WARNING)


def describe(cluster: SpecCluster) -> str:
    """What `profsvc cluster local` prints: where to connect, the dashboard, the workers."""
    workers = ", ".join(
        f"{name} (GPU {spec['options']['env']['CUDA_VISIBLE_DEVICES']})"
        if spec["options"]["resources"]
        else f"{name} (no GPU)"
        for name, spec in cluster.worker_spec.items()
    )
    return (
        f"profsvc cluster: scheduler at {cluster.scheduler_address}; dashboard {cluster.dashboard_link}\n"
        f"  workers: {workers}\n"
        f"  profsvc batch INPUT --out RESULTS.parquet --cluster {cluster.scheduler_address}\n"
        "  Ctrl-C or SIGTERM stops it"
    )


__all__ = ["PRELOAD", "describe", "is_loopback", "local_cluster", "preload_argv", "visible_devices", "worker_specs"]
