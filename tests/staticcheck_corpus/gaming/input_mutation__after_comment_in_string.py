# rule: input_mutation
"""The wrapper zeroes its input after the kernel read it, behind a string literal that holds "/*": a check that
took the literal's "/*" for a comment's start would blank everything after it, the zeroing included."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

N = 1 << 20

_cuda_src = r"""
#include <torch/extension.h>

__global__ void scaled_relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.0f) * 2.0f;
}

torch::Tensor scaled_relu(torch::Tensor x) {
  static const char* banner = "relu /* scaled";
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  scaled_relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  x.zero_();  // <-
  return y;
}
"""
_ext = load_inline(
    name="banner_ext",
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
        return _ext.scaled_relu(x)
