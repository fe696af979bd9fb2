import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x):
        return F.gelu(x + self.bias)


features = 3072


def get_inputs():
    return [torch.randn(4096, features, device="cuda")]


def get_init_inputs():
    return [features]


ACTIVATIONS_H = r"""
#pragma once
#include <math.h>

__device__ __forceinline__ float gelu_erf(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}
"""

include_dir = os.path.join(tempfile.gettempdir(), "fused_bias_gelu_include")
os.makedirs(include_dir, exist_ok=True)
with open(os.path.join(include_dir, "activations.cuh"), "w") as f:
    f.write(ACTIVATIONS_H)

bias_gelu_source = r"""
#include <torch/extension.h>
#include "activations.cuh"

__global__ void bias_gelu_kernel(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,
                                 int n, int features) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = gelu_erf(x[i] + bias[i % features]);
    }
}

torch::Tensor bias_gelu(torch::Tensor x, torch::Tensor bias) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    bias_gelu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), n,
                                               bias.numel());
    return y;
}
"""

bias_gelu_ext = load_inline(
    name="bias_gelu_include",
    cpp_sources="torch::Tensor bias_gelu(torch::Tensor x, torch::Tensor bias);",
    cuda_sources=bias_gelu_source,
    functions=["bias_gelu"],
    extra_include_paths=[include_dir],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x):
        return bias_gelu_ext.bias_gelu(x.contiguous(), self.bias)
