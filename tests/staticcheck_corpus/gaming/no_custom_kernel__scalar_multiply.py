# rule: no_custom_kernel
"""No kernel at all: y = 2x is one PyTorch operator, and nothing in the file claims otherwise."""

import torch
import torch.nn as nn

N = 1 << 20


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(N, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(nn.Module):
    def forward(self, x):  # <-
        return x * 2
