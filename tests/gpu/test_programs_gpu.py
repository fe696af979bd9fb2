"""Python programs and NVTX ranges on a GPU, through `profsvc serve`: as one runs `ncu python prog.py`.

A Triton program and a torch program profiled with their figures, hints and (Triton's) source lines in the
user's file; the programs that profile nothing, each told in one line naming why; and NVTX as users write
it: ranges in two domains and a range named as the harness's, each filter selecting the right kernels.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from profsvc_client.client import ProfilerClient
from profsvc_contract.models import KernelFilter, KernelSource, ProfileResult, SourceFile

pytestmark = pytest.mark.gpu

PROGRAMS = Path(__file__).parents[2] / "examples" / "programs"
TRITON = (PROGRAMS / "triton_add.py").read_bytes()
TORCH = (PROGRAMS / "torch_layers.py").read_bytes()
# User ranges in two domains (one through a decorator), and a range of the default domain named as the harness's.
DOMAINS = (PROGRAMS / "nvtx_domains.py").read_bytes()

EXITS = b"""import sys
import torch

x = torch.ones(1024, device="cuda") * 2
print("partial sum", float(x.sum()))
sys.exit(3)
"""

NEVER_REACHED = b"""import sys
import nvtx
import torch

x = torch.ones(1024, device="cuda")
if "--profile" in sys.argv:
    with nvtx.annotate("step"):
        x = x * 2
print("done:", float(x.sum()))
"""

# A published problem whose forward opens the harness's range names in the default domain.
SAME_NAMES = b"""import nvtx
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        torch.cuda.nvtx.range_push("profsvc")
        y = torch.relu(x)
        torch.cuda.nvtx.range_pop()
        with nvtx.annotate("profsvc-warmup"):
            return y * 2


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
"""
PLAIN = b"""import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def gpu_client(served):
    with ProfilerClient(served, timeout=900) as client:
        yield client


def _profile(client: ProfilerClient, name: str, text: bytes, *args: str, **filters: object) -> ProfileResult:
    source = KernelSource(main=SourceFile(name=name, content=text), args=list(args))
    return client.profile(source, kernel_filter=KernelFilter(**filters))


def _ranges(kernel) -> set[tuple[str, tuple[str, ...]]]:
    return {(stack.domain, tuple(stack.push_pop)) for stack in kernel.nvtx}


def _figures_and_hints(result: ProfileResult) -> None:
    assert result.ok, result.report_text
    assert result.target == "program"
    for kernel in result.kernels:
        assert kernel.value("duration") > 0 and kernel.figures["duration"].unit == "ns"
        assert kernel.stalls, kernel.name
    assert any(kernel.hints for kernel in result.kernels)
    assert result.ncu.passes and all(p > 0 for p in result.ncu.passes)


def test_a_triton_program_is_profiled_with_its_source_lines(gpu_client):
    result = _profile(gpu_client, "triton_add.py", TRITON)
    _figures_and_hints(result)
    assert [k.name for k in result.kernels] == ["add_kernel"]  # the warm-up call was outside the range
    kernel = result.kernels[0]
    assert _ranges(kernel) == {("demo", ("vector_add",))}
    assert kernel.value("dram_bytes_read") >= 2 * 4 * (1 << 24) * 0.9  # two float32 inputs of 2^24 elements
    # Triton's line information names the user's own file and lines.
    lines = TRITON.decode().splitlines()
    ours = [h for h in kernel.hotspots if h.file.rsplit("/", 1)[-1] == "triton_add.py"]
    assert ours, [h.file for h in kernel.hotspots]
    first = lines.index("def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):") + 1  # 1-based
    body = range(first, first + lines[first:].index("") + 1)  # the def line to the kernel's last line
    assert all(h.line in body for h in ours), [(h.line, h.text) for h in ours]
    assert any("tl.load" in h.text or "tl.store" in h.text for h in ours)
    assert "triton_add.py:" in result.report_text


def test_a_torch_program_is_profiled_in_its_ranges(gpu_client):
    result = _profile(gpu_client, "torch_prog.py", TORCH)
    _figures_and_hints(result)
    in_linear = [k for k in result.kernels if ("", ("linear",)) in _ranges(k)]
    in_softmax = [k for k in result.kernels if ("", ("softmax",)) in _ranges(k)]
    assert in_linear and in_softmax and len(in_linear) + len(in_softmax) == len(result.kernels)
    assert all(re.search("(?i)softmax", k.name) for k in in_softmax)


def test_a_program_that_exits_non_zero_says_so_with_its_last_output(gpu_client):
    result = _profile(gpu_client, "exits.py", EXITS)
    assert not result.ok and result.error.kind == "program_exit"
    assert result.error.message == "exits.py exited with status 3 (last output: 'partial sum 2048.0')"
    assert "partial sum 2048.0" in result.error.detail and "==PROF==" not in result.error.detail


def test_a_program_that_never_reaches_its_range_says_so(gpu_client):
    result = _profile(gpu_client, "never.py", NEVER_REACHED)
    assert not result.ok and result.error.kind == "nvtx_range_not_reached"
    assert result.error.message.startswith("never.py ran to its end without opening an NVTX range")
    assert result.error.message.endswith("(last output: 'done: 1024.0')")
    # Given the argument that takes it into its range, it is profiled.
    reached = _profile(gpu_client, "never.py", NEVER_REACHED, "--profile")
    assert reached.ok and len(reached.kernels) == 1 and _ranges(reached.kernels[0]) == {("", ("step",))}


def test_a_program_that_launches_nothing_that_matches_says_so(gpu_client):
    result = _profile(gpu_client, "torch_prog.py", TORCH, name_regex="no_such_kernel")
    assert not result.ok and result.error.kind == "no_kernels_profiled"
    assert result.error.message.startswith(
        "torch_prog.py opened NVTX ranges (linear, softmax) but launched no kernel that matches --kernel"
    )
    assert "(last output: 'rows 4096')" in result.error.message


def _user_ranges(kernel) -> set[tuple[str, tuple[str, ...]]]:
    """The kernel's ranges in the program's own domains: a library's (CUB's "CCCL" around its scans) left out."""
    return {where for where in _ranges(kernel) if where[0] in ("alpha", "beta", "")}


def test_each_filter_selects_the_kernels_of_its_domain(gpu_client):
    everything = _profile(gpu_client, "domains.py", DOMAINS)
    assert everything.ok, everything.report_text
    by_range: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    for kernel in everything.kernels:
        ranges = _user_ranges(kernel)
        # Each kernel in one of the program's ranges, or, as ncu 2025.3 sometimes reports CUB's set-up kernel
        # (seen on an H200), in its library's range alone.
        assert len(ranges) == 1 or (not ranges and _ranges(kernel)), (kernel.name, _ranges(kernel))
        for where in ranges:
            by_range.setdefault(where, set()).add(kernel.name)
    assert set(by_range) == {("alpha", ("stage",)), ("beta", ("stage",)), ("", ("profsvc",))}
    assert all(re.search("(?i)softmax", name) for name in by_range[("beta", ("stage",))])
    assert all(re.search("(?i)scan", name) for name in by_range[("", ("profsvc",))])
    for include, where in [
        ("alpha@stage/", ("alpha", ("stage",))),
        ("beta@stage/", ("beta", ("stage",))),
        ("profsvc/", ("", ("profsvc",))),
        ("regex:al.*@st.*/", ("alpha", ("stage",))),
    ]:
        selected = _profile(gpu_client, "domains.py", DOMAINS, nvtx_include=[include])
        assert selected.ok, (include, selected.report_text)
        assert {k.name for k in selected.kernels} >= by_range[where], include
        assert all(_user_ranges(k) in ({where}, set()) for k in selected.kernels), include
    # profsvc's own domain holds none of the program's ranges.
    harness = _profile(gpu_client, "domains.py", DOMAINS, nvtx_include=["profsvc@profsvc/"])
    assert not harness.ok and harness.error.kind == "no_kernels_profiled"
    assert "opened NVTX ranges (alpha@stage, beta@stage, profsvc)" in harness.error.message


def test_a_problems_own_ranges_named_as_the_harnesss_change_nothing_profsvc_selects(gpu_client):
    plain = _profile(gpu_client, "plain.py", PLAIN)
    marked = _profile(gpu_client, "same_names.py", SAME_NAMES)
    assert plain.ok and marked.ok, marked.report_text
    assert plain.target == marked.target == "reference"
    # Only profsvc's own ranges are selected (a primed warm worker adds its warm-up range).
    selected = re.findall(r"--nvtx-include (\S+)", marked.ncu.command)
    assert "profsvc@profsvc/" in selected and set(selected) <= {"profsvc@profsvc/", "profsvc@profsvc-warmup/"}
    # The measured call's kernels, the same as without the user's ranges: the one in the user's own
    # "profsvc-warmup" range is the problem's, not a warm worker's.
    assert [k.name for k in marked.kernels] == [k.name for k in plain.kernels] and len(plain.kernels) == 2
    assert _ranges(marked.kernels[0]) == {("profsvc", ("profsvc",)), ("", ("profsvc",))}
    assert _ranges(marked.kernels[1]) == {("profsvc", ("profsvc",)), ("", ("profsvc-warmup",))}
    assert all(_ranges(k) == {("profsvc", ("profsvc",))} for k in plain.kernels)
