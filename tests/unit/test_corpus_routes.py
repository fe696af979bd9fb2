"""The corpus of build forms (tests/corpus): each call's route, reason and normalized flags are the manifest's.

Decided without a GPU and without building: the corpus modules are imported with a stand-in for torch's builder
that records each load_inline/load call (lazy calls are found as the compile step finds them), and every call
goes through the same pure decisions the builder makes.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from profsvc.build import routes
from profsvc.worker.prebuild import lazy_load_inline_calls

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
MANIFEST = tomllib.loads((CORPUS / "manifest.toml").read_text())["file"]
# The forms generated candidates take (issue 17): the corpus has each at least once.
REQUIRED_FORMS = {
    "empty_flags",
    "verbose",
    "extra_include_paths",
    "O3",
    "fast_math",
    "arch",
    "gencode",
    "ldflags_cublas",
    "cublas_v2_h",
    "cuda_fp16_h",
    "cuda_bf16_h",
    "mma_h",
    "cooperative_groups_h",
    "cuda_context_h",
    "cuda_guard_h",
    "multiple_load_inline",
    "load_files",
    "cpp_definitions",
    "pybind11_module",
    "templates",
    "host_helpers",
    "current_stream",
    "triton",
}
# What shows a file has a form, where its text can show it.
EVIDENCE = {
    "empty_flags": r"""\[\s*""\s*[],]""",
    "verbose": r"verbose=True",
    "extra_include_paths": r"extra_include_paths=\[",
    "O3": r'"-O3',
    "fast_math": r"--use_fast_math",
    "arch": r'"-arch=sm_',
    "gencode": r'"-gencode',
    "ldflags_cublas": r'extra_ldflags=\["-lcublas"\]',
    "cublas_v2_h": r"#include <cublas_v2\.h>",
    "cuda_fp16_h": r"#include <cuda_fp16\.h>",
    "cuda_bf16_h": r"#include <cuda_bf16\.h>",
    "mma_h": r"#include <mma\.h>",
    "cooperative_groups_h": r"#include <cooperative_groups\.h>",
    "cuda_context_h": r"#include <ATen/cuda/CUDAContext\.h>",
    "cuda_guard_h": r"#include <c10/cuda/CUDAGuard\.h>",
    "multiple_load_inline": r"load_inline\((?s:.*)load_inline\(",
    "load_files": r"\bload\(\s*name=",
    "pybind11_module": r"PYBIND11_MODULE\(",
    "templates": r"template\s*<",
    "current_stream": r"getCurrentCUDAStream\(\)",
    "triton": r"@triton\.jit",
    "at_dispatch": r"AT_DISPATCH_",
    "thrust": r"thrust::",
}
# The server target the decisions see (an H200: TORCH_CUDA_ARCH_LIST=9.0).
SERVER_ARCH = "9.0"


def _entry_id(entry: dict[str, Any]) -> str:
    return str(entry["name"]).removesuffix(".py")


def _recorded_calls(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Import a corpus module with torch's builder replaced by a recorder: its calls, bound to torch's signature."""
    from torch.utils import cpp_extension

    calls: list[tuple[str, dict[str, Any]]] = []

    def recorder(kind: str, function: Any) -> Any:
        def record(*args: Any, **kwargs: Any) -> SimpleNamespace:
            bound = inspect.signature(function).bind(*args, **kwargs)
            bound.apply_defaults()
            calls.append((kind, dict(bound.arguments)))
            return SimpleNamespace()

        return record

    monkeypatch.setattr(cpp_extension, "load_inline", recorder("load_inline", cpp_extension.load_inline))
    monkeypatch.setattr(cpp_extension, "load", recorder("load", cpp_extension.load))
    spec = importlib.util.spec_from_file_location(f"profsvc_corpus_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # Calls made on the first forward: found the way the compile step finds them.
    for args, kwargs in lazy_load_inline_calls(path.read_text(), vars(module)):
        cpp_extension.load_inline(*args, **kwargs)
    return calls


def _decided(kind: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], routes.RouteDecision]:
    if kind == "load_inline":
        normalized = routes.normalize_arguments(arguments, server_arch=SERVER_ARCH)
        return normalized, routes.decide(normalized)
    texts = {s: Path(s).read_text() for s in routes.source_paths(arguments)}
    return routes.load_call(arguments, texts, server_arch=SERVER_ARCH)


def test_the_manifest_lists_every_corpus_file_and_nothing_else():
    listed = [entry["name"] for entry in MANIFEST]
    assert len(listed) == len(set(listed))
    assert set(listed) == {path.name for path in CORPUS.glob("*.py")}
    assert len(listed) >= 30


def test_the_corpus_covers_every_form_real_candidates_take():
    covered = {form for entry in MANIFEST for form in entry["forms"]}
    assert REQUIRED_FORMS <= covered, REQUIRED_FORMS - covered


@pytest.mark.parametrize("entry", MANIFEST, ids=_entry_id)
def test_each_file_is_a_kernelbench_module_with_the_forms_it_claims(entry):
    text = (CORPUS / entry["name"]).read_text()
    defined = {node.name for node in ast.parse(text).body if isinstance(node, ast.ClassDef | ast.FunctionDef)}
    assert {"Model", "ModelNew", "get_inputs", "get_init_inputs"} <= defined
    for form in entry["forms"]:
        if form in EVIDENCE:
            assert re.search(EVIDENCE[form], text), f"{form} claimed, not found"


@pytest.mark.parametrize("entry", MANIFEST, ids=_entry_id)
def test_each_calls_route_and_normalized_flags_are_the_manifests(entry, monkeypatch):
    path = CORPUS / entry["name"]
    expected = entry.get("call", [])
    if not expected:
        # A Triton candidate: nothing for the builder.
        assert "cpp_extension" not in path.read_text()
        return
    pytest.importorskip("torch")
    calls = _recorded_calls(path, monkeypatch)
    assert [arguments["name"] for _, arguments in calls] == [call["name"] for call in expected]
    for (kind, arguments), call in zip(calls, expected, strict=True):
        normalized, decision = _decided(kind, arguments)
        flags = {
            "cflags": normalized.get("extra_cflags"),
            "cuda_cflags": normalized.get("extra_cuda_cflags"),
            "ldflags": normalized.get("extra_ldflags"),
        }
        assert flags == {key: call[key] for key in flags}, call["name"]
        assert (decision.route, decision.glue_header, decision.reason) == (
            call["route"],
            call.get("glue", ""),
            call.get("reason", ""),
        ), decision.declined
        assert decision.detail == call.get("detail", "")
        assert (decision.fast is not None) == (call["route"] != routes.ROUTE_TORCH)
