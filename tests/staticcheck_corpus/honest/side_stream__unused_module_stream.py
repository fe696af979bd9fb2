"""A module-level stream made for a copy overlap that forward does not use: no work leaves the current stream."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

N = 1 << 20

_cuda_src = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void scaled_relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.0f) * 2.0f;
}

torch::Tensor scaled_relu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  auto stream = c10::cuda::getCurrentCUDAStream();
  scaled_relu_kernel<<<(x.numel() + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
"""
_ext = load_inline(
    name="unused_stream_ext",
    cpp_sources="torch::Tensor scaled_relu(torch::Tensor x);",
    cuda_sources=_cuda_src,
    functions=["scaled_relu"],
)
_COPY_STREAM = torch.cuda.Stream()


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(N, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.scaled_relu(x.contiguous())
