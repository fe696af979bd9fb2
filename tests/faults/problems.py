"""The fault suite: one candidate per GPU fault, all sharing one load_inline extension.

Used by tests/gpu/test_faults_gpu.py and by benchmarks/soak.py. Each entry is
(candidate name, ModelNew source, the JobError kind profsvc must answer with).
The extension's source is identical in every candidate, so the build cache
builds it once.
"""

from __future__ import annotations

from profsvc_client.models import KernelSource, SourceFile

PROBLEM = '''import ctypes
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

N = 1 << 16


class Model(nn.Module):
    def forward(self, x):
        return x + 1.0


def get_inputs():
    return [torch.randn(N, device="cuda")]


def get_init_inputs():
    return []


_cpp = """
torch::Tensor add_one(torch::Tensor x);
torch::Tensor wild_write(torch::Tensor x);
torch::Tensor failing_assert(torch::Tensor x);
torch::Tensor trap(torch::Tensor x);
torch::Tensor spin_forever(torch::Tensor x);
"""
_cuda = r"""
#undef NDEBUG
#include <cassert>
#include <torch/extension.h>
__global__ void add_one_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}
__global__ void wild_write_kernel(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) ((float*)0x8)[i * 4096] = 1.0f;  // far outside any allocation: corrupts the context
}
__global__ void assert_kernel(const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) assert(x[i] > 1e30f);
}
__global__ void trap_kernel(int n) {
  if (blockIdx.x * blockDim.x + threadIdx.x < n) __trap();
}
__global__ void spin_kernel(volatile int* flag) {
  while (*flag == 0) { }
}
static int blocks(int n) { return (n + 255) / 256; }
torch::Tensor add_one(torch::Tensor x) {
  auto y = torch::empty_like(x);
  add_one_kernel<<<blocks(x.numel()), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
torch::Tensor wild_write(torch::Tensor x) {
  auto y = torch::empty_like(x);
  wild_write_kernel<<<blocks(x.numel()), 256>>>(y.data_ptr<float>(), x.numel());
  return y;
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
    name="fault_ext",
    cpp_sources=_cpp,
    cuda_sources=_cuda,
    functions=["add_one", "wild_write", "failing_assert", "trap", "spin_forever"],
    extra_cuda_cflags=["-O3"],
)
'''


def _forward(body: str) -> str:
    return f"""

class ModelNew(nn.Module):
    def forward(self, x):
        {body}
"""


GOOD = ("good", _forward("return _ext.add_one(x)"), "")
FAULTS = [
    ("illegal_memory_access", _forward("return _ext.wild_write(x)"), "illegal_memory_access"),
    ("device_assert", _forward("return _ext.failing_assert(x)"), "device_assert"),
    ("kernel_trap", _forward("return _ext.trap(x)"), "kernel_trap"),
    ("never_ends", _forward("return _ext.spin_forever(x)"), "timeout"),
    ("host_segfault", _forward("ctypes.string_at(0)\n        return _ext.add_one(x)"), "crash"),
    ("out_of_memory", _forward("return torch.empty(1 << 45, device='cuda')"), "out_of_memory"),
]


def source(name: str, model_new: str) -> KernelSource:
    """The problem with one candidate, as a request would carry it."""
    return KernelSource(main=SourceFile(name=f"{name}.py", content=(PROBLEM + model_new).encode()))
