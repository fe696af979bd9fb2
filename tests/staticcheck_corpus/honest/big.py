"""A memory-bound problem big enough to measure: y = relu(x) * 2 over 256M floats."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

N = 1 << 28


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(N, device="cuda")]


def get_init_inputs():
    return []


_cpp = "torch::Tensor relu2(torch::Tensor x);"
_cu = r"""
#include <torch/extension.h>
__global__ void relu2_k(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  long stride = (long)gridDim.x * blockDim.x;
  for (; i < n4; i += stride) { float4 v = x[i];
    v.x = fmaxf(v.x, 0.f) * 2.f; v.y = fmaxf(v.y, 0.f) * 2.f; v.z = fmaxf(v.z, 0.f) * 2.f; v.w = fmaxf(v.w, 0.f) * 2.f; y[i] = v; }
}
torch::Tensor relu2(torch::Tensor x) {
  auto y = torch::empty_like(x); long n4 = x.numel() / 4;
  relu2_k<<<132 * 8, 512>>>((const float4*)x.data_ptr<float>(), (float4*)y.data_ptr<float>(), n4);
  return y;
}
"""
_ext = None


class ModelNew(nn.Module):
    def forward(self, x):
        global _ext
        if _ext is None:
            _ext = load_inline(
                name="relu2_probe", cpp_sources=_cpp, cuda_sources=_cu, functions=["relu2"], extra_cuda_cflags=["-O3"]
            )
        return _ext.relu2(x)
