"""GetArtifact serves only what the server registered for a result, and never through a link: a job that plants
a symbolic link to a secret (a TLS key) in its workspace, or swaps a registered file for one, gets nothing."""

from __future__ import annotations

import os

import pytest

from profsvc_client.client import ProfilerClient
from profsvc_contract import errors
from profsvc_contract.models import KernelSource, SourceFile
from tests.conftest import FIXTURES
from tests.security.servers import served

SECRET = b"-----BEGIN PRIVATE KEY-----\nthe server's TLS key\n-----END PRIVATE KEY-----\n"

# A candidate that, on import in its build job, plants links to the secret where artifacts are written.
PLANTER = """
import os

for name in ("report.ncu-rep", "roofline.png", "roofline.svg", "key.pem"):
    os.symlink({secret!r}, name)


class Model:
    pass


class ModelNew:
    pass


def get_inputs():
    return []


def get_init_inputs():
    return []
"""


def _download(client: ProfilerClient, artifact_id: str, folder) -> bytes:
    folder.mkdir(exist_ok=True)
    return client.download_artifact(artifact_id, folder).read_bytes()


def test_links_a_job_plants_in_its_workspace_are_not_served(tmp_path):
    secret = tmp_path / "key.pem"
    secret.write_bytes(SECRET)
    source = KernelSource(main=SourceFile(name="planter.py", content=PLANTER.format(secret=str(secret)).encode()))
    with served(tmp_path) as server, ProfilerClient(server.target, timeout=300) as client:
        client.compile(source)
        (job,) = [p.name for p in (server.state / "jobs").iterdir()]
        planted = sorted(p.name for p in (server.state / "jobs" / job).iterdir() if p.is_symlink())
        refused = []
        # The links, and a plain file of the workspace (the job's own source): none was registered.
        for name in [*planted, "planter.py"]:
            with pytest.raises(errors.NotFound):
                _download(client, f"{job}.{name}", tmp_path / "out")
            refused.append(name)
        assert client.analyze(FIXTURES / "seed47_default.ncu-rep").ok
    # The jail: a job writes only in its own cell, never in the job folder the server serves artifacts from.
    assert planted == []
    assert refused == ["planter.py"]


def test_a_registered_artifact_swapped_for_a_link_is_not_served(tmp_path):
    secret = tmp_path / "key.pem"
    secret.write_bytes(SECRET)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with served(tmp_path) as server, ProfilerClient(server.target, timeout=300) as client:
        result = client.analyze(FIXTURES / "seed47_default.ncu-rep")
        ids = {a.name: a.id for a in result.artifacts}
        workspace = server.state / "jobs" / result.job_id
        # Served as registered, then swapped: a symbolic link, a hard link (same file system), a linked folder.
        assert _download(client, ids["roofline.png"], tmp_path / "before").startswith(b"\x89PNG")
        (workspace / "roofline.png").unlink()
        (workspace / "roofline.png").symlink_to(secret)
        (workspace / "roofline.svg").unlink()
        os.link(secret, workspace / "roofline.svg")
        for name in ("roofline.png", "roofline.svg"):
            with pytest.raises(errors.NotFound):
                _download(client, ids[name], tmp_path / "after")
        second = client.analyze(FIXTURES / "seed47_default.ncu-rep")
        second_ids = {a.name: a.id for a in second.artifacts}
        (elsewhere / "roofline.png").write_bytes(SECRET)
        (server.state / "jobs" / second.job_id).rename(tmp_path / "moved")
        (server.state / "jobs" / second.job_id).symlink_to(elsewhere)
        with pytest.raises(errors.NotFound):
            _download(client, second_ids["roofline.png"], tmp_path / "folder")
        third = client.analyze(FIXTURES / "seed47_default.ncu-rep")
        assert _download(client, third.artifacts[0].id, tmp_path / "next").startswith(b"\x89PNG")
