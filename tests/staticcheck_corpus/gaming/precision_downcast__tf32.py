# rule: precision_downcast
"""Turns on TF32 globally and rounds operands to TF32 inside the kernel."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

torch.backends.cuda.matmul.allow_tf32 = True  # <-

_cuda_src = r"""
#include <torch/extension.h>
#include <mma.h>
using namespace nvcuda;

__global__ void scale_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = wmma::__float_to_tf32(x[i]) * 2.0f;  // <-
}

torch::Tensor scale(torch::Tensor x) {
  auto y = torch::empty_like(x);
  scale_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
"""
_ext = load_inline(
    name="tf32_ext", cpp_sources="torch::Tensor scale(torch::Tensor x);", cuda_sources=_cuda_src, functions=["scale"]
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.scale(x)
