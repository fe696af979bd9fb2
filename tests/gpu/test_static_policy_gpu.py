"""Evaluate under static-check policies on a GPU, and the corpus's honest look-alikes run for real.

A partial replacement (its own max-pool kernel, PyTorch's convolution and linear) passes evaluate with warnings
and fails it under a policy that makes torch_fallback an error; a candidate with no kernel of its own computes the
right answer in PyTorch and fails evaluate all the same. Every honest look-alike must build, match its reference
and pass: a look-alike that only lints clean would prove nothing. Every runtime-only trick, which lint passes, must
fail evaluate through the guard its file names.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from profsvc_client.client import ProfilerClient, load_source
from profsvc_contract.models import RuleSeverity, StaticPolicy

pytestmark = pytest.mark.gpu

CORPUS = Path(__file__).resolve().parents[1] / "staticcheck_corpus"
PARTIAL = CORPUS / "honest" / "partial_replacement_maxpool.py"
NO_KERNEL = CORPUS / "gaming" / "no_custom_kernel__scalar_multiply.py"
# Look-alikes that need a package beyond torch and Triton, and the one built by torch's own (slow) build.
_NEEDS = {"result_caching__cute_compile_cache.py": "cutlass", "result_caching__tilelang_build_cache.py": "tilelang"}
_OWN_BUILD = {"result_caching__source_file_at_import.py"}
LOOK_ALIKES = sorted(p for p in (CORPUS / "honest").glob("*__*.py") if p.name not in _OWN_BUILD)
RUNTIME = sorted((CORPUS / "runtime").glob("*.py"))
# What each runtime guard says, in the words of its kind (tests/staticcheck_corpus/README.md). Work left running
# on a GPU it fills holds back the correctness check's marker kernel, and the benchmark's decisive flag (its
# kernel's own time over the events' time around the call) fails it instead.
_GUARD_SAYS = {
    "no_custom_kernel_ran": ("no kernel of the candidate's own ran",),
    "output_not_written": ("unwritten elements",),
    "inputs_changed": ("changed its input",),
    "results_from_cache": ("trials matched the reference",),
    "work_left_running": ("work left running", "work ran outside the timed stream"),
}


@pytest.fixture(scope="module")
def tools(served):
    with ProfilerClient(served, timeout=900) as client:
        yield client


def test_partial_replacement_passes_with_warnings_and_fails_a_strict_policy(tools):
    result = tools.evaluate(load_source(PARTIAL), skip_profile=True)
    assert result.correctness.ok, result.correctness.message
    assert result.ok and result.static_check.ok
    assert {f.severity for f in result.static_check.findings} == {"warning"}
    assert result.static_check.policy.name == "default"
    strict = StaticPolicy(name="strict", overrides=[RuleSeverity(rule_id="torch_fallback", severity="error")])
    judged = tools.evaluate(load_source(PARTIAL), skip_profile=True, policy=strict)
    assert judged.correctness.ok  # the same kernels, the same right answer ...
    assert not judged.ok and judged.static_check.policy == strict  # ... and the caller's policy fails it
    assert "policy strict (torch_fallback=error)" in judged.report_text


def test_full_fallback_fails_evaluate_although_its_answer_is_right(tools):
    result = tools.evaluate(load_source(NO_KERNEL), skip_profile=True)
    # Its output matches; what fails it is that none of the work is its own, seen at run time as well as statically.
    assert not result.correctness.ok
    assert "no kernel of the candidate's own ran" in result.correctness.message, result.correctness.message
    assert not result.ok
    assert [f.rule_id for f in result.static_check.findings if f.severity == "error"] == ["no_custom_kernel"]


@pytest.mark.parametrize("path", LOOK_ALIKES, ids=lambda p: p.name)
def test_honest_look_alike_passes_evaluate(tools, path):
    if path.name in _NEEDS and importlib.util.find_spec(_NEEDS[path.name]) is None:
        pytest.skip(f"{_NEEDS[path.name]} is not installed on this host")
    result = tools.evaluate(load_source(path), skip_profile=True)
    assert result.correctness.ok, (result.correctness.message, result.correctness.error)
    assert result.static_check.ok and not result.static_check.findings
    assert result.ok, result.report_text


@pytest.mark.parametrize("path", RUNTIME, ids=lambda p: p.name)
def test_runtime_only_trick_fails_evaluate_by_its_guard(tools, path):
    says = _GUARD_SAYS[path.name.split("__")[0]]
    result = tools.evaluate(load_source(path), skip_profile=True)
    assert not result.correctness.error.kind, result.correctness.error  # it ran: the guard, not a build, fails it
    assert not result.ok
    failed_by = [] if result.correctness.ok else [result.correctness.message]
    failed_by += result.benchmark.decisive_flags
    assert any(phrase in reason for phrase in says for reason in failed_by), (failed_by, result.report_text)
