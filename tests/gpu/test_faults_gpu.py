"""GPU faults: each answered with its kind, and the next job on the GPU runs normally."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from profsvc.config import Limits, ServerConfig
from profsvc.server.app import EmbeddedServer
from profsvc_client.client import ProfilerClient
from tests.faults.problems import FAULTS, GOOD, source

pytestmark = pytest.mark.gpu
JOB_LIMIT_S = 30.0


@pytest.fixture(scope="module")
def fault_client(tmp_path_factory):
    state = Path(os.environ.get("PROFSVC_STATE_DIR") or tmp_path_factory.mktemp("faults"))
    embedded = EmbeddedServer(ServerConfig(state_dir=state, limits=Limits(job_timeout_s=JOB_LIMIT_S)))
    with ProfilerClient(embedded.start(), timeout=900) as client:
        yield client
    embedded.stop()


@pytest.mark.parametrize(("name", "model_new", "kind"), FAULTS, ids=[f[0] for f in FAULTS])
def test_fault_is_named_and_the_next_job_runs(fault_client, name, model_new, kind):
    faulty = fault_client.check_correctness(source(name, model_new), trials=1)
    assert not faulty.ok
    assert faulty.error.kind == kind, (faulty.error.kind, faulty.error.message)
    assert faulty.error.message
    good = fault_client.check_correctness(source(*GOOD[:2]), trials=1)
    assert good.ok, good.message


def test_fault_under_ncu_is_a_result_and_the_gpu_recovers(fault_client):
    name, model_new, _ = FAULTS[0]
    faulty = fault_client.profile(source(name, model_new))
    assert not faulty.ok and faulty.error.kind in ("illegal_memory_access", "crash", "worker_exit", "ncu_failed")
    good = fault_client.profile(source(*GOOD[:2]))
    assert good.ok and good.kernels[0].name == "affine_kernel"
