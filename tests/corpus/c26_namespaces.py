import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.softplus(x)


def get_inputs():
    return [torch.randn(1024, 8192, device="cuda") * 10]


def get_init_inputs():
    return []


softplus_source = r"""
#include <torch/extension.h>

namespace softplus_config {
constexpr int kThreads = 256;
constexpr float kThreshold = 20.0f;
}  // namespace softplus_config

namespace {

__device__ __forceinline__ float softplus_f(float x) {
    return x > softplus_config::kThreshold ? x : log1pf(expf(x));
}

}  // namespace

__global__ void softplus_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = softplus_f(x[i]);
}

torch::Tensor softplus_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    int blocks = (n + softplus_config::kThreads - 1) / softplus_config::kThreads;
    softplus_kernel<<<blocks, softplus_config::kThreads>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

softplus_ext = load_inline(
    name="softplus_namespaces",
    cpp_sources="torch::Tensor softplus_forward(torch::Tensor x);",
    cuda_sources=softplus_source,
    functions=["softplus_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return softplus_ext.softplus_forward(x.contiguous())
