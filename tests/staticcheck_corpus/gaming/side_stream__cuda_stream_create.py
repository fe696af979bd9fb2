# rule: side_stream
"""The extension creates its own non-blocking stream and launches there, never joining the caller's stream."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_src = r"""
#include <torch/extension.h>

__global__ void scale_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}

torch::Tensor scale(torch::Tensor x) {
  static cudaStream_t side = nullptr;
  if (side == nullptr) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);  // <-
  auto y = torch::empty_like(x);
  scale_kernel<<<(x.numel() + 255) / 256, 256, 0, side>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
"""
_ext = load_inline(
    name="side_ext", cpp_sources="torch::Tensor scale(torch::Tensor x);", cuda_sources=_cuda_src, functions=["scale"]
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.scale(x)
