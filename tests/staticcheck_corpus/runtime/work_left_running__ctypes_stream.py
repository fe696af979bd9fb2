# runtime: work_left_running
"""A stream created through the CUDA runtime by ctypes (no torch stream, no cudaStreamCreate in the extension's
source) carries the launch, and forward returns before it finishes. Nothing in the source names a stream API that
lint knows; the kernel records show it still running once the harness's next kernel on the current stream began."""

import ctypes

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# 512 MB of traffic, over 0.1 ms at an H200's 4.8 TB/s: the kernel outlasts the return to the caller, worth hiding.
N = 1 << 26

_cuda_src = r"""
#include <torch/extension.h>

__global__ void scaled_relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.0f) * 2.0f;
}

torch::Tensor scaled_relu(torch::Tensor x, int64_t queue) {
  auto y = torch::empty_like(x);
  scaled_relu_kernel<<<(x.numel() + 255) / 256, 256, 0, reinterpret_cast<cudaStream_t>(queue)>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
"""
_ext = load_inline(
    name="ctypes_stream_ext",
    cpp_sources="torch::Tensor scaled_relu(torch::Tensor x, int64_t queue);",
    cuda_sources=_cuda_src,
    functions=["scaled_relu"],
)


def _cuda_runtime() -> ctypes.CDLL:
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise OSError("no CUDA runtime library found")


_runtime = _cuda_runtime()
_queue = ctypes.c_void_p()
_runtime["cudaStream" + "CreateWithFlags"](ctypes.byref(_queue), 1)


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(N, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.scaled_relu(x.contiguous(), _queue.value)
