# rule: torch_fallback
# lint: warn
"""Hides the PyTorch call in a module-level helper that forward calls."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_src = r"""
#include <torch/extension.h>
__global__ void gather_kernel(const float* x, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }
torch::Tensor gather(torch::Tensor x) {
  auto y = torch::empty_like(x);
  gather_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
"""
_ext = load_inline(
    name="copy_ext", cpp_sources="torch::Tensor gather(torch::Tensor x);", cuda_sources=_cuda_src, functions=["gather"]
)


def _project(g, weight, bias):
    return torch.addmm(bias, g, weight.t())  # <-


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(128, 56)

    def forward(self, x):
        g = _ext.gather(x).permute(1, 0, 2).reshape(x.shape[1], -1)
        return _project(g, self.proj.weight, self.proj.bias)
