import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return x * x + self.bias


batch = 2048
features = 4096


def get_inputs():
    return [torch.randn(batch, features, device="cuda")]


def get_init_inputs():
    return [features]


square_cuda = """
#include <torch/extension.h>

__global__ void square_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}

torch::Tensor square(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    square_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

bias_cuda = """
#include <torch/extension.h>

__global__ void add_bias_kernel(float* y, const float* bias, int rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) y[i] += bias[i % cols];
}

torch::Tensor add_bias_(torch::Tensor y, torch::Tensor bias) {
    int rows = y.size(0), cols = y.size(1);
    add_bias_kernel<<<(rows * cols + 255) / 256, 256>>>(y.data_ptr<float>(), bias.data_ptr<float>(), rows, cols);
    return y;
}
"""

square_ext = load_inline(
    name="square_ext",
    cpp_sources="torch::Tensor square(torch::Tensor x);",
    cuda_sources=square_cuda,
    functions=["square"],
    verbose=False,
)

bias_ext = load_inline(
    name="add_bias_ext",
    cpp_sources="torch::Tensor add_bias_(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=bias_cuda,
    functions=["add_bias_"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        y = square_ext.square(x.contiguous())
        return bias_ext.add_bias_(y, self.bias)
