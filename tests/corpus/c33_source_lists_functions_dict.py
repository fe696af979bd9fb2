import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    """Squared ReLU followed by a scale: (relu(x) ** 2) * scale."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) ** 2 * self.scale


def get_inputs():
    return [torch.randn(256, 16384, device="cuda")]


def get_init_inputs():
    return [0.5]


kernels_part = """
#include <torch/extension.h>

__global__ void squared_relu_kernel(const float* x, float* y, float scale, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i] > 0.0f ? x[i] : 0.0f;
        y[i] = v * v * scale;
    }
}
"""

host_part = """
torch::Tensor squared_relu(torch::Tensor x, double scale) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    squared_relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)scale, n);
    return y;
}
"""

ext = load_inline(
    name="squared_relu_lists",
    cpp_sources=["#include <torch/extension.h>", "torch::Tensor squared_relu(torch::Tensor x, double scale);"],
    cuda_sources=[kernels_part, host_part],
    functions={"squared_relu": "relu(x)^2 * scale on the GPU"},
    extra_cuda_cflags=["-O2", "-lineinfo"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return ext.squared_relu(x.contiguous(), self.scale)
