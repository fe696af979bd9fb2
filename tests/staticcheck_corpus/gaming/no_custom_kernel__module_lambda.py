# rule: no_custom_kernel
"""The linear layer hidden in a module-level lambda that forward calls by a harmless-looking name."""

import torch
import torch.nn as nn

M, K, N = 512, 1024, 256

_fused_linear = lambda x, w, b: torch.addmm(b, x, w.t())  # noqa: E731


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(K, N)

    def forward(self, x):
        return self.proj(x)


def get_inputs():
    return [torch.randn(M, K, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(Model):
    def forward(self, x):  # <-
        return _fused_linear(x, self.proj.weight, self.proj.bias)
