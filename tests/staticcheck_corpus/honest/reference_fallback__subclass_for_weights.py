"""ModelNew subclasses the reference to reuse its __init__ (and so its parameters) and overrides forward with a kernel."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

B, D_IN, D_OUT = 256, 1024, 512

_cuda_src = r"""
#include <torch/extension.h>

__global__ void linear_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                              float* __restrict__ y, int rows, int d_in, int d_out) {
  int row = blockIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows || col >= d_out) return;
  float acc = b[col];
  for (int k = 0; k < d_in; ++k) acc += x[row * d_in + k] * w[col * d_in + k];
  y[row * d_out + col] = acc;
}

torch::Tensor linear(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  const int rows = x.size(0), d_in = x.size(1), d_out = w.size(0);
  auto y = torch::empty({rows, d_out}, x.options());
  linear_kernel<<<dim3((d_out + 255) / 256, rows), 256>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                                         b.data_ptr<float>(), y.data_ptr<float>(), rows, d_in, d_out);
  return y;
}
"""
_ext = load_inline(
    name="subclass_weights_ext",
    cpp_sources="torch::Tensor linear(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
    cuda_sources=_cuda_src,
    functions=["linear"],
)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(D_IN, D_OUT)

    def forward(self, x):
        return self.proj(x)


def get_inputs():
    return [torch.randn(B, D_IN, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(Model):
    def forward(self, x):
        return _ext.linear(x.contiguous(), self.proj.weight, self.proj.bias)
