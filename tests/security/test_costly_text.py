"""Text a caller writes to cost the server time: a source built to slow the static check, a kernel filter built to
slow the matcher. Each is answered within seconds, and another caller is answered meanwhile."""

from __future__ import annotations

import threading
import time

import pytest

from profsvc.config import Limits
from profsvc_client.client import ProfilerClient
from profsvc_contract.models import KernelFilter, KernelSource, SourceFile
from tests.conftest import FIXTURES
from tests.security.servers import served

REPORT = FIXTURES / "seed47_default.ncu-rep"
HEAD = (
    "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
    "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return ext.f(x)\n"
)
TAIL = "\next = load_inline(name='e', cpp_sources=src, cuda_sources=src, functions=['f'])\n"


def _qualifiers(size: int) -> bytes:
    """An attacking source, to `size` bytes: `__global__ ` repeated in a load_inline string (132 KB of it held
    the server's event loop for 66 s)."""
    room = size - len(HEAD) - len(TAIL) - 32
    return (HEAD + "src = " + repr("#include <x>\n" + "__global__ " * (room // 11)) + TAIL).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with served(tmp_path_factory.mktemp("costly")) as running:
        yield running


def test_a_static_check_built_to_be_slow_answers_and_others_are_answered_meanwhile(server):
    source = KernelSource(main=SourceFile(name="slow.py", content=_qualifiers(Limits().max_source_bytes)))
    finished: dict[str, float] = {}

    def attack() -> None:
        start = time.monotonic()
        with ProfilerClient(server.target, timeout=300) as client:
            client.static_check(source)
        finished["attack"] = time.monotonic() - start

    thread = threading.Thread(target=attack)
    thread.start()
    time.sleep(0.5)
    with ProfilerClient(server.target, timeout=60) as other:
        start = time.monotonic()
        other.capabilities()
        finished["other"] = time.monotonic() - start
    thread.join(120)
    assert not thread.is_alive()
    # The check of the whole MiB took under 2 s alone (tests/unit/test_staticcheck_linear.py).
    assert finished["attack"] < 15, finished
    assert finished["other"] < 5, finished


def _assignments(size: int) -> bytes:
    """A source slow to parse, to `size` bytes: Python's parser takes seconds for a MiB of `a = 1`, holding the
    interpreter (it keeps the GIL), so a parse in the server's process would stall every other call."""
    tail = b"class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return ext.f(x)\n"
    return b"import torch\n" + b"a = 1\n" * ((size - 64 - len(tail)) // 6) + tail


def test_sources_slow_to_parse_leave_the_server_answering_others(server):
    source = KernelSource(main=SourceFile(name="slow.py", content=_assignments(Limits().max_source_bytes)))

    def attack() -> None:
        with ProfilerClient(server.target, timeout=300) as client:
            client.static_check(source)

    attackers = [threading.Thread(target=attack) for _ in range(4)]
    for thread in attackers:
        thread.start()
    waits: list[float] = []
    with ProfilerClient(server.target, timeout=60) as other:
        while any(thread.is_alive() for thread in attackers):
            start = time.monotonic()
            other.capabilities()
            waits.append(time.monotonic() - start)
            time.sleep(0.05)
    for thread in attackers:
        thread.join(60)
    # Four checks of a MiB each parse it (seconds apiece); a server that parsed in its own process would answer
    # nothing else meanwhile.
    assert max(waits) < 1.0, f"{len(waits)} calls, the longest {max(waits):.2f} s"


def test_a_kernel_filter_built_to_backtrack_answers_at_once(server):
    with ProfilerClient(server.target, timeout=300) as client:
        start = time.monotonic()
        none = client.analyze(REPORT, kernel_filter=KernelFilter(name_regex="(.*.*.*)*Z"))
        seconds = time.monotonic() - start
        assert none.kernels == [] and seconds < 60, seconds
        assert len(client.analyze(REPORT).kernels) == 1
