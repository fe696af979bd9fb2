"""Disk: rejected uploads do not stay, finished job folders are pruned to a byte budget (`--disk-budget`), and
uploads being received together may not hold more than it."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import grpc
import pytest

from profsvc_client.client import ProfilerClient
from profsvc_contract import errors
from profsvc_contract._proto import profiler_pb2 as pb
from tests.conftest import FIXTURES
from tests.security.servers import raw_call, served

REPORT = FIXTURES / "seed47_default.ncu-rep"
MIB = 1 << 20


def _bytes_under(folder: Path) -> int:
    """Bytes of the regular files under `folder` (counted here with os.walk and lstat, links not followed)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            info = os.lstat(os.path.join(root, name))
            total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return total


def test_rejected_uploads_do_not_stay_on_disk(tmp_path):
    damaged = b"NVR\x00" + bytes(10 * MIB)  # a report's magic, then nothing a reader can use
    with served(tmp_path) as server, ProfilerClient(server.target, timeout=300) as client:
        for _ in range(5):
            with pytest.raises(errors.InvalidRequest) as caught:
                client.analyze(damaged)
            assert caught.value.reason == errors.Reason.BAD_REPORT
        held = _bytes_under(server.state / "jobs") + _bytes_under(server.state / "uploads")
        assert client.analyze(REPORT).ok
    # Five 10 MiB uploads went in; before, each stayed in its job's folder (+995 MB after five of 199 MB).
    assert held < len(damaged), f"{held:,} bytes kept after five rejected uploads"


def test_finished_job_folders_are_pruned_to_the_byte_budget(tmp_path):
    budget = 250 * 1024
    with served(tmp_path, "--disk-budget", "250K") as server, ProfilerClient(server.target, timeout=300) as client:
        results = [client.analyze(REPORT) for _ in range(10)]
        kept = sorted(p.name for p in (server.state / "jobs").iterdir())
        held = _bytes_under(server.state / "jobs")
        newest = client.download_artifact(results[-1].artifacts[0].id, tmp_path)
        with pytest.raises(errors.NotFound):
            client.download_artifact(results[0].artifacts[0].id, tmp_path / "oldest")
    assert all(r.ok and r.artifacts for r in results)
    assert held <= budget, f"{held:,} bytes kept, over the {budget:,} byte budget"
    # Pruned by bytes (ten folders are far fewer than the 200 the count keeps), the oldest first.
    assert 0 < len(kept) < 10 and results[-1].job_id in kept and results[0].job_id not in kept
    assert newest.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_uploads_in_progress_hold_at_most_the_budget(tmp_path):
    held_open = threading.Event()
    first_size = 600 * 1024

    def slow_upload():
        # A first message reserving 600 KiB, then nothing until the second upload has been answered.
        yield pb.AnalyzeRequest(filename="slow.ncu-rep", size=first_size, chunk=b"x" * 1024).SerializeToString()
        held_open.wait(timeout=120)

    with served(tmp_path, "--disk-budget", "1M") as server:
        answers: list[object] = []
        slow = threading.Thread(
            target=lambda: answers.append(
                raw_call(server.target, "/profsvc.v1.Profiler/Analyze", slow_upload(), streaming=(True, False))
            )
        )
        slow.start()
        try:
            deadline = time.monotonic() + 60
            while not list((server.state / "uploads").glob("*.part")):
                assert time.monotonic() < deadline, "the first upload never reached the server"
                time.sleep(0.05)
            with ProfilerClient(server.target, timeout=300) as client, pytest.raises(errors.ResourceExhausted) as busy:
                client.analyze(FIXTURES / "seed47_full.ncu-rep")  # 1.1 MB: 600 KiB are taken of the 1 MiB
        finally:
            held_open.set()
            slow.join()
        with ProfilerClient(server.target, timeout=300) as client:
            assert client.analyze(REPORT).ok  # 233 kB: the slow upload's reservation is given back
    assert "the uploads being received hold 614,400 bytes of the server's 1,048,576 byte budget" in busy.value.message
    assert isinstance(answers[0], grpc.RpcError) and answers[0].code() == grpc.StatusCode.INVALID_ARGUMENT
