"""The builder's routes: torch headers out of nvcc's unit, host glue at -O1 with a pch, then the build as written."""

from __future__ import annotations

import ast
import copy
import subprocess

import pytest

from profsvc.build.inline_builder import _host_cflags, build_inline, prepare_pch, split_arguments
from profsvc.worker.inline_split import split_source
from tests.conftest import FIXTURES

PCH = ["-include", "/cache/pch/0123/torch_extension.h"]
TORCH_INCLUDE = "#include <torch/extension.h>"


def _seed_arguments() -> dict:
    """The seed's load_inline call as written in ext(), its sources resolved from the module's globals."""
    tree = ast.parse((FIXTURES / "seed47.py").read_text())
    strings = {
        target.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id in ("_cpp_src", "_cuda_src")
    }
    call = next(
        node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "load_inline"
    )
    arguments = {}
    for keyword in call.keywords:
        value = keyword.value
        arguments[keyword.arg] = strings[value.id] if isinstance(value, ast.Name) else ast.literal_eval(value)
    return arguments


SEED = _seed_arguments()


def test_seed_arguments_are_the_ones_written_in_the_seed():
    assert SEED["name"] == "vga_linear_probe"
    assert SEED["extra_cflags"] == ["-O3"]
    assert TORCH_INCLUDE in SEED["cuda_sources"]


def test_seed_fast_route_keeps_torch_out_of_the_cuda_unit():
    fast = split_arguments(SEED, PCH)
    assert fast is not None
    assert fast["no_implicit_headers"] is True
    assert "torch/extension.h" not in fast["cuda_sources"]
    assert "vga_linear_kernel" in fast["cuda_sources"]
    assert fast["cuda_sources"] == split_source(SEED["cuda_sources"]).cuda


def test_seed_fast_route_host_unit_is_torch_header_then_user_cpp_then_host_part():
    fast = split_arguments(SEED, PCH)
    assert fast is not None
    cpp = fast["cpp_sources"]
    assert cpp[0] == TORCH_INCLUDE
    assert cpp[1] == SEED["cpp_sources"]
    assert cpp[2] == split_source(SEED["cuda_sources"]).host
    assert len(cpp) == 3
    assert "vga_linear_forward" in cpp[2]


def test_seed_fast_route_host_flags_are_O1_and_the_pch():
    fast = split_arguments(SEED, PCH)
    assert fast is not None
    assert fast["extra_cflags"] == ["-O1", *PCH]


def test_fast_route_keeps_the_users_other_host_flags_and_arguments():
    arguments = {**SEED, "extra_cflags": ["-O3", "-DFAST=1", "-Ofast", "-g", "-DOPT=-O2"]}
    before = copy.deepcopy(arguments)
    fast = split_arguments(arguments, PCH)
    assert fast is not None
    assert fast["extra_cflags"] == ["-DFAST=1", "-g", "-DOPT=-O2", "-O1", *PCH]
    for key in ("name", "functions", "verbose", "extra_cuda_cflags"):
        assert fast[key] == arguments[key]
    assert arguments == before  # the caller's arguments are left as they were


def test_fast_route_without_user_host_flags_or_pch():
    arguments = {key: value for key, value in SEED.items() if key != "extra_cflags"}
    fast = split_arguments(arguments, [])
    assert fast is not None
    assert fast["extra_cflags"] == ["-O1"]


def test_cuda_sources_given_as_a_list_are_joined():
    head, tail = SEED["cuda_sources"].split("__global__", 1)
    fast = split_arguments({**SEED, "cuda_sources": [head, "__global__" + tail]}, PCH)
    assert fast is not None
    assert fast["cuda_sources"] == split_source(head + "\n__global__" + tail).cuda


def test_cpp_sources_given_as_a_list_keep_their_order():
    fast = split_arguments({**SEED, "cpp_sources": ["// one", SEED["cpp_sources"]]}, PCH)
    assert fast is not None
    assert fast["cpp_sources"][:3] == [TORCH_INCLUDE, "// one", SEED["cpp_sources"]]


TEMPLATED = (
    TORCH_INCLUDE
    + "\ntemplate <typename T> __global__ void k(T* x) {}\n"
    + "torch::Tensor run(torch::Tensor x) {\n  k<float><<<1, 1>>>(x.data_ptr<float>());\n  return x;\n}\n"
)


@pytest.mark.parametrize(
    "change",
    [
        {"cuda_sources": TEMPLATED, "functions": ["run"]},
        {"functions": None},
        {"cuda_sources": None},
        {"cuda_sources": "  \n"},
        {"cuda_sources": []},
    ],
    ids=["templated launch", "no functions", "no cuda", "blank cuda", "empty cuda list"],
)
def test_no_fast_route_when_the_source_does_not_allow_it(change):
    assert split_arguments({**SEED, **change}, PCH) is None


def test_no_fast_route_without_functions_key():
    arguments = {key: value for key, value in SEED.items() if key != "functions"}
    assert split_arguments(arguments, PCH) is None


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (None, ["-O1"]),
        ([], ["-O1"]),
        (["-O3"], ["-O1"]),
        (["-O", "-O0", "-Os", "-Og", "-Ofast"], ["-O1"]),
        (["-Wall", "-O2", "-std=c++17"], ["-Wall", "-std=c++17", "-O1"]),
        (["-DLEVEL=-O3", "-fopenmp"], ["-DLEVEL=-O3", "-fopenmp", "-O1"]),
    ],
)
def test_host_cflags_replace_the_optimisation_level_with_O1(flags, expected):
    assert _host_cflags(flags) == expected


def _builder(tmp_path, build):
    """build_inline over a stand-in for torch's load_inline (`build(kwargs)`), the pch step recorded, not run."""

    def prepare(cache_root, staging, flags, includes, light=False):
        return ["-include", f"light={light}"]

    return lambda arguments: build_inline(arguments, "key", tmp_path / "cache", tmp_path / "staging", build, prepare)


def test_the_light_header_is_tried_first_then_the_full_one_each_with_its_own_sources(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    calls = []

    def build(**kwargs):
        calls.append(kwargs)
        kwargs["cpp_sources"].append("PYBIND11_MODULE(...)")  # what torch's load_inline does to the list
        if "light=True" in kwargs["extra_cflags"]:
            raise RuntimeError("error: 'nn' is not a member of 'torch'")
        return "module"

    outcome = _builder(tmp_path, build)(SEED)
    assert outcome.ok
    light, full = calls
    assert light["extra_cflags"][-2:] == ["-include", "light=True"]
    assert full["extra_cflags"][-2:] == ["-include", "light=False"]
    assert full["cpp_sources"].count("PYBIND11_MODULE(...)") == 1  # not the failed try's binding too
    assert light["build_directory"] != full["build_directory"]
    assert outcome.route == "split" and outcome.fallback_seconds > 0


def test_a_build_the_light_header_serves_is_split_light(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    calls = []

    def build(**kwargs):
        calls.append(kwargs)
        return "module"

    outcome = _builder(tmp_path, build)(SEED)
    assert outcome.ok
    assert len(calls) == 1 and outcome.route == "split-light"
    assert outcome.fallback_seconds == 0


@pytest.mark.parametrize(
    ("ninja_says", "routes"),
    [
        ("[1/3] nvcc\nFAILED: cuda.cuda.o \nnvcc ... error: expected a ';'", ["light=True", "as written"]),
        ("[1/3] nvcc\nFAILED: [code=1] cuda.cuda.o \nnvcc ... error", ["light=True", "as written"]),
        ("[1/3] c++\nFAILED: main.o \nc++ ... error: 'nn' is not a member of 'torch'", ["light=True", "light=False"]),
        ("[1/3] c++\nFAILED: [code=1] main.o \nc++ ... error", ["light=True", "light=False"]),
        ("[1/3] c++\nFAILED: cuda.cuda.o \n...\nFAILED: main.o \n...", ["light=True", "light=False"]),
        ("[1/3] c++\nFAILED: main.o \nmain.cpp:3: #error FAILED: cuda.cuda.o", ["light=True", "light=False"]),
        ("[1/3] nvcc\nFAILED: cuda.cuda.o \ncuda.cu:3: error: #error FAILED: main.o", ["light=True", "as written"]),
        ("the precompiled header could not be made", ["light=True", "light=False", "as written"]),
    ],
)
def test_the_full_header_is_tried_only_where_the_glue_unit_may_have_failed(monkeypatch, tmp_path, ninja_says, routes):
    pytest.importorskip("torch")
    tried = []

    def build(**kwargs):
        flags = kwargs.get("extra_cflags") or []
        tried.append(flags[-1] if flags[-2:-1] == ["-include"] else "as written")
        if tried[-1] == "light=True" or (tried[-1] == "light=False" and "FAILED" not in ninja_says):
            raise RuntimeError(f"Error building extension 'vga_linear_probe': {ninja_says}")
        return "module"

    assert _builder(tmp_path, build)(SEED).ok
    assert tried == routes


def test_a_header_gcc_refused_to_precompile_is_not_tried_again(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    from torch.utils import cpp_extension

    from profsvc.build import inline_builder

    # torch's CPU build has no CUDA_HOME; the glue unit's flags name its include folder, which may be empty here.
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", str(tmp_path))
    missing = ["-include", str(tmp_path / "missing.h")]  # g++ refuses this unit: the file is not there
    with pytest.raises(subprocess.CalledProcessError) as first:
        prepare_pch(tmp_path / "cache", tmp_path / "staging", missing, [], light=True)
    assert b"missing.h" in first.value.stderr

    def not_again(*args, **kwargs):
        raise AssertionError(f"g++ ran again: {args}")

    monkeypatch.setattr(inline_builder.subprocess, "run", not_again)
    with pytest.raises(subprocess.CalledProcessError) as second:
        prepare_pch(tmp_path / "cache", tmp_path / "staging", missing, [], light=True)
    assert second.value.stderr == first.value.stderr[-4000:]
