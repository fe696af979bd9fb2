"""Shared fixtures: the committed real ncu reports, the report reader, and real servers on loopback."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from profsvc.config import ServerConfig
from profsvc.metrics.analysis import ReportAnalysis, analyze_report
from profsvc.scheduler.cells import Cells
from profsvc.scheduler.disk_guard import DiskGuard
from profsvc.scheduler.gpu_turns import GpuTurns
from profsvc.scheduler.warm_pool import StandbyPool
from profsvc.server.app import EmbeddedServer
from profsvc_client.client import ProfilerClient
from profsvc_contract.models import KernelResult

FIXTURES = Path(__file__).parent / "fixtures"
# Every committed report, archetypes and the primed worker's included: the parity tests cover each.
REPORTS = sorted(FIXTURES.rglob("*.ncu-rep"))
HAS_GPU = shutil.which("nvidia-smi") is not None
# The second tier (`pytest -m slow`): every test here starts a real server over sockets or a jailed job.
SLOW_FOLDERS = ("integration", "security")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    # The GPU suite (`pytest -m gpu`, wherever its tests sit) runs only where an NVIDIA GPU and ncu are present.
    no_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU with ncu (run this suite on a GPU host)")
    gpu_here = bool(shutil.which("nvidia-smi") and shutil.which("ncu"))
    for item in items:
        if item.path.relative_to(tests).parts[0] in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)
        if "gpu" in item.keywords and not gpu_here:
            item.add_marker(no_gpu)


@pytest.fixture(scope="session")
def nvcc() -> str:
    """nvcc, which every test machine has (CUDA 13.0): a test that builds CUDA fails where it is missing."""
    found = shutil.which("nvcc")
    assert found, "nvcc (the CUDA 13.0 toolkit) is not on PATH: the CUDA build tests need it"
    return found


# For tests that reach nvcc through the server rather than by path.
needs_nvcc = pytest.mark.usefixtures("nvcc")


def processes_with(text: str) -> list[int]:
    """The pids of every process whose command line holds `text` (a daemon a test's job started, found by it)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An in-process server (same code as `profsvc serve`) on an ephemeral loopback port."""
    embedded = EmbeddedServer(ServerConfig(state_dir=tmp_path_factory.mktemp("state")))
    target = embedded.start()
    yield target
    embedded.stop()


@pytest.fixture
def client(server: str) -> Iterator[ProfilerClient]:
    with ProfilerClient(server, timeout=300) as c:
        yield c


def unjailed_cells(root: Path, disk: DiskGuard | None = None, turns: GpuTurns | None = None) -> Cells:
    """Cells as the scheduler makes them, unjailed, for a test's own processes: cells and warm workers under root."""
    return Cells(
        root / "cells",
        None,
        StandbyPool(root / "standby"),
        python=sys.executable,
        cuda_arch="9.0",
        base_handlers={},
        disk=disk or DiskGuard(root, 0),
        turns=turns or GpuTurns(),
    )


def wait_until(condition: Callable[[], object], what: str, timeout: float = 120.0) -> None:
    """Block until `condition()` is true: an event a test waits for (a file a job wrote, a server's log line).

    The timeout only bounds a failure; nothing here orders events by time.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(0.05)


def wait_healthy(target: str, timeout: float = 60.0, metadata: tuple[tuple[str, str], ...] = ()) -> None:
    """Block until the gRPC health service says SERVING (`metadata`: the token of a server that needs one)."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                if (
                    stub.Check(health_pb2.HealthCheckRequest(), timeout=2, metadata=metadata).status
                    == health_pb2.HealthCheckResponse.SERVING
                ):
                    return
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.2)


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`profsvc serve` as its own process, as a user starts it.

    With PROFSVC_STATE_DIR set (the GPU runner sets it), the server shares that build cache with the
    embedded CLI runs, so each distinct extension is built once per run.
    """
    port = free_port()
    state = Path(os.environ.get("PROFSVC_STATE_DIR") or tmp_path_factory.mktemp("served"))
    # The server's log goes to a file (PROFSVC_SERVER_LOG when set): a pipe nobody reads would fill and stall it.
    log_path = Path(os.environ.get("PROFSVC_SERVER_LOG") or tmp_path_factory.mktemp("log") / "server.log")
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "profsvc_client.cli", "serve", "--port", str(port), "--state-dir", str(state)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    target = f"127.0.0.1:{port}"
    try:
        wait_healthy(target)
        yield target
    finally:
        process.terminate()
        process.wait(timeout=30)


def run_cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the `profsvc` CLI as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "profsvc_client.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="session")
def reader() -> ModuleType:
    """NVIDIA's ncu_report module (the ncu install's copy on a GPU host, else the PyPI package)."""
    from profsvc.metrics.reader import load_reader

    return load_reader()


def report_id(report: Path) -> str:
    """A report's name for test ids: its path under tests/fixtures."""
    return report.relative_to(FIXTURES).as_posix()


def first_action(reader: ModuleType, report: Path):
    """The first profiled launch of a report."""
    return reader.load_report(str(report)).range_by_idx(0).action_by_idx(0)


def analysis_of(report: Path) -> ReportAnalysis:
    """profsvc's analysis of a committed report, made once per test session."""
    if report not in _ANALYSES:
        _ANALYSES[report] = analyze_report(report)
    return _ANALYSES[report]


_ANALYSES: dict[Path, ReportAnalysis] = {}


def kernel_actions(reader: ModuleType, report: Path) -> list[tuple[KernelResult, Any]]:
    """Each launch profsvc reports with ncu_report's action of the same launch, paired by name in launch order.

    A primed worker's report also holds the worker's own warm-up launch, which profsvc leaves out where it ran
    in profsvc's own NVTX domain.
    """
    context = reader.load_report(str(report))
    actions = [
        context.range_by_idx(r).action_by_idx(a)
        for r in range(context.num_ranges())
        for a in range(context.range_by_idx(r).num_actions())
    ]
    pairs = []
    for kernel in analysis_of(report).kernels:
        same_name = [a for a in actions if a.name() == kernel.name]
        earlier = sum(k.name == kernel.name for k, _ in pairs)
        pairs.append((kernel, same_name[earlier]))
    return pairs
