"""What a cluster's workers are told: which GPU each server drives, the Dask worker specs, the SLURM job script."""

from __future__ import annotations

import importlib.util

import pytest

from profsvc.host import visible_gpus
from profsvc_contract.models import GpuInfo
from tests.conftest import FIXTURES

pytest.importorskip("distributed", reason="clusters need Dask: pip install './client[cluster]'")

from profsvc_client.cluster_local import PRELOAD, worker_specs

EXAMPLES = FIXTURES.parent.parent / "examples"
# Four GPUs as nvidia-smi lists them: (GpuInfo, UUID).
GPUS = [(GpuInfo(index=i, name="NVIDIA H200"), f"GPU-{i}a{i}b-0000-1111") for i in range(4)]


@pytest.mark.parametrize(
    ("setting", "indices"),
    [
        (None, [0, 1, 2, 3]),  # unset: every GPU
        ("2", [2]),
        ("3,1", [3, 1]),  # CUDA keeps the variable's order
        ("", []),  # set but empty: none
        ("1,7,2", [1]),  # CUDA stops at the first entry that names no device
        ("1,1", [1]),  # and at a repeated one
        ("GPU-2a2b", [2]),  # a unique UUID prefix names its GPU
        ("GPU-", []),  # an ambiguous one names none
        ("MIG-0a0b-0000", [0, 1, 2, 3]),  # MIG slices are not told apart: the list as it is
    ],
)
def test_the_server_keeps_the_gpus_cuda_visible_devices_names(setting, indices):
    assert [gpu.index for gpu in visible_gpus(GPUS, setting)] == indices


def test_a_worker_per_gpu_with_its_device_and_resource():
    specs = worker_specs(["0", "3"], cpu_workers=1, warm_workers=False)
    assert list(specs) == ["gpu0", "gpu3", "cpu0"]
    gpu3 = specs["gpu3"]["options"]
    assert gpu3["env"] == {"CUDA_VISIBLE_DEVICES": "3"} and gpu3["resources"] == {"GPU": 1}
    assert gpu3["preload"] == [PRELOAD] == ["profsvc.cluster.worker"]
    # Two GPUs on one host: the warm ncu workers do not prime (as `profsvc serve` with two GPUs).
    assert {"--no-warm-workers", "--no-ncu-warmup"} <= set(gpu3["preload_argv"][0])
    cpu = specs["cpu0"]["options"]
    assert cpu["env"] == {"CUDA_VISIBLE_DEVICES": ""} and cpu["resources"] == {}
    one = worker_specs(["1"])["gpu1"]["options"]["preload_argv"][0]
    assert "--no-ncu-warmup" not in one and "--no-warm-workers" not in one


def test_the_slurm_example_asks_for_a_gpu_per_job_and_declares_it():
    pytest.importorskip("dask_jobqueue", reason="the SLURM example needs dask-jobqueue")
    spec = importlib.util.spec_from_file_location("slurm_batch", EXAMPLES / "slurm_batch.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with example.slurm_cluster(
        partition="gpu", account="proj7", walltime="01:30:00", cores=8, memory="64GB", state_dir="/scratch/ps"
    ) as cluster:
        script = cluster.job_script()
    lines = script.splitlines()
    assert lines[0].startswith("#!") and "#SBATCH --gres=gpu:1" in lines
    assert {"#SBATCH -p gpu", "#SBATCH -A proj7", "#SBATCH -t 01:30:00", "#SBATCH -n 1"} <= set(lines)
    assert "export PROFSVC_STATE_DIR=/scratch/ps" in lines
    # The worker command: one process holding the GPU resource, with profsvc's preload.
    command = next(line for line in lines if "distributed.cli.dask_worker" in line)
    for part in ("--nthreads 8", "--resources GPU=1", "--preload profsvc.cluster.worker"):
        assert part in command, (part, command)
    assert script.index("PROFSVC_STATE_DIR") < script.index("distributed.cli.dask_worker")
