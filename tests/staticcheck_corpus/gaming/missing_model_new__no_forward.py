# rule: missing_model_new
"""ModelNew exists but defines no forward, so nn.Module's raises NotImplementedError."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    name="noforward_ext", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources="", functions=["run"]
)


class ModelNew(nn.Module):  # <-
    def run(self, x):
        return _ext.run(x)
