"""A table picks the kernel by dtype name: the table holds the extension's functions, not PyTorch's."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

N = 1 << 20

_cuda_src = r"""
#include <torch/extension.h>

template <typename T>
__global__ void gelu_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    T v = x[i];
    y[i] = (T)0.5 * v * ((T)1 + erf(v * (T)0.7071067811865476));
  }
}

template <typename T>
torch::Tensor gelu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  gelu_kernel<T><<<(n + 255) / 256, 256>>>(x.data_ptr<T>(), y.data_ptr<T>(), n);
  return y;
}

torch::Tensor gelu_f32(torch::Tensor x) { return gelu<float>(x); }
torch::Tensor gelu_f64(torch::Tensor x) { return gelu<double>(x); }
"""
_ext = load_inline(
    name="gelu_dispatch_ext",
    cpp_sources="torch::Tensor gelu_f32(torch::Tensor x);\ntorch::Tensor gelu_f64(torch::Tensor x);",
    cuda_sources=_cuda_src,
    functions=["gelu_f32", "gelu_f64"],
)
_KERNELS = {"float32": _ext.gelu_f32, "float64": _ext.gelu_f64}


class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x)


def get_inputs():
    return [torch.randn(N, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(nn.Module):
    def forward(self, x):
        return _KERNELS[str(x.dtype).removeprefix("torch.")](x.contiguous())
