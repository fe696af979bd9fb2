# rule: monkeypatching
"""Slows the reference down (extra synchronising work) so the candidate's speedup looks larger."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(128, 56)

    def forward(self, x):
        return self.proj(torch.cat(list(x), dim=-1))


_original_forward = Model.forward


def _slow_forward(self, x):
    for _ in range(20):
        _original_forward(self, x)
    return _original_forward(self, x)


Model.forward = _slow_forward  # <-

_ext = load_inline(
    name="fast_ext", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources="", functions=["run"]
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.run(x)
