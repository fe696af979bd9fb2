"""ReLU over a 4096 x 393216 float32 tensor (6.4 GB), the size KernelBench's published level-1 activations use,
with a candidate of its own kernel written the way generated candidates are."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 4096
dim = 393216


def get_inputs():
    return [torch.rand(batch_size, dim) - 0.5]


def get_init_inputs():
    return []


relu_source = r"""
#include <torch/extension.h>

__global__ void relu_kernel(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n4; i += stride) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
        y[i] = v;
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.numel() % 4 == 0, "contiguous CUDA input, numel % 4 == 0");
    auto y = torch::empty_like(x);
    long long n4 = x.numel() / 4;
    relu_kernel<<<132 * 8, 256>>>(reinterpret_cast<const float4*>(x.data_ptr<float>()),
                                  reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    return y;
}
"""

relu = load_inline(
    name="full_size_relu",
    cpp_sources="torch::Tensor relu_forward(torch::Tensor x);",
    cuda_sources=relu_source,
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu.relu_forward(x)
