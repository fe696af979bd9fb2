# rule: torch_fallback
"""Calls the ATen operator directly through torch.ops.aten, which looks like a custom op."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(56, 128))
        self.bias = nn.Parameter(torch.randn(56))

    def forward(self, x):
        g = x.permute(1, 0, 2).reshape(x.shape[1], -1)
        return torch.ops.aten.addmm.default(self.bias, g, self.weight.t())  # <-
