"""What the host offers: GPUs (through nvidia-smi), the driver, nvcc and ncu.

Discovered once at server start in subprocesses: the server process itself
never creates a CUDA context. nvidia-smi lists every GPU of the machine, so a
server started with CUDA_VISIBLE_DEVICES (a Dask worker for one GPU, a SLURM
job) keeps only the GPUs that names.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field

from profsvc.ncu.locate import NcuInstall, find_ncu
from profsvc.proc import run_process
from profsvc_contract.models import GpuInfo

_NVCC_VERSION = re.compile(r"release (\d+\.\d+)")


@dataclass(frozen=True)
class HostInfo:
    """The GPUs and tools of this host."""

    gpus: list[GpuInfo] = field(default_factory=list)
    driver_version: str = ""
    ncu: NcuInstall | None = None
    nvcc_path: str = ""
    nvcc_version: str = ""

    @property
    def unavailable_reason(self) -> str:
        """Why Profile cannot run here ('' when it can)."""
        if not self.gpus:
            return "this server has no NVIDIA GPU (nvidia-smi found none)"
        if self.ncu is None:
            return "Nsight Compute (ncu) is not installed on this server"
        return ""

    @property
    def default_arch(self) -> str:
        """nvcc -arch for the first GPU, sm_90 without one."""
        if self.gpus and self.gpus[0].compute_capability:
            return "sm_" + self.gpus[0].compute_capability.replace(".", "")
        return "sm_90"


def visible_gpus(gpus: list[tuple[GpuInfo, str]], setting: str | None) -> list[GpuInfo]:
    """The GPUs (each with its UUID) that a CUDA_VISIBLE_DEVICES value leaves visible, in its order.

    Entries are indices or GPU UUIDs (a unique prefix is enough); as in CUDA, the list ends at the first entry
    that names no GPU, so "" leaves none. A value naming MIG instances leaves the list as it is: MIG slices are
    not told apart here.
    """
    if setting is None or "MIG-" in setting:
        return [gpu for gpu, _ in gpus]
    chosen: list[GpuInfo] = []
    for entry in (part.strip() for part in setting.split(",")):
        named = [
            gpu
            for gpu, uuid in gpus
            if (entry.isdigit() and int(entry) == gpu.index) or (entry.startswith("GPU-") and uuid.startswith(entry))
        ]
        if len(named) != 1 or named[0] in chosen:
            break
        chosen.append(named[0])
    return chosen


async def _gpus() -> tuple[list[GpuInfo], str]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return [], ""
    query = "--query-gpu=index,name,compute_cap,memory.total,driver_version,uuid"
    result = await run_process([smi, query, "--format=csv,noheader,nounits"], timeout=30)
    if not result.ok:
        return [], ""
    gpus, driver = [], ""
    for line in result.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 6 or not parts[0].isdigit():
            continue
        memory_mib = int(parts[3]) if parts[3].isdigit() else 0
        gpu = GpuInfo(index=int(parts[0]), name=parts[1], compute_capability=parts[2], memory_bytes=memory_mib << 20)
        gpus.append((gpu, parts[5]))
        driver = parts[4]
    return visible_gpus(gpus, os.environ.get("CUDA_VISIBLE_DEVICES")), driver


async def _nvcc(explicit: str | None) -> tuple[str, str]:
    path = (
        explicit
        or shutil.which("nvcc")
        or ("/usr/local/cuda/bin/nvcc" if shutil.which("/usr/local/cuda/bin/nvcc") else "")
    )
    if not path:
        return "", ""
    result = await run_process([path, "--version"], timeout=30)
    match = _NVCC_VERSION.search(result.stdout)
    return (path, match.group(1)) if result.ok and match else ("", "")


async def discover(ncu_path: str | None = None, nvcc_path: str | None = None) -> HostInfo:
    """Probe the host once."""
    gpus, driver = await _gpus()
    nvcc, nvcc_version = await _nvcc(nvcc_path)
    return HostInfo(
        gpus=gpus, driver_version=driver, ncu=await find_ncu(ncu_path), nvcc_path=nvcc, nvcc_version=nvcc_version
    )
