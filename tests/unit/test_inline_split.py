"""Splitting a load_inline CUDA source into a torch-free CUDA part and a torch host part."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from profsvc.worker.inline_split import (
    ADDRESS_PREFIX,
    CUDA_PRELUDE,
    LAUNCHER_PREFIX,
    Declined,
    SplitSources,
    split_source,
)
from tests.conftest import FIXTURES

TORCH = "#include <torch/extension.h>\n"


def _seed_source() -> str:
    tree = ast.parse((FIXTURES / "seed47.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_cuda_src" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("seed47.py has no _cuda_src")


SEED = _seed_source()


def _host_function(body: str) -> str:
    return f"torch::Tensor run(torch::Tensor x) {{\n  {body}\n  return x;\n}}\n"


def _split(source: str) -> SplitSources:
    split = split_source(source)
    assert isinstance(split, SplitSources), split
    return split


def _lines_before_launchers(cuda: str, source: str) -> list[str]:
    """The CUDA part's lines that stand for the user's source (prelude included, launchers left out)."""
    return cuda.splitlines()[: len((CUDA_PRELUDE + "\n" + source).splitlines())]


def _nvcc(tmp_path: Path, cuda: str) -> subprocess.CompletedProcess[str]:
    nvcc = shutil.which("nvcc")
    assert nvcc, "nvcc (the CUDA 13.0 toolkit) is not on PATH"
    source = tmp_path / "cuda.cu"
    source.write_text(cuda)
    command = [nvcc, "-arch=sm_90", "-c", "-o", str(tmp_path / "cuda.o"), str(source)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


# --- the seed problem ---------------------------------------------------------------------------


def test_seed_splits_with_one_launched_kernel():
    assert _split(SEED).launched == ["vga_linear_kernel"]


def test_seed_kernel_lines_keep_their_line_numbers():
    reference = (CUDA_PRELUDE + "\n" + SEED).splitlines()
    cuda = _split(SEED).cuda.splitlines()
    first = next(i for i, line in enumerate(reference) if line.startswith("__global__"))
    last = next(i for i in range(first, len(reference)) if reference[i] == "}")
    assert last - first > 5
    for number in range(first, last + 1):
        assert cuda[number] == reference[number], f"line {number + 1}"
    # Every other line of the user's source is either kept where it was or blanked.
    for number, line in enumerate(_lines_before_launchers(_split(SEED).cuda, SEED)):
        assert line in (reference[number], ""), f"line {number + 1}"


def test_seed_torch_include_and_host_function_are_blanked_in_cuda_part():
    split = _split(SEED)
    region = "\n".join(_lines_before_launchers(split.cuda, SEED))
    assert "torch" not in split.cuda
    assert "vga_linear_forward" not in split.cuda
    assert "#define WPB 7" in region
    assert "#include <torch/extension.h>" in split.host
    assert "torch::Tensor vga_linear_forward(" in split.host


def test_seed_host_part_calls_the_launcher_with_zero_shared_memory_and_stream():
    split = _split(SEED)
    assert "<<<" not in split.host
    assert f"{LAUNCHER_PREFIX}vga_linear_kernel(dim3(8, B), dim3(224), 0, 0, x.data_ptr<float>()," in split.host
    # Declared before its caller, after the macros its call uses.
    declaration = split.host.index(f"void {LAUNCHER_PREFIX}vga_linear_kernel(dim3 grid")
    assert split.host.index("#define WPB 7") < declaration < split.host.index("torch::Tensor vga_linear_forward(")
    assert "__global__" not in split.host


def test_seed_cuda_part_launcher_passes_every_kernel_argument():
    launcher = _split(SEED).cuda.split(f"void {LAUNCHER_PREFIX}vga_linear_kernel(", 1)[1]
    assert "vga_linear_kernel<<<grid, block, shared, stream>>>(x, w, bias, y);" in launcher


def test_seed_cuda_part_compiles_with_nvcc(tmp_path):
    result = _nvcc(tmp_path, _split(SEED).cuda)
    assert result.returncode == 0, result.stderr


# --- launches ------------------------------------------------------------------------------------


def test_launch_with_shared_memory_pads_the_stream():
    source = TORCH + "__global__ void k(float* x) {}\n" + _host_function("k<<<4, 64, 128>>>(x.data_ptr<float>());")
    assert f"{LAUNCHER_PREFIX}k(4, 64, 128, 0, x.data_ptr<float>());" in _split(source).host


def test_launch_with_stream_keeps_all_four_values():
    launch = "k<<<4, 64, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>());"
    source = TORCH + "__global__ void k(float* x) {}\n" + _host_function(launch)
    split = _split(source)
    assert f"{LAUNCHER_PREFIX}k(4, 64, 0, at::cuda::getCurrentCUDAStream(), x.data_ptr<float>());" in split.host
    assert "getCurrentCUDAStream" not in split.cuda


def test_two_kernels_launched_from_one_host_function():
    kernels = "__global__ void a(float* x) { x[0] = 1; }\n__global__ void b(int n, float* y) { y[n] = 2; }\n"
    body = "a<<<1, 32>>>(x.data_ptr<float>());\n  b<<<2, 64>>>(3, x.data_ptr<float>());"
    split = _split(TORCH + kernels + _host_function(body))
    assert split.launched == ["a", "b"]
    assert f"{LAUNCHER_PREFIX}a(1, 32, 0, 0, x.data_ptr<float>());" in split.host
    assert f"{LAUNCHER_PREFIX}b(2, 64, 0, 0, 3, x.data_ptr<float>());" in split.host
    assert "b<<<grid, block, shared, stream>>>(n, y);" in split.cuda
    assert split.host.count(f"void {LAUNCHER_PREFIX}a(") == 1


def test_kernel_without_arguments():
    split = _split(TORCH + "__global__ void tick() {}\n" + _host_function("tick<<<1, 1>>>();"))
    assert f"{LAUNCHER_PREFIX}tick(1, 1, 0, 0);" in split.host
    assert f"void {LAUNCHER_PREFIX}tick(dim3 grid, dim3 block, size_t shared, cudaStream_t stream)" in split.cuda
    assert "tick<<<grid, block, shared, stream>>>();" in split.cuda


def test_types_and_constants_used_by_kernel_parameters_go_to_both_parts():
    types = "struct Pair { float* p; int n; };\ntypedef float real;\nconstexpr int THREADS = 128;\n"
    kernel = "__global__ void k(Pair pair, real scale) { pair.p[0] = scale; }\n"
    source = TORCH + types + kernel + _host_function("k<<<1, THREADS>>>(Pair{x.data_ptr<float>(), 1}, 2.0f);")
    split = _split(source)
    for declaration in ("struct Pair { float* p; int n; };", "typedef float real;", "constexpr int THREADS = 128;"):
        assert declaration in split.cuda
        assert declaration in split.host
    # The launcher's declaration names Pair and real: it must come after them.
    assert split.host.index("typedef float real;") < split.host.index(f"void {LAUNCHER_PREFIX}k(")


HELPERS = """__global__ void k(float* x, long n) { if (threadIdx.x < n) x[threadIdx.x] = 1.0f; }
static int blocks(long n) { return (int)((n + 255) / 256); }
int threads(long n)  // a plain host helper with external linkage
{ return n < 256 ? (int)n : 256; }
""" + _host_function("k<<<blocks(x.numel()), threads(x.numel())>>>(x.data_ptr<float>(), x.numel());")


def test_plain_host_helpers_reach_the_host_part():
    split = _split(TORCH + HELPERS)
    # Both stay in the CUDA part, where they were.
    assert "static int blocks(long n)" in split.cuda and "int threads(long n)  //" in split.cuda
    # The static one is copied; the other is declared (one definition only, and no comment eating the semicolon).
    assert "static int blocks(long n) { return (int)((n + 255) / 256); }" in split.host
    assert "int threads(long n);" in split.host
    assert split.host.index("int threads(long n);") < split.host.index("torch::Tensor run(")


def test_host_helpers_the_torch_functions_do_not_call_stay_in_the_cuda_part_only():
    unused = 'static int pick(int n, const char* why = "b") { return n; }\nstruct S { int f(int); };\n'
    unused += "int S::f(int n) { return n; }\n"
    split = _split(TORCH + unused + HELPERS)
    assert "pick" not in split.host and "S::f" not in split.host
    assert "static int pick(int n" in split.cuda and "int S::f(int n)" in split.cuda


UNSURE_HELPERS = {
    "member": "struct S { static int pick(int); };\nint S::pick(int n) { return n; }\n",
    "extern C": 'extern "C" int pick(int n) { return n; }\n',
    "deduced return type": "auto pick(int n) { return n; }\n",
    "templated launcher": "template <typename T> int pick(T n) { k<<<1, 1>>>(nullptr); return n; }\n",
}


@pytest.mark.parametrize("helper", UNSURE_HELPERS.values(), ids=UNSURE_HELPERS.keys())
def test_declines_a_called_host_helper_it_cannot_copy_or_declare_faithfully(helper):
    kernel = "__global__ void k(float* x) { x[0] = 1.0f; }\n"
    pick = "S::pick" if "::" in helper else "pick"
    call = f"k<<<{pick}(1), 1>>>(x.data_ptr<float>());"
    assert isinstance(split_source(TORCH + kernel + helper + _host_function(call)), Declined)


FAITHFUL_HELPERS = {
    # (helper, what the host part gets)
    "default argument": (
        'int pick(int n, const char* why = "b") { return n; }\n',
        'int pick(int n, const char* why = "b");',
    ),
    "constexpr": ("constexpr int pick(int n) { return n; }\n", "constexpr int pick(int n) { return n; }"),
    "host device inline": (
        "__host__ __device__ inline int pick(int n) { return n; }\n",
        "__host__ __device__ inline int pick(int n) { return n; }",
    ),
    "static, naming a kernel": (
        "static int pick(int n) {\n  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, n);\n"
        + "  return n;\n}\n",
        "int pick(int n);",
    ),
}


@pytest.mark.parametrize(("helper", "host"), FAITHFUL_HELPERS.values(), ids=FAITHFUL_HELPERS.keys())
def test_a_called_host_helper_is_copied_or_declared(helper, host):
    kernel = "__global__ void k(float* x) { x[0] = 1.0f; }\n"
    split = _split(TORCH + kernel + helper + _host_function("k<<<pick(1), 1>>>(x.data_ptr<float>());"))
    assert host in split.host
    assert split.host.index(host) < split.host.index("torch::Tensor run(")


def test_a_static_helper_naming_a_kernel_loses_static_in_the_cuda_part_only_its_lines_kept():
    helper = FAITHFUL_HELPERS["static, naming a kernel"][0]
    source = TORCH + "__global__ void k(float* x) { x[0] = 1.0f; }\n" + helper + _host_function("k<<<pick(1), 1>>>(x);")
    cuda = _split(source).cuda
    assert "       int pick(int n) {" in cuda and "static int pick" not in cuda
    # On the line it was on: the CUDA part is the prelude's three lines, then the source line for line.
    assert cuda.splitlines()[source.splitlines().index("static int pick(int n) {") + 3] == "       int pick(int n) {"


def test_a_plain_host_launcher_called_from_torch_code_is_declared_and_keeps_its_launch():
    source = TORCH + "__global__ void k(float* x) {}\nvoid go(float* x) { k<<<1, 1>>>(x); }\n"
    split = _split(source + _host_function("go(x.data_ptr<float>());"))
    assert "void go(float* x) { k<<<1, 1>>>(x); }" in split.cuda
    assert "void go(float* x);" in split.host and "<<<" not in split.host
    assert split.launched == []


@pytest.mark.slow  # a C++ build against torch's headers: about 25 s on two cores
def test_host_part_with_helpers_compiles_against_the_torch_headers(tmp_path):
    torch_extension = pytest.importorskip("torch.utils.cpp_extension")
    compiler, cuda_include = shutil.which("g++"), Path("/usr/local/cuda/include")
    assert compiler, "g++ is not on PATH"
    assert (cuda_include / "cuda_runtime.h").is_file(), f"the CUDA toolkit's headers are not in {cuda_include}"
    split = _split(TORCH + HELPERS)
    (tmp_path / "main.cpp").write_text(split.host)
    includes = [*torch_extension.include_paths(), str(cuda_include), sysconfig.get_paths()["include"]]
    command = [compiler, "-std=c++17", "-fsyntax-only", *(f"-I{i}" for i in includes), str(tmp_path / "main.cpp")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _nvcc(tmp_path, split.cuda).returncode == 0


def test_device_globals_stay_in_the_cuda_part_only():
    globals_ = "__constant__ float table[4];\n__device__ int counter;\n"
    kernel = "__global__ void k(float* x) { x[counter] = table[0]; }\n"
    split = _split(TORCH + globals_ + kernel + _host_function("k<<<1, 1>>>(x.data_ptr<float>());"))
    assert "__constant__ float table[4];" in split.cuda
    assert "__device__ int counter;" in split.cuda
    assert "table" not in split.host
    assert "counter" not in split.host


def test_braces_and_launches_in_comments_and_strings_are_not_code():
    source = (
        TORCH
        + "// an open brace { in a comment\n"
        + "/* k<<<1, 1>>>(); } */\n"
        + "__global__ void k(char* s /* out */, int n) { const char* t = \"}{<<<\"; char c = '{'; s[n] = c; }\n"
        + _host_function('// k<<<9, 9>>>(0, 0);\n  k<<<1, 1>>>((char*)"<<<}", 1);')
    )
    split = _split(source)
    assert split.launched == ["k"]
    assert f'{LAUNCHER_PREFIX}k(1, 1, 0, 0, (char*)"<<<}}", 1);' in split.host
    assert "// k<<<9, 9>>>(0, 0);" in split.host  # the comment is left as it was
    # The parameter named in a comment is not taken for the parameter's name.
    assert "k<<<grid, block, shared, stream>>>(s, n);" in split.cuda
    assert "const char* t = \"}{<<<\"; char c = '{';" in split.cuda


def test_comment_naming_global_does_not_make_a_host_function_a_kernel():
    source = TORCH + "__global__ void k() {}\n// runs the __global__ kernel\n" + _host_function("k<<<1, 1>>>();")
    split = _split(source)
    assert "torch::" not in split.cuda
    assert f"{LAUNCHER_PREFIX}k(1, 1, 0, 0);" in split.host


def test_comments_between_and_after_items_are_allowed():
    source = TORCH + "__global__ void k() {}\n// macros\n#define Z 1\n" + _host_function("k<<<Z, 1>>>();") + "// end\n"
    split = _split(source)
    assert "#define Z 1" in split.cuda
    assert "// end" in split.cuda


def test_digit_separator_and_raw_string_do_not_open_literals():
    kernel = "__global__ void k(int* x) { x[0] = 1'000; x[1] = '}'; }\n"
    body = 'const char* doc = R"d(} "<<<" {)d"; k<<<1, 1>>>(nullptr);'
    split = _split(TORCH + kernel + _host_function(body))
    assert f"{LAUNCHER_PREFIX}k(1, 1, 0, 0, nullptr);" in split.host
    assert 'R"d(} "<<<" {)d"' in split.host


def test_cuda_part_of_kernels_with_types_and_commented_parameters_compiles_with_nvcc(tmp_path):
    source = (
        TORCH
        + "struct Pair { float* p; int n; };\n"
        + "__constant__ float table[4];\n"
        + "__global__ void a(Pair pair, // the data\n    float scale /* factor */) {\n"
        + "  pair.p[0] = scale * table[0] + 1'000;\n}\n"
        + "__global__ void b() {}\n"
        + _host_function(
            "a<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(Pair{x.data_ptr<float>(), 1}, 10.0f);\n  b<<<1, 1>>>();"
        )
    )
    result = _nvcc(tmp_path, _split(source).cuda)
    assert result.returncode == 0, result.stderr


# --- what the split declines ---------------------------------------------------------------------


DECLINED = {
    "unclosed brace": "__global__ void k() { {\n" + _host_function("k<<<1, 1>>>();"),
    "extra closing brace": "__global__ void k() { }}\n" + _host_function("k<<<1, 1>>>();"),
    "launch through an expression": "__global__ void k() {}\n"
    + _host_function("void (*ks[1])() = {k};\n  ks[0]<<<1, 1>>>();\n  k<<<1, 1>>>();"),
    "launch of an unknown kernel": "__global__ void k() {}\n" + _host_function("other<<<1, 1>>>();"),
    "launch in a macro": "__global__ void k() {}\n#define GO k<<<1, 1>>>()\n" + _host_function("GO;"),
    "deduced template arguments": "template <typename T> __global__ void k(T* x) {}\n"
    + _host_function("k<<<1, 1>>>(x.data_ptr<float>());"),
    "scalar_t outside a dispatch": "template <typename T> __global__ void k(T* x) {}\n"
    + _host_function("using scalar_t = float;\n  k<scalar_t><<<1, 1>>>(x.data_ptr<scalar_t>());"),
    "a dispatch over torch's Half": "template <typename T> __global__ void k(T* x) {}\n"
    + _host_function(
        'AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "k", [&] {\n'
        + "    k<scalar_t><<<1, 1>>>(x.data_ptr<scalar_t>());\n  });"
    ),
    "template arguments of the host code": "template <int N> __global__ void k(float* x) {}\n"
    + _host_function("constexpr int n = 4;\n  k<n><<<1, 1>>>(x.data_ptr<float>());"),
    "torch code under #ifdef": "__global__ void k() {}\n#ifdef FAST\n" + _host_function("k<<<1, 1>>>();") + "#endif\n",
    "torch include under #if": "#if 1\n#include <ATen/cuda/CUDAContext.h>\n#endif\n__global__ void k() {}\n"
    + _host_function("k<<<1, 1>>>();"),
    "an #if without #endif": "#if 1\n#define N 1\n__global__ void k() {}\n" + _host_function("k<<<1, 1>>>();"),
    "thrust in host code": "#include <thrust/sort.h>\n__global__ void k() {}\n"
    + _host_function("thrust::sort(thrust::device, x.data_ptr<float>(), x.data_ptr<float>() + 4);\n  k<<<1, 1>>>();"),
    "device lambda in host code": "__global__ void k() {}\n"
    + _host_function("auto f = [] __device__ (float v) { return v; };\n  k<<<1, 1>>>();"),
    "device code naming torch": "__global__ void k(at::Half* x) {}\n"
    + _host_function("k<<<1, 1>>>(x.data_ptr<at::Half>());"),
    "a global used by host and CUDA code": "int calls = 0;\nvoid count() { calls++; }\n__global__ void k() {}\n"
    + _host_function("count();\n  calls = 2;\n  k<<<1, 1>>>();"),
    "a namespace holding torch and CUDA code": "namespace q { __device__ int one() { return 1; }\n"
    + "torch::Tensor id(torch::Tensor x) { return x; } }\n__global__ void k() {}\n"
    + _host_function("k<<<1, 1>>>();"),
    "host code using a namespace of device code": "namespace q { constexpr int N = 2;\n"
    + "__device__ int one() { return N; } }\n__global__ void k() {}\n"
    + _host_function("k<<<q::N, 1>>>();"),
    "a torch macro used by CUDA code": '#define CHECK(c) TORCH_CHECK(c, "bad")\n'
    + "__global__ void k() {}\nvoid go() { CHECK(true); k<<<1, 1>>>(); }\n"
    + _host_function("go();"),
    "a kernel in a namespace": "namespace q { __global__ void k() {} }\n" + _host_function("q::k<<<1, 1>>>();"),
    "a device variable named by host code": "__device__ int g_filled = 0;\n__global__ void k() { g_filled = 1; }\n"
    + _host_function("int filled = 0;\n  cudaMemcpyFromSymbol(&filled, g_filled, sizeof(int));\n  k<<<1, 1>>>();"),
    "a constant array copied to by host code": "__constant__ float weights[16];\n"
    + "__global__ void k(float* y) { y[0] = weights[0]; }\n"
    + _host_function(
        "float w[16] = {};\n  cudaMemcpyToSymbol(weights, w, sizeof(w));\n  k<<<1, 1>>>(x.data_ptr<float>());"
    ),
}


@pytest.mark.parametrize("source", DECLINED.values(), ids=DECLINED.keys())
def test_declines_what_it_cannot_follow(source):
    assert isinstance(split_source(TORCH + source), Declined)


def test_a_declined_source_says_why_and_where():
    source = TORCH + "// kernels\n" + DECLINED["thrust in host code"]
    declined = split_source(source)
    assert isinstance(declined, Declined)
    assert "thrust" in declined.reason
    line = next(i for i, text in enumerate(source.splitlines(), 1) if "thrust::sort" in text)
    assert declined.line == line
    assert declined.text() == f"{declined.reason} (line {line} of cuda_sources)"
    # Where the source starts on line 30 of the user's file, its line N is the file's line 29 + N.
    assert declined.text(first_line=30) == f"{declined.reason} (line {29 + line})"


# --- forms of real candidates --------------------------------------------------------------------


def test_a_templated_kernel_gets_one_launcher_per_instantiation():
    kernel = "#define BLOCK 256\ntemplate <int B, typename T> __global__ void k(T* x, int n) { x[0] = B; }\n"
    body = "k<BLOCK, float><<<1, BLOCK>>>(x.data_ptr<float>(), 1);\n  k<128, double><<<1, 128>>>(nullptr, 2);"
    split = _split(TORCH + kernel + _host_function(body))
    assert split.launched == ["k"]
    assert f"{LAUNCHER_PREFIX}k_0(1, BLOCK, 0, 0, x.data_ptr<float>(), 1);" in split.host
    assert f"{LAUNCHER_PREFIX}k_1(1, 128, 0, 0, nullptr, 2);" in split.host
    assert f"void {LAUNCHER_PREFIX}k_0(dim3 grid, dim3 block, size_t shared, cudaStream_t stream, float* x, int n)" in (
        split.cuda
    )
    assert "k<BLOCK,float><<<grid, block, shared, stream>>>(x, n);" in split.cuda
    assert "k<128,double><<<grid, block, shared, stream>>>(x, n);" in split.cuda


DISPATCH = (
    "template <typename scalar_t>\n__global__ void k(const scalar_t* __restrict__ x, scalar_t* y, int n) {}\n"
    + _host_function(
        'AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "k", ([&] {\n'
        + "    k<scalar_t><<<1, 32>>>(x.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), 3);\n  }));"
    )
)


def test_a_launch_inside_a_type_dispatch_gets_a_templated_launcher_instantiated_for_its_types():
    split = _split(TORCH + DISPATCH)
    launcher = f"{LAUNCHER_PREFIX}k_0"
    assert f"{launcher}<scalar_t>(1, 32, 0, 0, x.data_ptr<scalar_t>()" in split.host
    assert f"template <typename scalar_t> void {launcher}(dim3 grid" in split.host
    # AT_DISPATCH_FLOATING_TYPES instantiates its lambda for double and float: the CUDA part makes both.
    for type_name in ("double", "float"):
        declaration = f"template void {launcher}<{type_name}>(dim3, dim3, size_t, cudaStream_t, const {type_name}*"
        assert declaration in split.cuda


def test_device_only_headers_and_namespaces_stay_in_the_cuda_part():
    head = (
        "#include <cuda_fp16.h>\n#include <mma.h>\n#include <cooperative_groups.h>\n"
        + "#include <cooperative_groups/reduce.h>\n"
        + '#include "tile.cuh"\nusing namespace nvcuda;\nnamespace cg = cooperative_groups;\n'
    )
    split = _split(TORCH + head + "__global__ void k(__half* x) {}\n" + _host_function("k<<<1, 1>>>(nullptr);"))
    for line in head.splitlines():
        assert line in split.cuda
    assert "#include <cuda_fp16.h>" in split.host  # the launcher's parameter type
    for device_only in ("mma.h", "cooperative_groups", "tile.cuh", "nvcuda", "cg ="):
        assert device_only not in split.host


def test_namespaces_go_where_they_are_used():
    source = (
        "namespace cfg { constexpr int kThreads = 64; }\n"
        + "namespace { __device__ float twice(float v) { return 2 * v; } }\n"
        + "__global__ void k(float* x) { x[0] = twice(x[0]); }\n"
        + _host_function("k<<<1, cfg::kThreads>>>(x.data_ptr<float>());")
    )
    split = _split(TORCH + source)
    assert "namespace cfg { constexpr int kThreads = 64; }" in split.host
    assert "twice" not in split.host and "namespace { __device__ float twice" in split.cuda


def test_a_host_global_goes_to_the_host_part_only():
    source = "static int g_sms = 0;\n__global__ void k() {}\n" + _host_function("g_sms += 1;\n  k<<<g_sms, 1>>>();")
    split = _split(TORCH + source)
    assert "static int g_sms = 0;" in split.host and "g_sms" not in split.cuda


def test_kernels_the_host_code_names_are_reached_through_address_functions():
    body = "cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536);\n  k<<<1, 1, 65536>>>();"
    split = _split(TORCH + "__global__ void k() {}\n" + _host_function(body))
    assert f"cudaFuncSetAttribute({ADDRESS_PREFIX}k(), cudaFuncAttributeMaxDynamicSharedMemorySize" in split.host
    assert f"const void* {ADDRESS_PREFIX}k();" in split.host
    assert f"const void* {ADDRESS_PREFIX}k() {{ return (const void*)k; }}" in split.cuda


def test_conditional_groups_of_device_code_keep_their_directives_in_both_parts():
    source = (
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n__device__ float f(float v) { return v; }\n"
        + "#else\n__device__ float f(float v) { return -v; }\n#endif\n"
        + "__global__ void k(float* x) { x[0] = f(x[0]); }\n"
        + _host_function("k<<<1, 1>>>(x.data_ptr<float>());")
    )
    split = _split(TORCH + source)
    assert "__device__ float f" not in split.host
    assert split.host.count("#endif") == 1 and split.cuda.count("__device__ float f") == 2


def test_a_binding_block_goes_to_the_host_part():
    binding = 'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n  m.def("run", &run, "run");\n}\n'
    split = _split(TORCH + "__global__ void k() {}\n" + _host_function("k<<<1, 1>>>();") + binding)
    assert binding.strip() in split.host and "PYBIND11" not in split.cuda


def test_the_cuda_part_of_the_new_forms_compiles_with_nvcc(tmp_path):
    source = (
        TORCH
        + "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
        + "namespace { __device__ float twice(float v) { return 2 * v; } }\n"
        + "template <int B> __global__ void t(float* x) { cg::this_thread_block().sync(); x[0] = twice(B); }\n"
        + DISPATCH
        + "\n__global__ void a() {}\n"
        + _host_function(
            "cudaFuncSetAttribute(a, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024);\n"
            + "  a<<<1, 1>>>();\n  t<64><<<1, 64>>>(x.data_ptr<float>());"
        ).replace("run(", "run2(")
    )
    result = _nvcc(tmp_path, _split(source).cuda)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "source",
    [
        # A member of the host code's own that shares the device variable's name.
        "struct Options { float scale; };\n__constant__ float scale;\n__global__ void k(float* y) { y[0] = scale; }\n"
        + _host_function("Options o{2.0f};\n  (void)o.scale;\n  k<<<1, 1>>>(x.data_ptr<float>());"),
        # A device variable behind an attribute, and a variable template: device code alone uses them.
        "[[maybe_unused]] __device__ int g;\n__global__ void k() { g = 1; }\n" + _host_function("k<<<1, 1>>>();"),
        "template <typename T> __device__ T zero = T(0);\n__global__ void k(float* y) { y[0] = zero<float>; }\n"
        + _host_function("k<<<1, 1>>>(x.data_ptr<float>());"),
    ],
    ids=["member_of_the_same_name", "attribute_first", "variable_template"],
)
def test_device_variables_only_device_code_uses_still_split(source):
    split = split_source(TORCH + source)
    assert not isinstance(split, Declined), split.text()
