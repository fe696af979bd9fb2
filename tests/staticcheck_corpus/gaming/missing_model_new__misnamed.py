# rule: missing_model_new
"""The class is misspelt, so the harness finds no ModelNew."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    name="misnamed_ext", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources="", functions=["run"]
)


class ModelNEW(nn.Module):
    def forward(self, x):
        return _ext.run(x)
