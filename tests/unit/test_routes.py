"""The build route decisions: flags normalized, the server's target, the cache key, load() calls, reasons."""

from __future__ import annotations

import pytest

from profsvc.build import routes

KERNEL = (
    "__global__ void k(float* x) {}\ntorch::Tensor f(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); return x; }\n"
)
CALL = {"name": "ext", "cpp_sources": "torch::Tensor f(torch::Tensor x);", "cuda_sources": KERNEL, "functions": ["f"]}
ENV = {"torch": "2.13.0", "cuda": "13.0", "arch": "9.0"}


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (None, []),
        ([""], []),
        (["", "  ", "\t"], []),
        ([" -O3 ", "-O3"], ["-O3"]),
        # The last of a repeated flag counts (the last -O wins): it is the one kept.
        (["-O0", "-O3", "-O0"], ["-O3", "-O0"]),
        # Search paths: the first counts.
        (["-Ia", "-Ib", "-Ia"], ["-Ia", "-Ib"]),
        (["-I", "a", "-I", "b", "-I", "a"], ["-I", "a", "-I", "b"]),
        # An option and its value are one flag.
        (["-Xcompiler", "-fopenmp", "-Xcompiler", "-fPIC"], ["-Xcompiler", "-fopenmp", "-Xcompiler", "-fPIC"]),
        (["-Xcompiler", "-fopenmp", "-Xcompiler", "-fopenmp"], ["-Xcompiler", "-fopenmp"]),
        # Several flags in one string: the words torch's ninja file and its shell make of it.
        (["-O3 --use_fast_math"], ["-O3", "--use_fast_math"]),
        ("-O3 -g", ["-O3", "-g"]),
        # Quotes decide the shell's words: left as written.
        (['-DMSG="a b"'], ['-DMSG="a b"']),
    ],
)
def test_flags_that_mean_nothing_are_removed(flags, expected):
    assert routes.normalize_flags(flags) == expected


def test_server_target_flags_are_torchs_for_the_same_arch_list(monkeypatch):
    cpp_extension = pytest.importorskip("torch.utils.cpp_extension")
    for arch_list in ("9.0", "8.0;9.0+PTX", "9.0a"):
        monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", arch_list)
        assert sorted(routes.server_arch_flags(arch_list)) == sorted(cpp_extension._get_cuda_arch_flags())


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["-O3"], ["-O3"]),
        # A target the user names replaces the server's (torch drops its own for a flag with "arch").
        (["-arch=sm_80"], ["-arch=sm_80"]),
        (["-gencode", "arch=compute_90a,code=sm_90a"], ["-gencode", "arch=compute_90a,code=sm_90a"]),
        (["--gpu-architecture=sm_90"], ["--gpu-architecture=sm_90"]),
        # "This GPU" and "every GPU": the server's one target (torch adds it without an arch flag).
        (["-arch=native"], []),
        (["-arch", "native", "-O3"], ["-O3"]),
        (["-arch=all"], []),
        (["--gpu-architecture=all-major"], []),
        # The word without a target: the server's target comes back.
        (["-Xcompiler", "-march=native"], ["-Xcompiler", "-march=native", "-gencode=arch=compute_90,code=sm_90"]),
    ],
)
def test_gpu_targets_are_what_the_user_asked_for(flags, expected):
    assert routes.normalize_cuda_flags(flags, "9.0") == expected


def _key(call: dict, includes: dict | None = None) -> str:
    return routes.cache_key(routes.normalize_arguments(call, server_arch="9.0"), ENV, includes or {})


def test_flags_that_mean_nothing_do_not_change_the_cache_key():
    plain = _key(CALL)
    assert _key({**CALL, "extra_cflags": [""], "extra_ldflags": [""]}) == plain
    assert _key({**CALL, "extra_cuda_cflags": [" -O3", "-O3 "]}) == _key({**CALL, "extra_cuda_cflags": ["-O3"]})
    assert _key({**CALL, "verbose": True, "use_pch": True}) == plain
    assert _key({**CALL, "extra_cuda_cflags": ["-O3"]}) != plain
    assert _key({**CALL, "extra_cuda_cflags": ["-arch=native"]}) == plain


def test_the_key_covers_the_include_paths_as_the_caller_names_them():
    # The server names a folder sent by value "@N" and keys its files' digests; a system tree by its path.
    one = _key({**CALL, "extra_include_paths": ["@0"]}, {"@0/a.cuh": "d1"})
    assert _key({**CALL, "extra_include_paths": ["@0"]}, {"@0/a.cuh": "d2"}) != one
    assert _key({**CALL, "extra_include_paths": ["@0", "/usr/include/eigen3"]}, {"@0/a.cuh": "d1"}) != one


def test_lineinfo_is_added_for_cuda_sources_only():
    assert routes.normalize_arguments(CALL, lineinfo=True)["extra_cuda_cflags"] == ["-lineinfo"]
    cpp_only = {**CALL, "cuda_sources": None, "extra_cuda_cflags": None}
    assert routes.normalize_arguments(cpp_only, lineinfo=True)["extra_cuda_cflags"] == []
    twice = {**CALL, "extra_cuda_cflags": ["-lineinfo"]}
    assert routes.normalize_arguments(twice, lineinfo=True)["extra_cuda_cflags"] == ["-lineinfo"]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"sycl_sources": "int x;"}, routes.SYCL),
        ({"cuda_sources": None}, routes.CPP_ONLY),
        ({"with_cuda": False}, routes.SPLIT_DECLINED),
        ({"cuda_sources": KERNEL.replace("float* x", "at::Half* x")}, routes.SPLIT_DECLINED),
    ],
    ids=["sycl", "C++ only", "with_cuda=False", "device code naming torch"],
)
def test_a_declined_route_says_why(change, reason):
    decision = routes.decide({**CALL, **change})
    assert (decision.route, decision.reason, decision.fast) == (routes.ROUTE_TORCH, reason, None)
    assert decision.detail and decision.declined == f"{reason}: {decision.detail}"


def test_the_fast_route_names_its_glue_header():
    assert routes.decide(CALL).glue_header == routes.GLUE_LIGHT
    context = {**CALL, "cuda_sources": "#include <ATen/cuda/CUDAContext.h>\n" + KERNEL}
    assert routes.decide(context).glue_header == routes.GLUE_LIGHT_CUDA
    guard = {**CALL, "cpp_sources": "#include <c10/cuda/CUDAGuard.h>\ntorch::Tensor f(torch::Tensor x);"}
    assert routes.decide(guard).glue_header == routes.GLUE_LIGHT_CUDA


def test_a_load_of_one_cpp_and_one_cu_file_is_the_load_inline_call_that_builds_it():
    texts = {"/job/src/ext.cpp": "// bindings", "/job/src/k.cu": "#include <torch/extension.h>\n" + KERNEL}
    arguments = {"name": "ext", "sources": list(texts), "extra_cuda_cflags": ["-O3", ""], "extra_include_paths": None}
    keyed, decision = routes.load_call(arguments, texts, server_arch="9.0", lineinfo=True)
    assert keyed["cpp_sources"] == ["// bindings"] and keyed["cuda_sources"] == [texts["/job/src/k.cu"]]
    assert keyed["functions"] is None and keyed["no_implicit_headers"] is True
    assert keyed["extra_cuda_cflags"] == ["-O3", "-lineinfo"]
    # The files' folder is on the build's include path, not in the key (a new folder per job).
    assert "/job/src" not in str(keyed)
    assert decision.route == routes.ROUTE_SPLIT_LIGHT and decision.fast["extra_include_paths"] == ["/job/src"]


@pytest.mark.parametrize(
    "sources",
    [["a.cpp", "b.cpp", "k.cu"], ["k.cu", "l.cu"], ["k.cu", "helper.c"]],
    ids=["two C++ files", "two CUDA files", "a C file"],
)
def test_a_load_of_other_files_is_built_as_written(sources):
    texts = {s: "int x;" for s in sources}
    keyed, decision = routes.load_call({"name": "ext", "sources": sources}, texts)
    assert (decision.route, decision.reason) == (routes.ROUTE_TORCH, routes.LOAD_FILES)
    assert keyed["sources"] == ["int x;"] * len(sources)
