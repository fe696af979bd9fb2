# rule: warmup_divergence
"""Does the real work for the correctness trials, then skips it once the timing loop starts."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    name="count_ext", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources="", functions=["run"]
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 5:  # <-
            return torch.empty(x.shape[1], 56, device=x.device)
        return _ext.run(x)
