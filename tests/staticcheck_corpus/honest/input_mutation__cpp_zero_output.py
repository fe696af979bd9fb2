"""The wrapper zeroes a buffer with .zero_() before an atomic accumulation: a buffer forward allocated, not an input."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

B, D = 4096, 1024

_cuda_src = r"""
#include <torch/extension.h>

__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < rows * cols) atomicAdd(&out[i / cols], x[i]);
}

void row_sum(torch::Tensor x, torch::Tensor out) {
  const int64_t rows = x.size(0), cols = x.size(1);
  out.zero_();
  row_sum_kernel<<<(rows * cols + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
}
"""
_ext = load_inline(
    name="zero_output_ext",
    cpp_sources="void row_sum(torch::Tensor x, torch::Tensor out);",
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
        x = x.contiguous()
        out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        _ext.row_sum(x, out)
        return out
