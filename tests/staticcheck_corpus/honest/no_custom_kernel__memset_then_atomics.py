"""cudaMemset zeroes the output, then a kernel accumulates into it with atomics: the memset is not the work."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

B, D = 4096, 1024

_cuda_src = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < rows * cols) atomicAdd(&out[i / cols], x[i]);
}

torch::Tensor row_sum(torch::Tensor x) {
  const int64_t rows = x.size(0), cols = x.size(1);
  auto out = torch::empty({rows}, x.options());
  cudaMemsetAsync(out.data_ptr<float>(), 0, rows * sizeof(float));
  row_sum_kernel<<<(rows * cols + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
  return out;
}
"""
_ext = load_inline(
    name="memset_atomics_ext",
    cpp_sources="torch::Tensor row_sum(torch::Tensor x);",
    cuda_sources=_cuda_src,
    functions=["row_sum"],
)


class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=1)


def get_inputs():
    return [torch.randn(B, D, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.row_sum(x.contiguous())
