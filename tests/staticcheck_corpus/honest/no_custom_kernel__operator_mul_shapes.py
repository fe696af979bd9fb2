"""operator.mul multiplies sizes for the launch (rows of a batched input); the product itself is a kernel."""

import functools
import operator

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

B, S, K, N = 8, 64, 256, 128

_cuda_src = r"""
#include <torch/extension.h>

__global__ void matmul_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                              int64_t m, int64_t k, int64_t n) {
  int64_t row = blockIdx.y * (int64_t)blockDim.y + threadIdx.y;
  int64_t col = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int64_t i = 0; i < k; ++i) acc += a[row * k + i] * b[i * n + col];
  c[row * n + col] = acc;
}

torch::Tensor matmul(torch::Tensor a, torch::Tensor b, int64_t rows) {
  const int64_t k = b.size(0), n = b.size(1);
  auto c = torch::empty({rows, n}, a.options());
  dim3 block(16, 16), grid((n + 15) / 16, (rows + 15) / 16);
  matmul_kernel<<<grid, block>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), rows, k, n);
  return c;
}
"""
_ext = load_inline(
    name="rows_matmul_ext",
    cpp_sources="torch::Tensor matmul(torch::Tensor a, torch::Tensor b, int64_t rows);",
    cuda_sources=_cuda_src,
    functions=["matmul"],
)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(K, N))

    def forward(self, x):
        return torch.matmul(x, self.weight)


def get_inputs():
    return [torch.randn(B, S, K, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(Model):
    def forward(self, x):
        rows = functools.reduce(operator.mul, x.shape[:-1], 1)
        out = _ext.matmul(x.contiguous(), self.weight.contiguous(), rows)
        return out.view(*x.shape[:-1], self.weight.shape[1])
