"""GPU test problems: the fault suite and the agent-tool candidates, all sharing one load_inline extension.

Used by tests/gpu/test_faults_gpu.py, tests/gpu/test_agent_tools_gpu.py and benchmarks/soak.py. Every
candidate carries the same extension source (so the build cache builds it once per GPU run) and differs
only in what ModelNew does with it. FAULTS lists (name, ModelNew source, the JobError kind profsvc must
answer with).
"""

from __future__ import annotations

from profsvc_contract.models import KernelSource, SourceFile

HEADER = """import ctypes
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

N = {n}


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


def get_inputs():
    p = popcorn_pri
    return [torch.randn(p.jitter_int(N, align=256), device="cuda")]


def get_init_inputs():
    return []
"""

EXTENSION = '''
_cpp = """
torch::Tensor affine(torch::Tensor x);
torch::Tensor affine_current_stream(torch::Tensor x);
torch::Tensor nothing(torch::Tensor x);
torch::Tensor affine_inplace(torch::Tensor x);
torch::Tensor affine_fixed(torch::Tensor x);
torch::Tensor wild_write(torch::Tensor x);
torch::Tensor failing_assert(torch::Tensor x);
torch::Tensor trap(torch::Tensor x);
torch::Tensor spin_forever(torch::Tensor x);
"""
_cuda = r"""
#undef NDEBUG
#include <cassert>
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#define FIXED_N (1 << 20)
__global__ void affine_kernel(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 2.0f + 1.0f;
}
__global__ void wild_write_kernel(long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) ((float*)0x8)[i * 4096] = 1.0f;  // far outside any allocation: corrupts the context
}
__global__ void assert_kernel(const float* x, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) assert(x[i] > 1e30f);
}
__global__ void trap_kernel(long n) {
  if (blockIdx.x * (long)blockDim.x + threadIdx.x < n) __trap();
}
__global__ void spin_kernel(volatile int* flag) {
  while (*flag == 0) { }
}
static int blocks(long n) { return (int)((n + 255) / 256); }
torch::Tensor affine(torch::Tensor x) {
  auto y = torch::empty_like(x);
  affine_kernel<<<blocks(x.numel()), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
torch::Tensor affine_current_stream(torch::Tensor x) {
  auto y = torch::empty_like(x);
  auto stream = at::cuda::getCurrentCUDAStream();
  affine_kernel<<<blocks(x.numel()), 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
torch::Tensor nothing(torch::Tensor x) { return torch::empty_like(x); }
torch::Tensor affine_inplace(torch::Tensor x) {
  affine_kernel<<<blocks(x.numel()), 256>>>(x.data_ptr<float>(), x.data_ptr<float>(), x.numel());
  return x;
}
torch::Tensor affine_fixed(torch::Tensor x) {
  auto y = torch::empty({FIXED_N}, x.options());
  long n = x.numel() < FIXED_N ? x.numel() : FIXED_N;
  affine_kernel<<<blocks(n), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
torch::Tensor wild_write(torch::Tensor x) {
  wild_write_kernel<<<blocks(x.numel()), 256>>>(x.numel());
  return torch::empty_like(x);
}
torch::Tensor failing_assert(torch::Tensor x) {
  assert_kernel<<<blocks(x.numel()), 256>>>(x.data_ptr<float>(), x.numel());
  return x.clone();
}
torch::Tensor trap(torch::Tensor x) {
  trap_kernel<<<blocks(x.numel()), 256>>>(x.numel());
  return x.clone();
}
torch::Tensor spin_forever(torch::Tensor x) {
  auto flag = torch::zeros({1}, x.options().dtype(torch::kInt32));
  spin_kernel<<<1, 1>>>(flag.data_ptr<int>());
  return x.clone();
}
"""
_ext = load_inline(
    name="profsvc_test_ext",
    cpp_sources=_cpp,
    cuda_sources=_cuda,
    functions=[
        "affine", "affine_current_stream", "nothing", "affine_inplace", "affine_fixed",
        "wild_write", "failing_assert", "trap", "spin_forever",
    ],
    extra_cuda_cflags=["-O3"],
)
'''
SMALL_N = 1 << 20
LARGE_N = 1 << 28


def model_new(body: str, init: str = "") -> str:
    """A ModelNew whose forward is `body` (one line), with an optional `__init__` body."""
    constructor = f"    def __init__(self):\n        super().__init__()\n        {init}\n\n" if init else ""
    return f"\n\nclass ModelNew(nn.Module):\n{constructor}    def forward(self, x):\n        {body}\n"


GOOD = ("good", model_new("return _ext.affine(x)"), "")
FAULTS = [
    ("illegal_memory_access", model_new("return _ext.wild_write(x)"), "illegal_memory_access"),
    ("device_assert", model_new("return _ext.failing_assert(x)"), "device_assert"),
    ("kernel_trap", model_new("return _ext.trap(x)"), "kernel_trap"),
    ("never_ends", model_new("return _ext.spin_forever(x)"), "timeout"),
    ("host_segfault", model_new("ctypes.string_at(0)\n        return _ext.affine(x)"), "crash"),
    ("out_of_memory", model_new("return torch.empty(1 << 45, device='cuda')"), "out_of_memory"),
]


def source(name: str, candidate: str, n: int = SMALL_N) -> KernelSource:
    """The problem (at size n) with one candidate, as a request would carry it."""
    text = HEADER.format(n=n) + EXTENSION + candidate
    return KernelSource(main=SourceFile(name=f"{name}.py", content=text.encode()))
