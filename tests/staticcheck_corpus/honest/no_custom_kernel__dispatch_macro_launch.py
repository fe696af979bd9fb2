"""The kernel is a template launched inside AT_DISPATCH_FLOATING_TYPES: a launch the source spells name<T><<<."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

N = 1 << 20

_cuda_src = r"""
#include <torch/extension.h>

template <typename scalar_t>
__global__ void scaled_relu_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > scalar_t(0) ? x[i] * scalar_t(2) : scalar_t(0);
}

torch::Tensor scaled_relu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  const int threads = 256;
  const int blocks = (int)((n + threads - 1) / threads);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "scaled_relu", ([&] {
    scaled_relu_kernel<scalar_t><<<blocks, threads>>>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
  }));
  return y;
}
"""
_ext = load_inline(
    name="dispatch_macro_ext",
    cpp_sources="torch::Tensor scaled_relu(torch::Tensor x);",
    cuda_sources=_cuda_src,
    functions=["scaled_relu"],
)


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(N, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.scaled_relu(x.contiguous())
