# rule: torch_fallback
# lint: warn
"""Gathers with a custom kernel, then lets nn.Linear do the matrix product."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

R, B, H, K = 4, 12, 32, 56

_cuda_src = r"""
#include <torch/extension.h>
__global__ void gather_kernel(const float* x, float* y, int b, int h, int r) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= r * b * h) return;
  int hh = i % h, bb = (i / h) % b, rr = i / (h * b);
  y[bb * r * h + rr * h + hh] = x[i];
}
torch::Tensor gather(torch::Tensor x) {
  auto y = torch::empty({x.size(1), x.size(0) * x.size(2)}, x.options());
  int n = x.numel();
  gather_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.size(1), x.size(2), x.size(0));
  return y;
}
"""
_ext = load_inline(
    name="gather_ext",
    cpp_sources="torch::Tensor gather(torch::Tensor x);",
    cuda_sources=_cuda_src,
    functions=["gather"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(R * H, K, bias=True)

    def forward(self, x):
        gathered = _ext.gather(x.contiguous())
        return self.proj(gathered)  # <-
