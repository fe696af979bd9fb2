# rule: precision_downcast
"""Runs the extension under bf16 autocast although the reference is fp32."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    name="amp_ext", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources="", functions=["run"]
)


class ModelNew(nn.Module):
    def forward(self, x):
        with torch.autocast("cuda", dtype=torch.bfloat16):  # <-
            return _ext.run(x)
