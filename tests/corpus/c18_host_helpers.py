import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    """Per-feature affine transform: y = x * weight + bias."""

    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return x * self.weight + self.bias


features = 1000


def get_inputs():
    return [torch.randn(8192, features, device="cuda")]


def get_init_inputs():
    return [features]


affine_source = r"""
#include <torch/extension.h>
#include <algorithm>

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;

__host__ __device__ inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

static int num_blocks(int n) {
    return std::min(ceil_div(n, kThreads), kMaxBlocks);
}

inline void check_input(const torch::Tensor& t, const char* name) {
    TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor");
    TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
}

__global__ void affine_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                              float* __restrict__ y, int n, int features) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int f = i % features;
        y[i] = x[i] * w[f] + b[f];
    }
}

torch::Tensor affine_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    check_input(x, "x");
    check_input(w, "weight");
    check_input(b, "bias");
    auto y = torch::empty_like(x);
    int n = x.numel();
    int features = w.numel();
    affine_kernel<<<num_blocks(n), kThreads>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
                                               y.data_ptr<float>(), n, features);
    return y;
}
"""

affine = load_inline(
    name="affine_helpers",
    cpp_sources="torch::Tensor affine_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
    cuda_sources=affine_source,
    functions=["affine_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return affine.affine_forward(x.contiguous(), self.weight, self.bias)
