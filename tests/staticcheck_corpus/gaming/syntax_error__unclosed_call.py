# rule: syntax_error
"""A candidate cut off mid-statement (the model ran out of tokens)."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="cut_ext", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources="", functions=["run"]


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.run(x)
