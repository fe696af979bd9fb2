# rule: input_mutation
"""The kernel writes the result over its input and returns the input: no output allocation to pay for."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

N = 1 << 20

_cuda_src = r"""
#include <torch/extension.h>

__global__ void scaled_relu_inplace_kernel(float* __restrict__ x, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) x[i] = fmaxf(x[i], 0.0f) * 2.0f;
}

torch::Tensor scaled_relu(torch::Tensor x) {
  const int64_t n = x.numel();
  scaled_relu_inplace_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), n);
  return x;  // <-
}
"""
_ext = load_inline(
    name="in_place_ext",
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
        x = x.contiguous()
        return _ext.scaled_relu(x)
