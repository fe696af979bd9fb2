# rule: no_custom_kernel
"""The activation picked from a table of PyTorch functions: forward calls a subscript, never torch by name."""

import torch
import torch.nn as nn
import torch.nn.functional as F

N = 1 << 20

_ACTIVATIONS = {"gelu": F.gelu, "relu": torch.relu, "silu": F.silu}


class Model(nn.Module):
    def forward(self, x):
        return F.gelu(x)


def get_inputs():
    return [torch.randn(N, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.activation = "gelu"

    def forward(self, x):  # <-
        return _ACTIVATIONS[self.activation](x)
