"""A problem for the precision modes: its model has a weight and a buffer, and its candidate's own kernel takes
any floating-point dtype (float32, float16, bfloat16) but refuses operands of different dtypes.

    profsvc check examples/scale_gain.py --precision fp16
    profsvc evaluate examples/scale_gain.py --precision bf16 --clock-control base
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

N = 1 << 16


class Model(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.randn(n))
        self.register_buffer("gain", torch.rand(n) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale * self.gain


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(N, device="cuda")]


def get_init_inputs() -> list[int]:
    return [N]


_cpp = "torch::Tensor scale_gain(torch::Tensor x, torch::Tensor scale, torch::Tensor gain);"
_cuda = r"""
#include <torch/extension.h>

// Rounded to scalar_t after each product, as PyTorch's two elementwise kernels round.
template <typename scalar_t>
__global__ void scale_gain_kernel(const scalar_t* x, const scalar_t* s, const scalar_t* g, scalar_t* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) {
    scalar_t p = static_cast<scalar_t>(static_cast<float>(x[i]) * static_cast<float>(s[i]));
    y[i] = static_cast<scalar_t>(static_cast<float>(p) * static_cast<float>(g[i]));
  }
}

torch::Tensor scale_gain(torch::Tensor x, torch::Tensor scale, torch::Tensor gain) {
  TORCH_CHECK(x.scalar_type() == scale.scalar_type() && x.scalar_type() == gain.scalar_type(),
              "input, weight and buffer dtypes differ");
  auto y = torch::empty_like(x);
  long n = x.numel();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(), "scale_gain", [&] {
    scale_gain_kernel<scalar_t><<<(n + 255) / 256, 256>>>(
        x.data_ptr<scalar_t>(), scale.data_ptr<scalar_t>(), gain.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
  });
  return y;
}
"""
_ext = load_inline(name="scale_gain_precision", cpp_sources=_cpp, cuda_sources=_cuda, functions=["scale_gain"])


class ModelNew(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.randn(n))
        self.register_buffer("gain", torch.rand(n) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.scale_gain(x, self.scale, self.gain)
