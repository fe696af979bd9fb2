"""The fast route's load_inline arguments (torch headers out of nvcc's unit, host glue at -O1 with a pch), and the
wrapper's tries: light header, full header, the build as written, each recorded with its route and reason."""

from __future__ import annotations

import ast
import copy
import subprocess

import pytest

from profsvc.build import routes
from profsvc.worker.inline_split import split_source
from tests.conftest import FIXTURES

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


def split_arguments(arguments: dict) -> dict | None:
    """The split route's arguments for a call, None where the route is torch's."""
    return routes.decide(routes.normalize_arguments(arguments)).fast


def test_seed_fast_route_keeps_torch_out_of_the_cuda_unit():
    fast = split_arguments(SEED)
    assert fast is not None
    assert fast["no_implicit_headers"] is True
    assert "torch/extension.h" not in fast["cuda_sources"]
    assert "vga_linear_kernel" in fast["cuda_sources"]
    assert fast["cuda_sources"] == split_source(SEED["cuda_sources"]).cuda


def test_seed_fast_route_host_unit_is_torch_header_then_user_cpp_then_host_part():
    fast = split_arguments(SEED)
    assert fast is not None
    cpp = fast["cpp_sources"]
    assert cpp[0] == TORCH_INCLUDE
    assert cpp[1] == SEED["cpp_sources"]
    assert cpp[2] == split_source(SEED["cuda_sources"]).host
    assert len(cpp) == 3
    assert "vga_linear_forward" in cpp[2]


def test_seed_fast_route_host_flags_are_O1():
    fast = split_arguments(SEED)
    assert fast is not None
    assert fast["extra_cflags"] == ["-O1"]


def test_fast_route_keeps_the_users_other_host_flags_and_arguments():
    arguments = {**SEED, "extra_cflags": ["-O3", "-DFAST=1", "-Ofast", "-g", "-DOPT=-O2"]}
    before = copy.deepcopy(arguments)
    fast = split_arguments(arguments)
    assert fast is not None
    assert fast["extra_cflags"] == ["-DFAST=1", "-g", "-DOPT=-O2", "-O1"]
    for key in ("name", "functions", "verbose", "extra_cuda_cflags"):
        assert fast[key] == arguments[key]
    assert arguments == before  # the caller's arguments are left as they were


def test_fast_route_without_user_host_flags():
    arguments = {key: value for key, value in SEED.items() if key != "extra_cflags"}
    fast = split_arguments(arguments)
    assert fast is not None
    assert fast["extra_cflags"] == ["-O1"]


def test_cuda_sources_given_as_a_list_are_joined():
    head, tail = SEED["cuda_sources"].split("__global__", 1)
    fast = split_arguments({**SEED, "cuda_sources": [head, "__global__" + tail]})
    assert fast is not None
    assert fast["cuda_sources"] == split_source(head + "\n__global__" + tail).cuda


def test_cpp_sources_given_as_a_list_keep_their_order():
    fast = split_arguments({**SEED, "cpp_sources": ["// one", SEED["cpp_sources"]]})
    assert fast is not None
    assert fast["cpp_sources"][:3] == [TORCH_INCLUDE, "// one", SEED["cpp_sources"]]


SCALAR_T_OUTSIDE_DISPATCH = (
    TORCH_INCLUDE
    + "\ntemplate <typename T> __global__ void k(T* x) {}\n"
    + "torch::Tensor run(torch::Tensor x) {\n  using scalar_t = float;\n"
    + "  k<scalar_t><<<1, 1>>>(x.data_ptr<scalar_t>());\n  return x;\n}\n"
)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"cuda_sources": SCALAR_T_OUTSIDE_DISPATCH, "functions": ["run"]}, routes.SPLIT_DECLINED),
        ({"cuda_sources": None}, routes.CPP_ONLY),
        ({"cuda_sources": "  \n"}, routes.CPP_ONLY),
        ({"cuda_sources": []}, routes.CPP_ONLY),
    ],
    ids=["scalar_t outside a dispatch", "no cuda", "blank cuda", "empty cuda list"],
)
def test_no_fast_route_when_the_source_does_not_allow_it(change, reason):
    decision = routes.decide(routes.normalize_arguments({**SEED, **change}))
    assert decision.fast is None
    assert (decision.route, decision.reason) == (routes.ROUTE_TORCH, reason)


def test_a_source_binding_its_own_functions_takes_the_fast_route():
    binding = 'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("vga_linear_forward", &vga_linear_forward); }\n'
    arguments = {**SEED, "functions": None, "cuda_sources": SEED["cuda_sources"] + binding}
    fast = split_arguments(arguments)
    assert fast is not None
    assert "PYBIND11_MODULE" in fast["cpp_sources"][-1] and "PYBIND11_MODULE" not in fast["cuda_sources"]


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
    assert routes.glue_cflags(flags) == expected


def _install_with(monkeypatch, tmp_path, build):
    """install() over a stand-in for torch's load_inline (`build(kwargs)`), the pch step recorded, not run."""
    from torch.utils import cpp_extension

    from profsvc.worker import inline_cache

    build.__wrapped__ = cpp_extension.load_inline  # torch's signature, which install() binds the call to
    monkeypatch.setattr(cpp_extension, "load_inline", build)
    monkeypatch.setattr(cpp_extension, "load", cpp_extension.load)  # install() replaces it too: put back after
    monkeypatch.setattr(inline_cache, "prepare_pch", lambda root, flags, header="full": ["-include", header])
    recorder = inline_cache.InlineRecorder()
    inline_cache.install(tmp_path, lineinfo=True, user_text="", recorder=recorder)
    return cpp_extension.load_inline, recorder


def test_the_light_header_is_tried_first_then_the_full_one_each_with_its_own_sources(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    calls = []

    def build(**kwargs):
        calls.append(kwargs)
        kwargs["cpp_sources"].append("PYBIND11_MODULE(...)")  # what torch's load_inline does to the list
        if "light" in kwargs["extra_cflags"]:
            raise RuntimeError("error: 'nn' is not a member of 'torch'")
        return "module"

    load_inline, recorder = _install_with(monkeypatch, tmp_path, build)
    assert load_inline(**SEED) == "module"
    light, full = calls
    assert light["extra_cflags"][-2:] == ["-include", "light"]
    assert full["extra_cflags"][-2:] == ["-include", "full"]
    assert full["cpp_sources"].count("PYBIND11_MODULE(...)") == 1  # not the failed try's binding too
    assert light["build_directory"] != full["build_directory"]
    build = recorder.builds[0]
    assert build.route == "split" and build.fallback_seconds > 0
    assert build.route_reason == routes.LIGHT_HEADER_FAILED


def test_a_build_the_light_header_serves_is_split_light(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    calls = []

    def build(**kwargs):
        calls.append(kwargs)
        return "module"

    load_inline, recorder = _install_with(monkeypatch, tmp_path, build)
    assert load_inline(**SEED) == "module"
    assert len(calls) == 1 and recorder.builds[0].route == "split-light"
    assert recorder.builds[0].fallback_seconds == 0
    assert (recorder.builds[0].route_reason, recorder.builds[0].route_detail) == ("", "")


@pytest.mark.parametrize(
    ("ninja_says", "routes_tried"),
    [
        ("[1/3] nvcc\nFAILED: cuda.cuda.o \nnvcc ... error: expected a ';'", ["light", "as written"]),
        ("[1/3] nvcc\nFAILED: [code=1] cuda.cuda.o \nnvcc ... error", ["light", "as written"]),
        ("[1/3] c++\nFAILED: main.o \nc++ ... error: 'nn' is not a member of 'torch'", ["light", "full"]),
        ("[1/3] c++\nFAILED: [code=1] main.o \nc++ ... error", ["light", "full"]),
        ("[1/3] c++\nFAILED: cuda.cuda.o \n...\nFAILED: main.o \n...", ["light", "full"]),
        ("[1/3] c++\nFAILED: main.o \nmain.cpp:3: #error FAILED: cuda.cuda.o", ["light", "full"]),
        ("[1/3] nvcc\nFAILED: cuda.cuda.o \ncuda.cu:3: error: #error FAILED: main.o", ["light", "as written"]),
        ("the precompiled header could not be made", ["light", "full", "as written"]),
    ],
)
def test_the_full_header_is_tried_only_where_the_glue_unit_may_have_failed(
    monkeypatch, tmp_path, ninja_says, routes_tried
):
    pytest.importorskip("torch")
    tried = []

    def build(**kwargs):
        flags = kwargs.get("extra_cflags") or []
        tried.append(flags[-1] if flags[-2:-1] == ["-include"] else "as written")
        if tried[-1] == "light" or (tried[-1] == "full" and "FAILED" not in ninja_says):
            raise RuntimeError(f"Error building extension 'vga_linear_probe': {ninja_says}")
        return "module"

    load_inline, recorder = _install_with(monkeypatch, tmp_path, build)
    assert load_inline(**SEED) == "module"
    assert tried == routes_tried
    taken = recorder.builds[0]
    if routes_tried[-1] == "as written":
        assert (taken.route, taken.route_reason) == ("torch", routes.SPLIT_FAILED)
        # Only a kernel unit that failed by itself goes straight to the build as written.
        assert ("kernel unit failed" in taken.route_detail) == (routes_tried == ["light", "as written"])


def test_a_header_gcc_refused_to_precompile_is_not_tried_again(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    from torch.utils import cpp_extension

    from profsvc.worker import inline_cache

    # torch's CPU build has no CUDA_HOME; the glue unit's flags name its include folder, which may be empty here.
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", str(tmp_path))
    missing = ["-include", str(tmp_path / "missing.h")]  # g++ refuses this unit: the file is not there
    with pytest.raises(subprocess.CalledProcessError) as first:
        inline_cache.prepare_pch(tmp_path, missing, header="light")
    assert b"missing.h" in first.value.stderr

    def not_again(*args, **kwargs):
        raise AssertionError(f"g++ ran again: {args}")

    monkeypatch.setattr(inline_cache.subprocess, "run", not_again)
    with pytest.raises(subprocess.CalledProcessError) as second:
        inline_cache.prepare_pch(tmp_path, missing, header="light")
    assert second.value.stderr == first.value.stderr[-4000:]


CU_FILE = (
    '#include <torch/extension.h>\n#include "common.cuh"\n'
    "__global__ void k(float* x) { x[0] = one(); }\n"
    "torch::Tensor f(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); return x; }\n"
)


def _sources_in(folder, files: dict[str, str]) -> list[str]:
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return [str(folder / name) for name in files if not name.endswith(".cuh")]


def test_load_of_written_files_takes_the_split_route_and_finds_its_build_from_another_folder(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    from torch.utils import cpp_extension

    loads = []

    def load(**kwargs):
        loads.append(kwargs)
        return "module"

    load.__wrapped__ = cpp_extension.load
    monkeypatch.setattr(cpp_extension, "load", load)
    calls = []

    def build(**kwargs):
        calls.append(kwargs)
        return "module"

    _, recorder = _install_with(monkeypatch, tmp_path / "cache", build)
    files = {"common.cuh": "__device__ float one() { return 1; }\n", "ext.cpp": "// bindings\n", "k.cu": CU_FILE}
    first = _sources_in(tmp_path / "job1", files)
    assert cpp_extension.load(name="ext", sources=first, extra_cuda_cflags=["-O3", ""]) == "module"
    (fast,) = calls
    assert loads == []
    assert fast["no_implicit_headers"] is True and fast["functions"] is None
    assert str(tmp_path / "job1") in fast["extra_include_paths"]  # so that cuda.cu finds "common.cuh"
    assert "common.cuh" in fast["cuda_sources"] and "__global__" not in fast["cpp_sources"][-1]
    assert recorder.builds[0].route == "split-light"
    # The same files written into another job's folder: the same key.
    second = _sources_in(tmp_path / "job2", files)
    cpp_extension.load(name="ext", sources=second, extra_cuda_cflags=["-O3"])
    assert recorder.builds[1].cache_key == recorder.builds[0].cache_key
    # A changed header beside them: another key.
    (tmp_path / "job2" / "common.cuh").write_text("__device__ float one() { return 2; }\n")
    cpp_extension.load(name="ext", sources=second, extra_cuda_cflags=["-O3"])
    assert recorder.builds[2].cache_key != recorder.builds[0].cache_key


def test_load_of_several_files_is_built_as_written_into_the_cache(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    from torch.utils import cpp_extension

    loads = []

    def load(**kwargs):
        loads.append(kwargs)
        return "module"

    load.__wrapped__ = cpp_extension.load
    monkeypatch.setattr(cpp_extension, "load", load)
    _, recorder = _install_with(monkeypatch, tmp_path / "cache", lambda **kwargs: "not this one")
    sources = _sources_in(tmp_path / "src", {"a.cpp": "int a;", "b.cpp": "int b;"})
    assert cpp_extension.load(name="two", sources=sources, extra_cflags=["", "-O2"]) == "module"
    (written,) = loads
    assert written["sources"] == sources and written["extra_cflags"] == ["-O2"]
    assert written["build_directory"].startswith(str(tmp_path / "cache"))
    build = recorder.builds[0]
    assert (build.route, build.route_reason) == ("torch", routes.LOAD_FILES)
    assert "a.cpp, b.cpp" in build.route_detail
