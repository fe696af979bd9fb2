import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a * b


def get_inputs():
    return [torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")]


def get_init_inputs():
    return []


mul_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

static int g_num_sms = 0;

__global__ void mul_grid_stride_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                       float* __restrict__ c, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        c[i] = a[i] * b[i];
    }
}

torch::Tensor mul_cuda(torch::Tensor a, torch::Tensor b) {
    if (g_num_sms == 0) {
        int device = 0;
        cudaGetDevice(&device);
        cudaDeviceGetAttribute(&g_num_sms, cudaDevAttrMultiProcessorCount, device);
    }
    auto c = torch::empty_like(a);
    size_t n = a.numel();
    mul_grid_stride_kernel<<<g_num_sms * 8, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), n);
    return c;
}
"""

mul_ext = load_inline(
    name="mul_sm_count",
    cpp_sources="torch::Tensor mul_cuda(torch::Tensor a, torch::Tensor b);",
    cuda_sources=mul_source,
    functions=["mul_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return mul_ext.mul_cuda(a.contiguous(), b.contiguous())
