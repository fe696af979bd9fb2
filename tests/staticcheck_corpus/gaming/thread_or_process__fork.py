# rule: thread_or_process
"""Forks a worker process at import time to pre-compute outputs."""

import os

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    name="fork_ext", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources="", functions=["run"]
)
_child = os.fork()  # <-


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.run(x)
