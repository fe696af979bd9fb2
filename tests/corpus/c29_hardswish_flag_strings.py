import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.hardswish(x)


def get_inputs():
    return [torch.randn(16, 1 << 20, device="cuda") * 4]


def get_init_inputs():
    return []


hardswish_source = """
#include <torch/extension.h>

__global__ void hardswish_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        float r6 = fminf(fmaxf(v + 3.0f, 0.0f), 6.0f);
        y[i] = v * r6 / 6.0f;
    }
}

torch::Tensor hardswish_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    hardswish_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

hardswish_ext = load_inline(
    name="hardswish_flag_strings",
    cpp_sources="torch::Tensor hardswish_cuda(torch::Tensor x);",
    cuda_sources=hardswish_source,
    functions=["hardswish_cuda"],
    verbose=True,
    extra_cflags=["-O3 -Wall", " "],
    extra_cuda_cflags=["-O3 --use_fast_math", "-Xcompiler", "-march=native", "-Xcompiler", "-march=native"],
    extra_ldflags=["", "  "],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return hardswish_ext.hardswish_cuda(x.contiguous())
