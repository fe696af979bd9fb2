"""y = gelu(x * scale + bias) over an (8192, 8192) fp32 tensor, fused into one vectorised elementwise kernel."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

# Build for the H200 only: a module-level environment write, not a probe.
os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")

ROWS, CHANNELS = 8192, 8192
SCALE = 0.5


class Model(nn.Module):
    def __init__(self, channels=CHANNELS):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels))
        self.scale = SCALE

    def forward(self, x):
        return F.gelu(x * self.scale + self.bias)


def get_inputs():
    return [torch.randn(ROWS, CHANNELS, device="cuda")]


def get_init_inputs():
    return []


_cpp_src = "void bias_gelu(torch::Tensor x, torch::Tensor bias, torch::Tensor out, double scale);"

_cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <algorithm>

__global__ void bias_gelu_kernel(const float4* __restrict__ x, const float4* __restrict__ bias,
                                 float4* __restrict__ y, float scale, long n4, int channels4) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  long stride = (long)gridDim.x * blockDim.x;
  for (; i < n4; i += stride) {
    float4 v = x[i];
    float4 b = bias[i % channels4];
    float r[4] = {v.x * scale + b.x, v.y * scale + b.y, v.z * scale + b.z, v.w * scale + b.w};
    #pragma unroll
    for (int j = 0; j < 4; ++j) r[j] = 0.5f * r[j] * (1.0f + erff(r[j] * 0.70710678118654752f));
    y[i] = make_float4(r[0], r[1], r[2], r[3]);
  }
}

void bias_gelu(torch::Tensor x, torch::Tensor bias, torch::Tensor out, double scale) {
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && bias.is_contiguous(), "contiguous tensors expected");
  TORCH_CHECK(x.size(-1) % 4 == 0 && bias.numel() == x.size(-1), "last dim must match bias and be a multiple of 4");
  long n4 = x.numel() / 4;
  int channels4 = bias.numel() / 4;
  int blocks = (int)std::min<long>((n4 + 255) / 256, 132L * 16);
  bias_gelu_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const float4*>(x.data_ptr<float>()), reinterpret_cast<const float4*>(bias.data_ptr<float>()),
      reinterpret_cast<float4*>(out.data_ptr<float>()), static_cast<float>(scale), n4, channels4);
}
"""


class ModelNew(nn.Module):
    def __init__(self, channels=CHANNELS):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels))
        self.scale = SCALE
        self.ext = load_inline(
            name="bias_gelu_ext",
            cpp_sources=_cpp_src,
            cuda_sources=_cuda_src,
            functions=["bias_gelu"],
            extra_cuda_cflags=["-O3"],
            verbose=False,
        )

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        self.ext.bias_gelu(x, self.bias.detach(), out, self.scale)
        return out


if __name__ == "__main__":
    model = ModelNew().cuda()
    print(model(*get_inputs()).shape)
