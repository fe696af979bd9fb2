# rule: torch_fallback
# lint: warn
"""The kernel does half the job; a tensor method finishes it in PyTorch."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_src = r"""
#include <torch/extension.h>
__global__ void exp_kernel(const float* x, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = __expf(x[i]); }
torch::Tensor exp_rows(torch::Tensor x) {
  auto y = torch::empty_like(x);
  exp_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
"""
_ext = load_inline(
    name="exp_ext",
    cpp_sources="torch::Tensor exp_rows(torch::Tensor x);",
    cuda_sources=_cuda_src,
    functions=["exp_rows"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        e = _ext.exp_rows(x - x.amax(dim=-1, keepdim=True))  # <-
        return e / e.sum(dim=-1, keepdim=True)  # <-
