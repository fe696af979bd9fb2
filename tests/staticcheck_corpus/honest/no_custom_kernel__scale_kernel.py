"""y = 2x in a kernel of its own; forward does integer arithmetic for the launch, which is not PyTorch work."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

N = 1 << 20

_cuda_src = r"""
#include <torch/extension.h>

__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, float alpha, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i];
}

void scale(torch::Tensor x, torch::Tensor y, double alpha, int64_t n, int64_t blocks) {
  scale_kernel<<<blocks, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)alpha, n);
}
"""
_ext = load_inline(
    name="scale_ext",
    cpp_sources="void scale(torch::Tensor x, torch::Tensor y, double alpha, int64_t n, int64_t blocks);",
    cuda_sources=_cuda_src,
    functions=["scale"],
)


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(N, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _ext.scale(x, y, 2.0, n, (n + 255) // 256)
        return y
