import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(128, 65536, device="cuda")]


def get_init_inputs():
    return []


SWISH_HEADER = r"""
#pragma once
__device__ __forceinline__ float swish_f(float v) {
    return v / (1.0f + __expf(-v));
}
"""

SWISH_CU = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include "swish_common.cuh"

__global__ void swish_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = swish_f(x[i]);
}

torch::Tensor swish_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    const int threads = 256;
    swish_kernel<<<(unsigned)((n + threads - 1) / threads), threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

SWISH_CPP = r"""
#include <torch/extension.h>

torch::Tensor swish_cuda(torch::Tensor x);

torch::Tensor swish_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    return swish_cuda(x.contiguous());
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("forward", &swish_forward, "swish forward (CUDA)");
}
"""

_src_dir = tempfile.mkdtemp(prefix="swish_src_")
for _name, _text in (("swish_common.cuh", SWISH_HEADER), ("swish_kernel.cu", SWISH_CU), ("swish.cpp", SWISH_CPP)):
    with open(os.path.join(_src_dir, _name), "w") as _f:
        _f.write(_text)

swish_ext = load(
    name="swish_ext",
    sources=[os.path.join(_src_dir, "swish.cpp"), os.path.join(_src_dir, "swish_kernel.cu")],
    extra_cuda_cflags=["-O3"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return swish_ext.forward(x)
