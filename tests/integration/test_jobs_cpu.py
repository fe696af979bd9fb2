"""Job isolation on the CPU: builds through load_inline, time limits, no network, clear user errors.

These run real worker processes with PyTorch's CPU build (C++-only load_inline
extensions build without CUDA).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

import pytest

from profsvc.config import Limits, ServerConfig
from profsvc.server.app import EmbeddedServer
from profsvc_client.client import ProfilerClient
from profsvc_contract import errors
from profsvc_contract.models import KernelSource, Severity, SourceFile
from tests.conftest import wait_until

pytest.importorskip("torch", reason="the Python problem path needs PyTorch (the CPU build will do)")

PROBLEM = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(16)]


def get_init_inputs():
    return []


_cpp = r"""
torch::Tensor twice(torch::Tensor x) {
  return x * 2 + OFFSET;
}
"""
_ext = load_inline(name="twice_ext", cpp_sources=_cpp, functions=["twice"], extra_cflags=["-DOFFSET=0"])


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.twice(x)
'''
SHORT_TIMEOUT_S = 15.0


def _client(state_dir, limits: Limits):
    embedded = EmbeddedServer(ServerConfig(state_dir=state_dir, limits=limits))
    with ProfilerClient(embedded.start(), timeout=600) as client:
        yield client
    embedded.stop()


@pytest.fixture(scope="module")
def cpu_client(tmp_path_factory):
    yield from _client(tmp_path_factory.mktemp("cpu-jobs"), Limits())


@pytest.fixture(scope="module")
def short_client(tmp_path_factory):
    yield from _client(tmp_path_factory.mktemp("short-jobs"), Limits(compile_timeout_s=SHORT_TIMEOUT_S))


def _source(name: str, text: str) -> KernelSource:
    return KernelSource(main=SourceFile(name=name, content=text.encode()))


def test_load_inline_build_is_cached_by_content(cpu_client):
    first = cpu_client.compile(_source("twice.py", PROBLEM))
    assert first.ok, first.diagnostics
    assert [u.name for u in first.units] == ["twice_ext"] and not first.units[0].cached
    # A C++-only extension: built as written, and the answer says why no faster route was taken.
    assert (first.units[0].route, first.units[0].route_reason) == ("torch", "cpp_only")
    second = cpu_client.compile(_source("again.py", PROBLEM))
    assert second.ok and second.units[0].cached
    assert second.units[0].cache_key == first.units[0].cache_key
    assert (second.units[0].route, second.units[0].route_reason) == ("torch", "cpp_only")
    assert second.seconds < first.seconds


WRITTEN = """import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load, load_inline


class Model(nn.Module):
    def forward(self, x):
        return x * 3 + 1


def get_inputs():
    return [torch.randn(16)]


def get_init_inputs():
    return []


def _write(folder, name, text):
    with open(os.path.join(folder, name), "w") as handle:
        handle.write(text)


# Headers and sources the module writes into its own temporary folders at import (a new folder per job).
_include = tempfile.mkdtemp(prefix="include_")
os.mkdir(os.path.join(_include, "more"))
_write(_include, "factor.h", '#pragma once\\n#include "more/three.h"\\nconstexpr int FACTOR = THREE;\\n')
_write(os.path.join(_include, "more"), "three.h", "#define THREE 3\\n")
_thrice = load_inline(
    name="thrice_ext",
    cpp_sources='#include "factor.h"\\ntorch::Tensor thrice(torch::Tensor x) { return x * FACTOR; }',
    functions=["thrice"],
    extra_include_paths=[_include],
    extra_cflags=[""],
)
_sources = tempfile.mkdtemp(prefix="sources_")
_write(_sources, "one.h", "#define ONE 1\\n")
_write(
    _sources,
    "plus.cpp",
    '#include <torch/extension.h>\\n#include "one.h"\\n'
    "torch::Tensor plus_one(torch::Tensor x) { return x + ONE; }\\n"
    'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("plus_one", &plus_one); }\\n',
)
_plus = load(name="plus_ext", sources=[os.path.join(_sources, "plus.cpp")])
# Built from the headers the job sent: the libraries compute what the headers say.
assert _plus.plus_one(_thrice.thrice(torch.ones(2))).tolist() == [4.0, 4.0]


class ModelNew(nn.Module):
    def forward(self, x):
        return _plus.plus_one(_thrice.thrice(x))
"""


def test_headers_and_sources_a_module_writes_are_sent_built_and_found_again_by_content(cpu_client):
    first = cpu_client.compile(_source("written.py", WRITTEN))
    assert first.ok, (first.diagnostics, first.log)
    assert [(u.name, u.cached, u.route, u.route_reason) for u in first.units] == [
        ("thrice_ext", False, "torch", "cpp_only"),
        ("plus_ext", False, "torch", "cpp_only"),
    ]
    # Another job: other temporary folders, the same files: the same builds, from the cache.
    second = cpu_client.compile(_source("written_again.py", WRITTEN))
    assert second.ok, (second.diagnostics, second.log)
    assert [u.cache_key for u in second.units] == [u.cache_key for u in first.units]
    assert all(u.cached for u in second.units)
    # A header that says otherwise: another build of that extension, whose library says so.
    changed = WRITTEN.replace("#define THREE 3", "#define THREE 5").replace("[4.0, 4.0]", "[6.0, 6.0]")
    third = cpu_client.compile(_source("written_five.py", changed))
    assert third.ok, (third.diagnostics, third.log)
    assert third.units[0].cache_key != first.units[0].cache_key and not third.units[0].cached
    assert third.units[1].cached


def test_build_error_points_at_the_users_line(cpu_client):
    broken = PROBLEM.replace("x * 2 + OFFSET", "x * 2 + undefined_thing")
    result = cpu_client.compile(_source("broken.py", broken))
    assert not result.ok
    line = next(i for i, text in enumerate(broken.splitlines(), 1) if "undefined_thing" in text)
    error = next(d for d in result.diagnostics if d.severity == Severity.ERROR)
    assert (error.file, error.line) == ("broken.py", line)
    assert "undefined_thing" in error.message


def test_failing_reference_is_reported_with_its_line(cpu_client):
    seed_like = PROBLEM.replace("return [torch.randn(16)]", "return [torch.randn(D)]").replace(
        "_ext = load_inline", "INPUTS = get_inputs()\n_ext = load_inline"
    )
    result = cpu_client.compile(_source("ref_fails.py", seed_like))
    assert not result.ok
    message = result.diagnostics[0].message
    line = next(i for i, text in enumerate(seed_like.splitlines(), 1) if "torch.randn(D)" in text)
    assert "NameError: name 'D' is not defined" in message and f"ref_fails.py line {line}" in message
    assert (result.diagnostics[0].file, result.diagnostics[0].line) == ("ref_fails.py", line)


@pytest.mark.parametrize(
    "forged",
    ["not json", '{"stage": "x"}', '{"ok": true, "stage": "x", "builds": "nope"}'],
    ids=["not JSON", "no ok", "builds not a list"],
)
def test_a_status_file_the_job_overwrote_is_a_result_not_an_internal_error(cpu_client, forged):
    # The status file lies in the job's folder, where user code can write; the harness exits 1 after.
    hostile = f"import os\nopen('compile-status.json', 'w').write({forged!r})\nos._exit(1)\n" + PROBLEM
    result = cpu_client.compile(_source("forger.py", hostile))
    assert not result.ok
    assert "status file is not one the harness wrote" in result.diagnostics[0].message


def test_a_job_that_dies_shows_what_it_printed_on_both_streams(cpu_client):
    # On a GPU host torch warns on stderr at import ("No CUDA runtime is found"): what the module printed on
    # stdout before it died must still reach the user.
    dying = (
        "import os, signal, sys\nprint('stdout-before-death', flush=True)\n"
        "print('a library warning', file=sys.stderr, flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n" + PROBLEM
    )
    result = cpu_client.compile(_source("dying.py", dying))
    assert not result.ok
    text = "\n".join([*(d.message for d in result.diagnostics), result.log])
    assert "stdout-before-death" in text and "a library warning" in text, text


def test_a_job_that_loops_forever_is_killed_at_its_limit(short_client):
    start = time.monotonic()
    result = short_client.compile(_source("spin.py", "while True:\n    pass\n" + PROBLEM))
    elapsed = time.monotonic() - start
    assert not result.ok
    assert "did not finish within its time limit" in result.diagnostics[0].message
    assert SHORT_TIMEOUT_S <= elapsed < SHORT_TIMEOUT_S + 20


def test_jobs_cannot_reach_the_network(cpu_client, tmp_path):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted: list[object] = []
    listener.settimeout(60)

    def accept() -> None:
        # Nothing should connect: the accept ends by timeout or when the listener closes.
        with contextlib.suppress(OSError):
            accepted.append(listener.accept())

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    probe = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)\n" + PROBLEM
    result = cpu_client.compile(_source("phone_home.py", probe))
    listener.close()
    if result.ok:
        pytest.fail("the job reached a socket outside its network namespace")
    assert not accepted
    assert "OSError" in result.diagnostics[0].message or "Error" in result.diagnostics[0].message


@pytest.fixture(scope="module")
def single_slot(tmp_path_factory):
    state = tmp_path_factory.mktemp("one-slot")
    for client in _client(state, Limits(queue_size=1, compile_timeout_s=SHORT_TIMEOUT_S)):
        yield client, state


def _harness_processes(marker: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in command:
                found.append(command)
    return found


def test_a_full_queue_answers_resource_exhausted(single_slot):
    single_slot, state = single_slot
    # The first job says it runs (so it holds the one slot; in its cell, where the jail lets it write), then spins
    # until its time limit.
    spin = "open('job-started', 'w').close()\nwhile True:\n    pass\n" + PROBLEM
    busy = threading.Thread(target=single_slot.compile, args=(_source("queue_spin.py", spin),))
    busy.start()
    wait_until(lambda: list(state.glob("*/*/job-started")), "the first job runs")
    with pytest.raises(errors.ResourceExhausted) as caught:
        single_slot.compile(_source("second.py", PROBLEM))
    assert caught.value.reason == errors.Reason.QUEUE_FULL
    busy.join()


def test_a_client_past_its_deadline_has_its_job_killed(cpu_client):
    with ProfilerClient(cpu_client.target, timeout=5) as impatient, pytest.raises(errors.DeadlineExceeded):
        impatient.compile(_source("deadline_spin.py", "while True:\n    pass\n" + PROBLEM))
    deadline = time.monotonic() + 10
    while _harness_processes("deadline_spin.py") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _harness_processes("deadline_spin.py")


LAZY = PROBLEM.replace(
    '_ext = load_inline(name="twice_ext", cpp_sources=_cpp, functions=["twice"], extra_cflags=["-DOFFSET=0"])',
    """_cu = "__global__ void noop() {}"


def _ext():
    return load_inline(name="lazy_ext", cpp_sources=_cpp, cuda_sources=_cu, functions=["twice"])


def _cpu_ext():
    return load_inline(name="lazy_cpu_ext", cpp_sources=_cpp, functions=["twice"], extra_cflags=["-DOFFSET=0"])""",
).replace("return _ext.twice(x)", "return _ext().twice(x)")


def test_a_lazy_cuda_build_that_this_torch_cannot_make_is_a_warning_not_a_silent_ok(cpu_client):
    import torch

    result = cpu_client.compile(_source("lazy.py", LAZY))
    assert result.ok, result.diagnostics
    warnings = [d for d in result.diagnostics if d.severity == Severity.WARNING]
    names = [u.name for u in result.units]
    if torch.version.cuda is None:
        # The C++-only call is built here; the CUDA one is not, and the answer says so.
        assert names == ["lazy_cpu_ext"]
        assert len(warnings) == 1 and warnings[0].file == "lazy.py"
        assert "1 load_inline build(s) not made" in warnings[0].message and "has no CUDA" in warnings[0].message
    else:
        assert sorted(names) == ["lazy_cpu_ext", "lazy_ext"] and not warnings
