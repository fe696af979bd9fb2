"""The published-problem corpus (tests/problems): each file is a problem profsvc takes as a reference."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from profsvc.config import Limits
from profsvc.kinds import Verb
from profsvc.server.validation import validate_source
from profsvc_contract.models import KernelSource, SourceFile, SourceKind, Target

CORPUS = Path(__file__).parents[1] / "problems"
PROBLEMS = sorted(CORPUS.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(CORPUS).as_posix()


def test_the_corpus_is_large_and_varied():
    assert len(PROBLEMS) >= 50
    names = " ".join(path.stem for path in PROBLEMS)
    for op in (
        "matmul",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose",
        "batchnorm",
        "layernorm",
        "groupnorm",
        "instancenorm",
        "rmsnorm",
        "sum",
        "mean",
        "max",
        "argmax",
        "softmax",
        "log_softmax",
        "cumsum",
        "relu",
        "gelu",
        "pool",
        "scaled_dot_product_attention",
        "attention_by_hand",
        "loss",
        "mlp",
        "block",
    ):
        assert op in names, op


@pytest.mark.parametrize("path", PROBLEMS, ids=_name)
def test_a_published_problem_is_taken_as_a_reference(path):
    source = KernelSource(main=SourceFile(name=path.name, content=path.read_bytes()))
    for verb in (Verb.PROFILE, Verb.TIME):
        spec = validate_source(source, Limits(), verb)
        assert (spec.kind, spec.target) == (SourceKind.PYTHON_PROBLEM, Target.REFERENCE)


@pytest.mark.parametrize("path", PROBLEMS, ids=_name)
def test_a_published_problem_imports_and_its_reference_runs_on_the_cpu(path):
    spec = importlib.util.spec_from_file_location(f"published_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not hasattr(module, "ModelNew")
    torch.manual_seed(0)
    inputs = module.get_inputs()
    assert isinstance(inputs, list) and inputs
    assert all(isinstance(value, torch.Tensor) and value.device.type == "cpu" for value in inputs)
    model = module.Model(*module.get_init_inputs())
    # CPU half-precision matmuls are slow: the CPU check runs them in float32 (the GPU runs the file as written).
    inputs = [value.float() if value.dtype == torch.float16 else value for value in inputs]
    with torch.no_grad():
        output = model(*inputs)
    assert isinstance(output, torch.Tensor) and output.numel() > 0
