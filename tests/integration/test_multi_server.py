"""The agent fleet's client over several servers: one killed mid-run (SIGKILL), every call answered by the others.

Three `profsvc serve` processes on loopback; six threads call Analyze (a real report, about a second each) and
StaticCheck through one ProfilerClient; after the fourth answer (an event, not a sleep) the first server is
killed while its share of the calls is in flight. The client's channel watches the servers' health service and
makes a call whose server went away again on another.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from profsvc_client.aio import AsyncProfilerClient
from profsvc_client.client import HEALTH_SERVICE, ProfilerClient, service_config
from profsvc_contract.models import KernelSource, SourceFile
from tests.conftest import FIXTURES, free_port, run_cli, wait_healthy

REPORT = FIXTURES / "seed47_default.ncu-rep"
CALLS = 12


@pytest.fixture
def three_servers(tmp_path: Path) -> Iterator[list[tuple[str, subprocess.Popen[bytes]]]]:
    servers = []
    for n in range(3):
        port = free_port()
        command = [sys.executable, "-m", "profsvc_client.cli", "serve", "--port", str(port)]
        with (tmp_path / f"server{n}.log").open("wb") as log:
            process = subprocess.Popen(
                [*command, "--state-dir", str(tmp_path / f"state{n}"), "--no-warm-workers"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        servers.append((f"127.0.0.1:{port}", process))
    try:
        for target, _ in servers:
            wait_healthy(target)
        yield servers
    finally:
        for _, process in servers:
            process.kill()
            process.wait(timeout=30)


def test_the_channel_watches_the_servers_health():
    config = json.loads(service_config("round_robin", health_check=True))
    assert config == {
        "loadBalancingConfig": [{"round_robin": {}}],
        "healthCheckConfig": {"serviceName": "profsvc.v1.Profiler"},
    }
    assert HEALTH_SERVICE == "profsvc.v1.Profiler"


def test_a_server_killed_mid_run_and_every_call_answered(three_servers, tmp_path):
    targets = ",".join(target for target, _ in three_servers)
    victim = three_servers[0][1]
    answered = 0
    fourth = threading.Event()
    lock = threading.Lock()
    source = KernelSource(main=SourceFile(name="k.py", content=(FIXTURES / "seed47.py").read_bytes()))

    with ProfilerClient(targets, timeout=300) as client:

        def call(n: int) -> bool:
            nonlocal answered
            # Mostly Analyze (a unary call carrying 230 kB), every fourth a StaticCheck.
            ok = client.static_check(source).ok if n % 4 == 3 else client.analyze(REPORT).ok
            with lock:
                answered += 1
                if answered == 4:
                    fourth.set()
            return ok

        with ThreadPoolExecutor(max_workers=6) as pool:
            futures = [pool.submit(call, n) for n in range(CALLS)]
            assert fourth.wait(timeout=600)
            victim.kill()
            results = [future.result() for future in futures]  # a call that raised fails the test here
        assert results == [True] * CALLS
        assert victim.wait(timeout=30) == -9

        # The live servers keep answering; the dead one is out of the rotation.
        for _ in range(4):
            assert client.static_check(source).ok

    async def async_calls() -> list[bool]:
        async with AsyncProfilerClient(targets, timeout=60) as aio:
            return [(await aio.static_check(source)).ok for _ in range(4)]

    assert asyncio.run(async_calls()) == [True] * 4  # the asyncio client, on the same channel setup

    # The CLI takes the same list, the dead server in it.
    done = run_cli("analyze", REPORT, "--format", "json", "--server", targets)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
