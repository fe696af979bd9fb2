# rule: torch_fallback
"""The custom kernel only gathers; the product is an @ in PyTorch."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_src = r"""
#include <torch/extension.h>
torch::Tensor gather(torch::Tensor x) { return x.permute({1, 0, 2}).reshape({x.size(1), -1}).contiguous(); }
"""
_ext = load_inline(
    name="gather_view_ext",
    cpp_sources="torch::Tensor gather(torch::Tensor x);",
    cuda_sources=_cuda_src,
    functions=["gather"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(56, 128))
        self.bias = nn.Parameter(torch.randn(56))

    def forward(self, x):
        g = _ext.gather(x)
        return g @ self.weight.t() + self.bias  # <-
