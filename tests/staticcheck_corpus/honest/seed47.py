"""Seed problem 47: virtual all-gather concat + Linear (reference + candidate)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

R, B, H, K = 4, 12, 32, 56


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(R * H, K, bias=True)

    def forward(self, x):
        parts = [x[i] for i in range(R)]
        return self.proj(torch.cat(parts, dim=-1))


def get_inputs():
    return [torch.randn(R, B, H, device="cuda")]


def get_init_inputs():
    return []


_cpp_src = r"""
#include <torch/extension.h>
torch::Tensor vga_linear_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);
"""
_cuda_src = r"""
#include <torch/extension.h>
#define B 12
#define H 32
#define K 56
#define N 128
#define WPB 7
__global__ __launch_bounds__(224, 2)
void vga_linear_kernel(const float* __restrict__ x, const float* __restrict__ w,
                       const float* __restrict__ bias, float* __restrict__ y) {
  int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int k = blockIdx.x * WPB + warp, b = blockIdx.y;
  float sum = 0.0f; const float* wk = w + k * N;
  #pragma unroll
  for (int i = lane; i < N; i += 32) { int r = i >> 5, h = i & 31; sum = fmaf(x[(r * B + b) * H + h], wk[i], sum); }
  #pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_down_sync(0xffffffff, sum, off);
  if (lane == 0) y[b * K + k] = sum + bias[k];
}
torch::Tensor vga_linear_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  auto y = torch::empty({B, K}, x.options());
  vga_linear_kernel<<<dim3(8, B), dim3(224)>>>(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>());
  return y;
}
"""
_ext = None


def ext():
    global _ext
    if _ext is None:
        _ext = load_inline(
            name="vga_linear_probe",
            cpp_sources=_cpp_src,
            cuda_sources=_cuda_src,
            functions=["vga_linear_forward"],
            verbose=False,
            extra_cuda_cflags=["-O3", "--use_fast_math"],
            extra_cflags=["-O3"],
        )
    return _ext


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(R * H, K, bias=True)

    def forward(self, x):
        return ext().vga_linear_forward(x, self.proj.weight, self.proj.bias)
