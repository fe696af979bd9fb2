"""The fast route's load_inline arguments (torch headers out of nvcc's unit, host glue at -O1 with a pch), the
builder's tries (light header, full header, the build as written, each recorded with its route and reason), and
what the job's wrapper sends the server: normalized arguments and its own folders' files, by value."""

from __future__ import annotations

import ast
import copy
import json
import subprocess
from pathlib import Path

import pytest

from profsvc.build import inline_builder, routes
from profsvc.build.inline_builder import ROUTE_FILE, TorchBuilders, build_call, recorded_route
from profsvc.build.request import LOAD, LOAD_INLINE, BuildRequest, SentFolder
from profsvc.worker.faults import says_no_gpu
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


def _builder(tmp_path, build, load=None, glue=None, without_cuda="", binding=None):
    """build_call over stand-ins for torch's load_inline (`build(**kwargs)`) and load; the glue header's flags
    name the header, none is made; `binding`: where a shared binding is made (none by default)."""
    glue = glue or (lambda header: ["-include", header])
    builders = TorchBuilders(build, load or (lambda **kwargs: None), without_cuda)

    def run(arguments: dict, call: str = LOAD_INLINE, folders: tuple = ()) -> inline_builder.InlineOutcome:
        request = BuildRequest(call, routes.normalize_arguments(arguments), folders)
        return build_call(request, "key", tmp_path / "staging", builders, glue, binding or (lambda plan: None))

    return run


def test_the_light_header_is_tried_first_then_the_full_one_each_with_its_own_sources(tmp_path):
    calls = []

    def build(**kwargs):
        calls.append(kwargs)
        kwargs["cpp_sources"].append("PYBIND11_MODULE(...)")  # what torch's load_inline does to the list
        if "light" in kwargs["extra_cflags"]:
            raise RuntimeError("error: 'nn' is not a member of 'torch'")

    outcome = _builder(tmp_path, build)(SEED)
    assert outcome.ok
    light, full = calls
    assert light["extra_cflags"][-2:] == ["-include", "light"]
    assert full["extra_cflags"][-2:] == ["-include", "full"]
    assert full["cpp_sources"].count("PYBIND11_MODULE(...)") == 1  # not the failed try's binding too
    assert light["build_directory"] != full["build_directory"]
    assert outcome.route == "split" and outcome.fallback_seconds > 0
    assert outcome.reason == routes.LIGHT_HEADER_FAILED
    assert outcome.built_in == full["build_directory"]


def test_a_build_the_light_header_serves_is_split_light_and_records_its_route_beside_the_library(tmp_path):
    calls = []
    outcome = _builder(tmp_path, lambda **kwargs: calls.append(kwargs))(SEED)
    assert outcome.ok and len(calls) == 1 and outcome.route == "split-light"
    assert outcome.fallback_seconds == 0
    # The seed binds vga_linear_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias): no shared
    # binding is made in this test, so the build asks for one.
    assert outcome.reason == routes.BINDING_NOT_MADE
    assert outcome.binding == {
        "signatures": ["torch::Tensor(torch::Tensor, torch::Tensor, torch::Tensor)"],
        "wrap": True,
    }
    assert Path(outcome.built_in) == tmp_path / "staging" / "key-split-light"
    assert recorded_route(Path(outcome.built_in)) == outcome.record()
    assert json.loads((Path(outcome.built_in) / ROUTE_FILE).read_text())["route"] == "split-light"


def test_a_made_binding_is_linked_beside_a_host_unit_against_the_tensor_headers(tmp_path):
    calls = []
    made = tmp_path / "cache" / "binding" / "k" / "binding.o"
    outcome = _builder(tmp_path, lambda **kwargs: calls.append(kwargs), binding=lambda plan: made)(SEED)
    assert outcome.ok and outcome.route == "split-bind" and (outcome.reason, outcome.binding) == ("", None)
    (call,) = calls
    assert call["functions"] is None  # torch writes no PYBIND11_MODULE: the shared binding is the module's
    assert call["extra_cflags"][-2:] == ["-include", "types"]
    assert call["extra_ldflags"][-1] == str(made)
    host = call["cpp_sources"][-1]
    assert "= &vga_linear_forward;" in host and '= "vga_linear_forward";' in host
    assert "PyInit_profsvc_binding()" in host and "PROFSVC_BINDING_JOIN(PyInit_, TORCH_EXTENSION_NAME)" in host
    assert Path(outcome.built_in) == tmp_path / "staging" / "key-split-bind"


def test_a_failed_split_bind_build_goes_on_to_split_light_and_says_why(tmp_path):
    tried = []

    def build(**kwargs):
        tried.append(kwargs["extra_cflags"][-1])
        if tried[-1] == "types":
            raise RuntimeError("[1/3] c++\nFAILED: main.o \nc++ ... error: 'py' has not been declared")

    outcome = _builder(tmp_path, build, binding=lambda plan: tmp_path / "binding.o")(SEED)
    assert tried == ["types", "light"]
    assert outcome.ok and outcome.route == "split-light" and outcome.reason == routes.BINDING_FAILED
    assert outcome.fallback_seconds > 0


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
def test_the_full_header_is_tried_only_where_the_glue_unit_may_have_failed(tmp_path, ninja_says, routes_tried):
    tried = []

    def build(**kwargs):
        flags = kwargs.get("extra_cflags") or []
        tried.append(flags[-1] if flags[-2:-1] == ["-include"] else "as written")
        if tried[-1] == "light" or (tried[-1] == "full" and "FAILED" not in ninja_says):
            raise RuntimeError(f"Error building extension 'vga_linear_probe': {ninja_says}")

    outcome = _builder(tmp_path, build)(SEED)
    assert outcome.ok
    assert tried == routes_tried
    if routes_tried[-1] == "as written":
        assert (outcome.route, outcome.reason) == ("torch", routes.SPLIT_FAILED)
        # Only a kernel unit that failed by itself goes straight to the build as written.
        assert ("kernel unit failed" in outcome.detail) == (routes_tried == ["light", "as written"])
        assert Path(outcome.built_in).name == "key"


def test_a_failed_build_as_written_carries_torchs_error(tmp_path):
    def build(**kwargs):
        raise RuntimeError("Error building extension 'e': main.cpp:1:1: error: expected ';'")

    outcome = _builder(tmp_path, build)({**SEED, "cuda_sources": None})
    assert not outcome.ok and outcome.route == "torch" and outcome.reason == routes.CPP_ONLY
    assert "expected ';'" in outcome.log
    assert not (tmp_path / "staging" / "key" / ROUTE_FILE).exists()


def test_a_torch_without_cuda_makes_no_build_of_cuda_code_as_written_and_says_why(tmp_path):
    tried = []
    declined = {**SEED, "cuda_sources": SCALAR_T_OUTSIDE_DISPATCH, "functions": ["run"]}
    outcome = _builder(tmp_path, lambda **kwargs: tried.append(kwargs), without_cuda="torch 2.13.0+cpu")(declined)
    assert not outcome.ok and not tried
    # Worded as torch words a missing GPU (profsvc.worker.faults.NO_GPU): the compile step then warns.
    assert (
        outcome.log
        == "torch's own build of CUDA code requires CUDA support, which this server's torch 2.13.0+cpu lacks"
    )
    assert says_no_gpu(outcome.log)
    # C++ alone it still builds.
    assert _builder(tmp_path, lambda **kwargs: None, without_cuda="torch 2.13.0+cpu")({**SEED, "cuda_sources": None}).ok


def test_a_declined_split_keeps_its_own_reason_and_line_for_other_files(tmp_path):
    declined = {**SEED, "cuda_sources": SCALAR_T_OUTSIDE_DISPATCH, "functions": ["run"]}
    outcome = _builder(tmp_path, lambda **kwargs: None)(declined)
    assert (outcome.route, outcome.reason) == ("torch", routes.SPLIT_DECLINED)
    # The launch is on line 5 of the source (counted from SCALAR_T_OUTSIDE_DISPATCH's text).
    assert (outcome.split_reason, outcome.split_line) == ("launch of k<scalar_t>: scalar_t outside AT_DISPATCH", 5)
    assert outcome.detail == f"{outcome.split_reason} (line 5 of cuda_sources)"


def test_a_glue_header_the_cache_lacks_is_read_as_text_and_one_it_holds_is_used(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from torch.utils import cpp_extension

    monkeypatch.setattr(cpp_extension, "CUDA_HOME", str(tmp_path))  # torch's CPU build has none
    key, _ = inline_builder._pch_key("light")
    cache, staging = tmp_path / "cache", tmp_path / "staging"
    as_text = inline_builder.server_pch(cache, staging, "light")
    header = staging / "glue" / "light" / "torch" / "extension.h"
    assert as_text == ["-I", str(header.parent.parent), "-include", str(header)]
    assert header.read_text() == inline_builder.LIGHT_EXTENSION_H and not header.with_suffix(".h.gch").exists()
    made = cache / "pch" / key / "torch" / "extension.h"
    made.parent.mkdir(parents=True)
    made.write_text(inline_builder.LIGHT_EXTENSION_H)
    made.with_suffix(".h.gch").write_bytes(b"gch")
    assert inline_builder.server_pch(cache, staging, "light") == ["-I", str(made.parent.parent), "-include", str(made)]
    # One g++ refused to make: read as text.
    (cache / "pch" / key / inline_builder.PCH_FAILED).write_text("error")
    assert inline_builder.server_pch(cache, staging, "light") == as_text
    full = staging / "glue" / "full" / "torch_extension.h"
    assert inline_builder.server_pch(cache, staging, "full") == ["-include", str(full)]
    assert full.read_text() == "#include <torch/extension.h>\n"


def test_a_header_gcc_refused_to_precompile_is_not_tried_again(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    from torch.utils import cpp_extension

    # torch's CPU build has no CUDA_HOME; the glue unit's flags name its include folder, which may be empty here.
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", str(tmp_path))
    # g++ refuses this header: the file it includes is not there.
    monkeypatch.setitem(inline_builder.GLUE_HEADERS, "light", f'#include "{tmp_path / "missing.h"}"\n')
    with pytest.raises(subprocess.CalledProcessError) as first:
        inline_builder.prepare_pch(tmp_path / "cache", tmp_path / "staging", header="light")
    assert b"missing.h" in first.value.stderr

    def not_again(*args, **kwargs):
        raise AssertionError(f"g++ ran again: {args}")

    monkeypatch.setattr(inline_builder.subprocess, "run", not_again)
    with pytest.raises(subprocess.CalledProcessError) as second:
        inline_builder.prepare_pch(tmp_path / "cache", tmp_path / "staging", header="light")
    assert second.value.stderr == first.value.stderr[-4000:]


CU_FILE = (
    '#include <torch/extension.h>\n#include "common.cuh"\n'
    "__global__ void k(float* x) { x[0] = one(); }\n"
    "torch::Tensor f(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); return x; }\n"
)
COMMON = "__device__ float one() { return 1; }\n"


def test_the_builder_writes_the_sent_folders_in_its_staging_folder_and_builds_a_load_from_there(tmp_path):
    calls = []
    files = {"common.cuh": COMMON, "ext.cpp": "// bindings\n", "k.cu": CU_FILE}
    folders = (SentFolder("/job/cell/tmp/src", files),)
    arguments = {"name": "ext", "sources": ["/job/cell/tmp/src/ext.cpp", "/job/cell/tmp/src/k.cu"]}
    outcome = _builder(tmp_path, lambda **kwargs: calls.append(kwargs))(arguments, LOAD, folders)
    assert outcome.ok and outcome.route == "split-light"
    (fast,) = calls
    written = tmp_path / "staging" / "inputs" / "key" / "0"
    assert (written / "common.cuh").read_text() == COMMON
    assert str(written) in fast["extra_include_paths"]  # so that cuda.cu finds "common.cuh"
    assert "common.cuh" in fast["cuda_sources"] and "__global__" not in fast["cpp_sources"][-1]
    assert fast["no_implicit_headers"] is True and fast["functions"] is None


def test_a_load_of_several_files_is_built_as_written_from_the_staging_folder(tmp_path):
    loads = []
    folders = (SentFolder("/job/src", {"a.cpp": "int a;", "b.cpp": "int b;"}),)
    arguments = {"name": "two", "sources": ["/job/src/a.cpp", "/job/src/b.cpp"], "extra_cflags": ["", "-O2"]}
    run = _builder(tmp_path, lambda **kwargs: None, lambda **kwargs: loads.append(kwargs))
    outcome = run(arguments, LOAD, folders)
    (written,) = loads
    inputs = tmp_path / "staging" / "inputs" / "key" / "0"
    assert written["sources"] == [str(inputs / "a.cpp"), str(inputs / "b.cpp")]
    assert written["extra_cflags"] == ["-O2"] and written["build_directory"] == str(tmp_path / "staging" / "key")
    assert (outcome.route, outcome.reason) == ("torch", routes.LOAD_FILES)
    assert "a.cpp, b.cpp" in outcome.detail


@pytest.mark.parametrize(("files", "built"), [(("a.cpp", "b.cpp"), True), (("a.cpp", "k.cu"), False)])
def test_a_torch_without_cuda_builds_a_load_of_cpp_files_not_one_of_cuda_files(tmp_path, files, built):
    loads = []

    def split_fails(**kwargs):
        raise RuntimeError("Error building extension 'two': [1/3] nvcc\nFAILED: cuda.cuda.o \nerror")

    folders = (SentFolder("/job/src", dict.fromkeys(files, "int a;")),)
    arguments = {"name": "two", "sources": [f"/job/src/{name}" for name in files]}
    cpu_torch = "torch 2.13.0+cpu"
    run = _builder(tmp_path, split_fails, lambda **kwargs: loads.append(kwargs), without_cuda=cpu_torch)
    outcome = run(arguments, LOAD, folders)
    assert outcome.ok == built and len(loads) == int(built)
    assert built or "requires CUDA support" in outcome.log


def test_an_include_folder_sent_by_value_is_read_from_staging_and_a_system_one_in_place(tmp_path):
    calls = []
    folders = (SentFolder("/job/inc", {"act.cuh": "#pragma once\n", "sub/more.h": "int x;\n"}),)
    arguments = {**SEED, "extra_include_paths": ["/job/inc", "/usr/include/eigen3"]}
    _builder(tmp_path, lambda **kwargs: calls.append(kwargs))(arguments, LOAD_INLINE, folders)
    inputs = tmp_path / "staging" / "inputs" / "key" / "0"
    assert calls[0]["extra_include_paths"] == [str(inputs), "/usr/include/eigen3"]
    assert (inputs / "sub" / "more.h").read_text() == "int x;\n"


# ---------------------------------------------------------------- the job's wrapper


class RecordingChannel:
    """The worker's end of the control channel, standing in for the server: records each request, answers."""

    def __init__(self, reply: dict) -> None:
        self.reply = reply
        self.sent: list[dict] = []

    def request(self, op: str, **fields):
        # What crosses the socket: JSON, which the server checks as it would.
        message = json.loads(json.dumps({"op": op, **fields}))
        self.sent.append(message)
        request = BuildRequest.from_message(message)
        return {"key": request.key({"torch": "t", "cuda": "c", "arch": "9.0"}), **self.reply}


OK_REPLY = {
    "ok": True,
    "cached": False,
    "route": "torch",
    "reason": "cpp_only",
    "detail": "no CUDA",
    "directory": "/c/k",
}


@pytest.fixture
def wrapped(monkeypatch, tmp_path):
    """install() with a recording channel; torch's import of the library the server names stood in for."""
    pytest.importorskip("torch")
    from torch.utils import cpp_extension

    from profsvc.worker import inline_cache

    monkeypatch.setattr(cpp_extension, "load_inline", cpp_extension.load_inline)
    monkeypatch.setattr(cpp_extension, "load", cpp_extension.load)  # install() replaces them: put back after
    monkeypatch.setattr(inline_cache, "_import", lambda name, directory, arguments: ("module", name, directory))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.chdir(tmp_path)  # a job runs in its cell
    channel = RecordingChannel(dict(OK_REPLY))
    recorder = inline_cache.InlineRecorder()
    user_text = 'x = 1\n_cuda = r"""' + SEED["cuda_sources"] + '"""\n'
    inline_cache.install(tmp_path / "cache", lineinfo=True, user_text=user_text, recorder=recorder, channel=channel)
    return cpp_extension, channel, recorder


def test_the_wrapper_sends_normalized_arguments_and_its_own_include_folders_by_value(wrapped, tmp_path):
    cpp_extension, channel, recorder = wrapped
    include = tmp_path / "inc"
    (include / "sub").mkdir(parents=True)
    (include / "act.cuh").write_text("__device__ float act(float x);\n")
    (include / "sub" / "more.h").write_text("#pragma once\n")
    (include / "notes.txt").write_text("not a header")
    system = cpp_extension.include_paths()[0]
    arguments = {**SEED, "extra_cflags": ["", "-O3"], "extra_ldflags": [""], "verbose": True}
    module = cpp_extension.load_inline(**arguments, extra_include_paths=[str(include), system])
    assert module == ("module", "vga_linear_probe", "/c/k")
    (sent,) = channel.sent
    assert sent["op"] == "build" and sent["call"] == "load_inline"
    assert sent["arguments"]["extra_cflags"] == ["-O3"] and sent["arguments"]["extra_ldflags"] == []
    assert sent["arguments"]["extra_cuda_cflags"][-1] == "-lineinfo"
    assert "verbose" not in sent["arguments"] and "build_directory" not in sent["arguments"]
    assert sent["arguments"]["extra_include_paths"] == [str(include), system]
    # The job's folder by value (headers, subfolders too); the system tree by path, which the builder sees.
    own = {"act.cuh": "__device__ float act(float x);\n", "sub/more.h": "#pragma once\n"}
    assert sent["folders"] == [{"path": str(include), "files": own}]
    assert sent["first_line"] == 2  # the CUDA source starts on the user's line 2
    (build,) = recorder.builds
    assert (build.route, build.route_reason, build.route_detail) == ("torch", "cpp_only", "no CUDA")
    assert build.cache_key and build.build_directory == "/c/k" and build.cuda_first_line == 2


def test_a_module_writing_the_same_files_into_another_folder_gets_the_same_key(wrapped, tmp_path):
    cpp_extension, channel, recorder = wrapped
    files = {"common.cuh": COMMON, "ext.cpp": "// bindings\n", "k.cu": CU_FILE}
    for job in ("job1", "job2"):
        (tmp_path / job).mkdir()
        for name, text in files.items():
            (tmp_path / job / name).write_text(text)
        cpp_extension.load(name="ext", sources=[str(tmp_path / job / "ext.cpp"), str(tmp_path / job / "k.cu")])
    one, two = recorder.builds
    assert one.cache_key == two.cache_key
    assert channel.sent[0]["call"] == "load" and channel.sent[0]["arguments"]["extra_cuda_cflags"] == ["-lineinfo"]
    assert channel.sent[0]["folders"][0]["files"] == files
    # A changed header beside them: another key.
    (tmp_path / "job2" / "common.cuh").write_text("__device__ float one() { return 2; }\n")
    cpp_extension.load(name="ext", sources=[str(tmp_path / "job2" / "ext.cpp"), str(tmp_path / "job2" / "k.cu")])
    assert recorder.builds[2].cache_key != one.cache_key


def test_a_load_source_of_any_suffix_is_sent_and_a_missing_one_is_a_build_error(wrapped, tmp_path):
    cpp_extension, channel, _ = wrapped
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "ext.C").write_text("int x;\n")
    cpp_extension.load(name="ext", sources=str(tmp_path / "src" / "ext.C"))
    assert channel.sent[0]["folders"][0]["files"] == {"ext.C": "int x;\n"}
    with pytest.raises(RuntimeError, match=r"^Error building extension 'ext': no source file .*gone.cpp"):
        cpp_extension.load(name="ext", sources=[str(tmp_path / "gone.cpp")])


def test_a_failed_build_is_torchs_error_and_records_the_route(wrapped):
    cpp_extension, channel, recorder = wrapped
    channel.reply = {"ok": False, "route": "torch", "reason": "split_failed", "detail": "d", "log": "main.cpp:1: error"}
    with pytest.raises(RuntimeError, match=r"^Error building extension 'vga_linear_probe': main.cpp:1: error"):
        cpp_extension.load_inline(**SEED)
    assert (recorder.builds[0].route, recorder.builds[0].route_reason) == ("torch", "split_failed")


def test_a_folder_over_the_requests_bounds_is_a_build_error(wrapped, tmp_path, monkeypatch):
    from profsvc.build import request

    cpp_extension, channel, _ = wrapped
    monkeypatch.setattr(request, "MAX_FILES", 2)
    for n in range(3):
        (tmp_path / f"h{n}.h").write_text("")
    with pytest.raises(RuntimeError, match=r"^Error building extension 'vga_linear_probe': .* holds more than"):
        cpp_extension.load_inline(**SEED, extra_include_paths=[str(tmp_path)])
    assert channel.sent == []


def test_each_route_a_builder_tries_makes_the_library_under_its_own_name(tmp_path, monkeypatch):
    # torch's own load_inline, its ninja step stood in: a retry of one name in one process (the next route
    # after a failed one) must not be renamed NAME_v1 by torch's versioner, or the cache finds no NAME.so.
    from torch.utils import cpp_extension

    from profsvc.build.inline_builder import torch_builders

    built: list[str] = []

    def ninja(*, name: str, build_directory: str, **_: object) -> None:
        built.append(name)
        (Path(build_directory) / f"{name}.so").write_bytes(b"")

    monkeypatch.setattr(cpp_extension, "_write_ninja_file_and_build_library", ninja)
    monkeypatch.setattr(cpp_extension, "verify_ninja_availability", lambda: None)
    builders = torch_builders()
    for attempt, text in enumerate(("int one() { return 1; }", "int two() { return 2; }")):
        folder = tmp_path / str(attempt)
        folder.mkdir()
        builders.load_inline(name="twice_ext", cpp_sources=[text], build_directory=str(folder))
        assert (folder / "twice_ext.so").is_file()
    assert built == ["twice_ext", "twice_ext"]


def test_a_binding_that_cannot_be_looked_up_leaves_the_build_to_the_split_routes(tmp_path):
    def lookup(plan):
        raise OSError("CUDA_HOME environment variable is not set. Please set it to your CUDA install root.")

    calls = []
    outcome = _builder(tmp_path, lambda **kwargs: calls.append(kwargs), binding=lookup)(SEED)
    assert outcome.ok and outcome.route == "split-light" and outcome.binding is None
    assert [call["extra_cflags"][-1] for call in calls] == ["light"]


def test_a_host_unit_whose_types_header_cannot_be_made_goes_on_to_split_light(tmp_path):
    def glue(header):
        if header == "types":
            raise subprocess.CalledProcessError(1, ["c++"], stderr=b"error: ATen/Config.h: no such file")
        return ["-include", header]

    calls = []
    outcome = _builder(tmp_path, lambda **kwargs: calls.append(kwargs), glue=glue, binding=lambda p: tmp_path)(SEED)
    assert outcome.ok and outcome.route == "split-light" and outcome.reason == routes.BINDING_FAILED
    assert [call["extra_cflags"][-1] for call in calls] == ["light"]


def test_host_code_with_torchs_cuda_context_reads_the_types_header_with_it_on_split_bind(tmp_path):
    with_stream = copy.deepcopy(SEED)
    with_stream["cuda_sources"] = "#include <ATen/cuda/CUDAContext.h>\n" + with_stream["cuda_sources"]
    calls = []
    outcome = _builder(tmp_path, lambda **kwargs: calls.append(kwargs), binding=lambda p: tmp_path)(with_stream)
    assert outcome.route == "split-bind" and calls[0]["extra_cflags"][-2:] == ["-include", "types-cuda"]
