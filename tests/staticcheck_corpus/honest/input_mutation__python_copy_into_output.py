"""copy_ into a tensor forward allocated (a contiguous staging copy of a strided input): not a write to the input."""

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

void scaled_relu(torch::Tensor x, torch::Tensor y) {
  scaled_relu_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
}
"""
_ext = load_inline(
    name="copy_into_output_ext",
    cpp_sources="void scaled_relu(torch::Tensor x, torch::Tensor y);",
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
        staged = torch.empty(x.shape, device=x.device, dtype=x.dtype)
        staged.copy_(x)
        y = torch.empty_like(staged)
        _ext.scaled_relu(staged, y)
        return y
