"""NVTX as users write it: profsvc's own domain for the harness, ncu's full filter syntax, the ranges of each launch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from profsvc.config import Limits, ServerConfig
from profsvc.host import HostInfo
from profsvc.kinds import Built, Verb, kind_named
from profsvc.metrics.analysis import analyze_report
from profsvc.ncu.command import ncu_command
from profsvc.ncu.locate import NcuInstall
from profsvc.report.text import render_text
from profsvc.scheduler.jobs import ProfileSpec
from profsvc.scheduler.ncu_options import profile_ncu_options
from profsvc.scheduler.scheduler import Scheduler
from profsvc.server.validation import validate_filter, validate_source
from profsvc.telemetry import Telemetry
from profsvc_contract.models import (
    CompileResult,
    GpuInfo,
    KernelFilter,
    KernelSource,
    NvtxRanges,
    ProfileResult,
    SourceFile,
)
from tests.conftest import FIXTURES
from tests.unit.test_validation import LIMITS

EXAMPLES = FIXTURES.parent.parent / "examples"
ARCHETYPES = sorted((FIXTURES / "archetypes").glob("*.ncu-rep"))
# A problem whose own code opens ranges named as the harness's, in the default domain, both ways users do.
SAME_NAMES = (FIXTURES / "seed47.py").read_text().replace(
    "import torch\n",
    "import nvtx\nimport torch\n",
    1,
) + (
    "\n\n_forward = ModelNew.forward\n\n\n"
    "def _marked(self, *args):\n"
    '    torch.cuda.nvtx.range_push("profsvc")\n'
    '    with nvtx.annotate("profsvc-warmup"):\n'
    "        out = _forward(self, *args)\n"
    "    torch.cuda.nvtx.range_pop()\n"
    "    return out\n\n\n"
    "ModelNew.forward = _marked\n"
)


def _scheduler(tmp_path: Path) -> Scheduler:
    host = HostInfo(
        gpus=[GpuInfo(index=0, name="NVIDIA H200", compute_capability="9.0", memory_bytes=1 << 30)],
        ncu=NcuInstall(path="/usr/local/bin/ncu", version="2025.3.1"),
    )
    return Scheduler(ServerConfig(state_dir=tmp_path / "state"), host, None, Telemetry())


def _profile_command(scheduler: Scheduler, name: str, text: str, kernel_filter: KernelFilter, cell: Path) -> list[str]:
    """The ncu command line a Profile of this source runs (the scheduler's and the kind's own code)."""
    source = validate_source(KernelSource(main=SourceFile(name=name, content=text.encode())), Limits(), Verb.PROFILE)
    spec = ProfileSpec(source=source, kernel_filter=kernel_filter)
    target = kind_named(source.kind).run_target(scheduler.kinds, source, Built(compile=CompileResult(ok=True)))
    options = profile_ncu_options(spec, cell / "report.ncu-rep", target.default_nvtx, scheduler.config.limits)
    return ncu_command("ncu", options, target.argv(cell))


def _includes(command: list[str]) -> list[str]:
    return [command[i + 1] for i, arg in enumerate(command) if arg == "--nvtx-include"]


def test_user_ranges_named_as_the_harnesss_leave_the_command_line_as_it_was(tmp_path):
    scheduler = _scheduler(tmp_path)
    assert "nvtx.annotate" in SAME_NAMES and 'range_push("profsvc")' in SAME_NAMES
    plain = _profile_command(scheduler, "k.py", (FIXTURES / "seed47.py").read_text(), KernelFilter(), tmp_path)
    marked = _profile_command(scheduler, "k.py", SAME_NAMES, KernelFilter(), tmp_path)
    assert marked == plain
    # ncu's syntax for a push/pop range of a named domain (Nsight Compute CLI guide, "NVTX Filtering").
    assert _includes(marked) == ["profsvc@profsvc/"]


FULL_SYNTAX = [
    "demo@step/",
    "regex:train@layer[0-9]+/",
    "outer/*/inner",
    "outer/+/inner",
    "[bottom",
    "top]",
    "first,second",
    "demo@first,second",
    "Domain B@A range/*/Range Z]",
]


@pytest.mark.parametrize("include", FULL_SYNTAX)
def test_ncus_full_filter_syntax_passes_validation_unchanged(include):
    assert validate_filter(KernelFilter(nvtx_include=[include]), LIMITS).nvtx_include == [include]


def test_a_requests_filter_goes_to_ncu_as_given_in_place_of_the_harness_range(tmp_path):
    scheduler = _scheduler(tmp_path)
    text = (FIXTURES / "seed47.py").read_text()
    command = _profile_command(scheduler, "k.py", text, KernelFilter(nvtx_include=FULL_SYNTAX), tmp_path)
    assert _includes(command) == FULL_SYNTAX
    assert command.count("--nvtx") == 1


def test_a_program_marking_ranges_in_named_domains_has_them_profiled_by_default(tmp_path):
    scheduler = _scheduler(tmp_path)
    program = 'import nvtx, torch\n\n@nvtx.annotate("step", domain="train")\ndef step():\n    torch.ones(1)\n'
    includes = _includes(_profile_command(scheduler, "prog.py", program, KernelFilter(), tmp_path))
    # Without `@` ncu reads the default domain only: named domains need their own include.
    assert any("@" in include for include in includes) and any("@" not in include for include in includes)
    unmarked = "import torch\nprint(torch.ones(4).sum())\n"
    assert _includes(_profile_command(scheduler, "prog.py", unmarked, KernelFilter(), tmp_path)) == []


@pytest.mark.parametrize("report", ARCHETYPES, ids=lambda p: p.stem)
def test_each_launch_carries_the_ranges_it_ran_under(report):
    # Each archetype program pushes one range of the default domain around its kernel: read from its source.
    source = (EXAMPLES / "archetypes" / f"{report.stem}.cu").read_text()
    pushed = re.findall(r'nvtxRangePushA\("([^"]+)"\)', source)
    assert pushed, report.stem
    kernels = analyze_report(report).kernels
    assert [k.nvtx for k in kernels] == [[NvtxRanges(domain="", push_pop=pushed, start_end=[])]]
    assert f'"push_pop":["{pushed[0]}"]' in kernels[0].model_dump_json()
    text = render_text(ProfileResult(ok=True, kernels=kernels))
    assert f"\nNVTX: {pushed[0]}\n" in text


def test_the_innermost_range_prefers_the_users_domains_to_profsvcs():
    from profsvc.metrics.extract import innermost_range

    stacks = [
        NvtxRanges(domain="profsvc", push_pop=["profsvc"]),
        NvtxRanges(domain="", push_pop=["outer", "inner"]),
    ]
    assert innermost_range(stacks) == "inner"
    assert innermost_range(stacks[:1]) == "profsvc@profsvc"
    assert innermost_range([NvtxRanges(domain="train", start_end=["epoch"])]) == "train@epoch"
    assert innermost_range([]) == ""


# Captured on a GPU by `tools/gpu_suite.sh inputs` (its nvtx_domains/report.ncu-rep), committed here.
DOMAINS_REPORT = FIXTURES / "programs" / "nvtx_domains.ncu-rep"


@pytest.mark.skipif(not DOMAINS_REPORT.is_file(), reason="capture it with tools/gpu_suite.sh inputs, then commit it")
def test_the_range_stacks_of_a_program_with_two_domains():
    # From the program's source: a matmul in alpha@stage, a softmax in beta@stage (through a decorator), and a
    # cumsum in a default-domain range named "profsvc"; the warm-up outside every range is not in the report.
    source = (EXAMPLES / "programs" / "nvtx_domains.py").read_text()
    assert 'annotate("stage", domain="alpha")' in source and 'range_push("profsvc")' in source
    kernels = analyze_report(DOMAINS_REPORT).kernels
    where = {k.name: (k.nvtx[0].domain, k.nvtx[0].push_pop) for k in kernels}
    assert all(len(k.nvtx) == 1 for k in kernels)
    assert set(where.values()) == {("alpha", ["stage"]), ("beta", ["stage"]), ("", ["profsvc"])}
    assert all(("softmax" in n.lower()) == (w == ("beta", ["stage"])) for n, w in where.items())
    assert all(("scan" in n.lower()) == (w == ("", ["profsvc"])) for n, w in where.items())
    # None of them is taken for the harness's: the analysis keeps every one.
    assert [k.launch_index for k in kernels] == list(range(len(kernels)))
