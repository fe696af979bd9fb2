# rule: warmup_divergence
"""The first call (the harness's correctness check) computes; later calls return an uninitialised buffer."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    name="flag_ext", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources="", functions=["run"]
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._checked = False

    def forward(self, x):
        if not self._checked:  # <-
            self._checked = True
            return _ext.run(x)
        return torch.empty(x.shape[1], 56, device=x.device)
