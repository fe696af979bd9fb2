# rule: thread_or_process
"""Splits the batch over a thread pool; the work happens outside the timed call."""

from concurrent.futures import ThreadPoolExecutor  # <-

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    name="pool_ext", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources="", functions=["run"]
)
_pool = ThreadPoolExecutor(max_workers=4)


class ModelNew(nn.Module):
    def forward(self, x):
        parts = list(_pool.map(_ext.run, x.chunk(4)))
        return torch.cat(parts)
