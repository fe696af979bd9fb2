"""setattr with built names registers the module's own parameters; getattr reads a dtype and a device query."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

B, D, LAYERS = 256, 1024, 3

_cuda_src = r"""
#include <torch/extension.h>

__global__ void linear_relu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                   const float* __restrict__ b, float* __restrict__ y, int rows, int d) {
  int row = blockIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows || col >= d) return;
  float acc = b[col];
  for (int k = 0; k < d; ++k) acc += x[row * d + k] * w[col * d + k];
  y[row * d + col] = fmaxf(acc, 0.0f);
}

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  const int rows = x.size(0), d = x.size(1);
  auto y = torch::empty_like(x);
  linear_relu_kernel<<<dim3((d + 255) / 256, rows), 256>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                                            b.data_ptr<float>(), y.data_ptr<float>(), rows, d);
  return y;
}
"""
_ext = load_inline(
    name="own_parameters_ext",
    cpp_sources="torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
    cuda_sources=_cuda_src,
    functions=["linear_relu"],
)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(D, D) for _ in range(LAYERS))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def get_inputs():
    return [torch.randn(B, D, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        for i in range(LAYERS):
            # Initialised as the reference's layers are, in the same order: the same weights under the same seed.
            layer = nn.Linear(D, D)
            setattr(self, f"weight_{i}", layer.weight)
            setattr(self, f"bias_{i}", layer.bias)

    def forward(self, x):
        dtype = getattr(torch, "float32")
        if not getattr(torch.cuda, "is_available")():
            raise RuntimeError("needs a GPU")
        x = x.to(dtype).contiguous()
        for i in range(LAYERS):
            x = _ext.linear_relu(x, getattr(self, f"weight_{i}"), getattr(self, f"bias_{i}"))
        return x
