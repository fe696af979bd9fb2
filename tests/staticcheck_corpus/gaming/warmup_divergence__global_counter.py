# rule: warmup_divergence
"""A module-level counter switches to a kernel launch over a tenth of the data after warm-up."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    name="gcount_ext",
    cpp_sources="torch::Tensor run(torch::Tensor x, int64_t rows);",
    cuda_sources="",
    functions=["run"],
)
_calls = 0


def _rows_to_compute(x):
    global _calls
    _calls = _calls + 1
    return x.shape[1] if _calls <= 3 else x.shape[1] // 10  # <-


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.run(x, _rows_to_compute(x))
