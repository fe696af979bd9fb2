import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale + 1.0


def get_inputs():
    return [torch.randn(8192, 2048, device="cuda")]


def get_init_inputs():
    return [0.5]


source = """
#include <torch/extension.h>

__global__ void scale_shift_kernel(const float4* __restrict__ x, float4* __restrict__ y, float s, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i];
        v.x = v.x * s + 1.0f;
        v.y = v.y * s + 1.0f;
        v.z = v.z * s + 1.0f;
        v.w = v.w * s + 1.0f;
        y[i] = v;
    }
}

__global__ void scale_shift_tail(const float* __restrict__ x, float* __restrict__ y, float s, int start, int n) {
    int i = start + blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * s + 1.0f;
}

torch::Tensor scale_shift(torch::Tensor x, double s) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    int n4 = n / 4;
    if (n4 > 0) {
        scale_shift_kernel<<<(n4 + 255) / 256, 256>>>(
            reinterpret_cast<const float4*>(x.data_ptr<float>()), reinterpret_cast<float4*>(y.data_ptr<float>()),
            (float)s, n4);
    }
    int rest = n - n4 * 4;
    if (rest > 0) {
        scale_shift_tail<<<1, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)s, n4 * 4, n);
    }
    return y;
}
"""

cpp_source = "torch::Tensor scale_shift(torch::Tensor x, double s);"

scale_shift = load_inline(
    name="scale_shift_sm90",
    cpp_sources=cpp_source,
    cuda_sources=source,
    functions=["scale_shift"],
    extra_cuda_cflags=["-O3", "-arch=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.op = scale_shift

    def forward(self, x):
        return self.op.scale_shift(x.contiguous(), self.scale)
