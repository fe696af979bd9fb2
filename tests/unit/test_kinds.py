"""Input kinds: which kind takes a file, what each verb needs of it, what runs under ncu by default."""

from __future__ import annotations

import pytest

from profsvc.config import Limits
from profsvc.kinds import KINDS, Verb, kind_named, kind_of
from profsvc.server.validation import validate_source
from profsvc_contract.errors import InvalidRequest, Reason
from profsvc_contract.models import KernelSource, SourceFile, SourceKind, Target

PUBLISHED = b"""import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(16, 16384)]
def get_init_inputs():
    return []
"""
PROGRAM = b"""import torch, nvtx
with nvtx.annotate("matmul", domain="demo"):
    torch.randn(64, 64, device="cuda") @ torch.randn(64, 64, device="cuda")
"""
PLAIN = b"import torch\nprint(torch.ones(4, device='cuda').sum())\n"


def _source(name: str, content: bytes, **extra) -> KernelSource:
    return KernelSource(main=SourceFile(name=name, content=content), **extra)


def test_every_kind_is_registered_once_and_found_by_name():
    assert sorted(k.kind.value for k in KINDS) == sorted(k.value for k in SourceKind if k != SourceKind.UNSPECIFIED)
    for kind in KINDS:
        assert kind_named(kind.kind) is kind


@pytest.mark.parametrize(
    ("name", "content", "kind"),
    [
        ("19_ReLU.py", PUBLISHED, SourceKind.PYTHON_PROBLEM),
        ("prog.py", PROGRAM, SourceKind.PYTHON_PROGRAM),
        ("p.cu", b"int main() { return 0; }", SourceKind.CUDA_PROGRAM),
    ],
)
def test_a_file_of_unspecified_kind_goes_to_the_first_kind_that_claims_it(name, content, kind):
    assert kind_of(SourceKind.UNSPECIFIED, name, content.decode()).kind == kind


def test_a_published_problem_profiles_and_times_its_reference_and_cannot_be_checked():
    for verb in (Verb.PROFILE, Verb.TIME, Verb.COMPILE):
        spec = validate_source(_source("19_ReLU.py", PUBLISHED), Limits(), verb)
        assert spec.kind == SourceKind.PYTHON_PROBLEM and spec.target == Target.REFERENCE
    for verb in (Verb.CHECK, Verb.EVALUATE):
        with pytest.raises(InvalidRequest) as caught:
            validate_source(_source("19_ReLU.py", PUBLISHED), Limits(), verb)
        assert caught.value.reason == Reason.MISSING_SYMBOL and "defines no ModelNew" in caught.value.message
    with pytest.raises(InvalidRequest, match="defines no ModelNew"):
        validate_source(_source("19_ReLU.py", PUBLISHED, target=Target.CANDIDATE), Limits(), Verb.PROFILE)


def test_a_problem_with_a_candidate_runs_it_unless_told_the_reference():
    problem = PUBLISHED + b"class ModelNew(Model):\n    pass\n"
    assert validate_source(_source("p.py", problem), Limits(), Verb.PROFILE).target == Target.CANDIDATE
    told = validate_source(_source("p.py", problem, target=Target.REFERENCE), Limits(), Verb.PROFILE)
    assert told.target == Target.REFERENCE


@pytest.mark.parametrize("verb", [Verb.CHECK, Verb.TIME, Verb.EVALUATE, Verb.LINT])
def test_a_program_is_profiled_not_judged(verb):
    with pytest.raises(InvalidRequest) as caught:
        validate_source(_source("prog.py", PROGRAM), Limits(), verb)
    assert caught.value.reason == Reason.BAD_SOURCE_KIND
    assert "prog.py is a Python program" in caught.value.message and "\n" not in caught.value.message


def test_a_programs_arguments_are_kept_and_bounded():
    spec = validate_source(_source("prog.py", PLAIN, args=["--n", "4"]), Limits(), Verb.PROFILE)
    assert spec.kind == SourceKind.PYTHON_PROGRAM and spec.args == ("--n", "4")
    with pytest.raises(InvalidRequest, match="too many program arguments"):
        validate_source(_source("prog.py", PLAIN, args=["x"] * 3), Limits(max_program_args=2), Verb.PROFILE)
    with pytest.raises(InvalidRequest, match="NUL"):
        validate_source(_source("prog.py", PLAIN, args=["a\0b"]), Limits(), Verb.PROFILE)


def test_default_kernel_selection_follows_the_source():
    from profsvc.ncu.command import marks_nvtx_ranges, marks_python_nvtx_ranges

    assert marks_python_nvtx_ranges(PROGRAM.decode())
    assert marks_python_nvtx_ranges("torch.cuda.nvtx.range_push('x')\n")
    assert not marks_python_nvtx_ranges(PLAIN.decode())
    assert not marks_nvtx_ranges("int main() {}")
