"""y = x @ W.T + b (nn.Linear 4096 -> 4096, batch 128) with the weight transposed once for coalesced reads.

Keeping a weights-derived constant across calls is fine: it does not depend on the inputs.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

BATCH, IN_FEATURES, OUT_FEATURES = 128, 4096, 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(IN_FEATURES, OUT_FEATURES)

    def forward(self, x):
        return self.proj(x)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES, device="cuda")]


def get_init_inputs():
    return []


_cpp_src = "torch::Tensor linear_t(torch::Tensor x, torch::Tensor wt, torch::Tensor bias);"

_cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// One thread per output column of one row: a warp reads 32 consecutive columns of wt.
__global__ void linear_t_kernel(const float* __restrict__ x, const float* __restrict__ wt,
                                const float* __restrict__ bias, float* __restrict__ y,
                                int in_features, int out_features) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int b = blockIdx.y;
  if (j >= out_features) return;
  const float* xr = x + (size_t)b * in_features;
  float acc = bias[j];
  for (int k = 0; k < in_features; ++k) acc = fmaf(xr[k], wt[(size_t)k * out_features + j], acc);
  y[(size_t)b * out_features + j] = acc;
}

torch::Tensor linear_t(torch::Tensor x, torch::Tensor wt, torch::Tensor bias) {
  TORCH_CHECK(x.is_contiguous() && wt.is_contiguous(), "contiguous inputs expected");
  int batch = x.size(0), in_features = x.size(1), out_features = wt.size(1);
  auto y = torch::empty({batch, out_features}, x.options());
  dim3 grid((out_features + 255) / 256, batch);
  linear_t_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), wt.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
      in_features, out_features);
  return y;
}
"""

_ext = load_inline(
    name="linear_pretransposed_ext",
    cpp_sources=_cpp_src,
    cuda_sources=_cuda_src,
    functions=["linear_t"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(IN_FEATURES, OUT_FEATURES)
        self._wt = None

    def forward(self, x):
        if self._wt is None:
            self._wt = self.proj.weight.detach().t().contiguous()
        return _ext.linear_t(x.contiguous(), self._wt, self.proj.bias.detach())
