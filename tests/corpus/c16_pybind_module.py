import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.hardtanh(x, min_val=-1.0, max_val=1.0)


def get_inputs():
    return [torch.randn(64, 1 << 16, device="cuda")]


def get_init_inputs():
    return []


hardtanh_source = r"""
#include <torch/extension.h>
#include <cuda.h>
#include <cuda_runtime.h>

__global__ void hardtanh_kernel(const float* __restrict__ input, float* __restrict__ output, int size,
                                float min_val, float max_val) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        float v = input[idx];
        output[idx] = v < min_val ? min_val : (v > max_val ? max_val : v);
    }
}

torch::Tensor hardtanh_forward(torch::Tensor input, float min_val, float max_val) {
    auto output = torch::empty_like(input);
    int size = input.numel();
    int threads = 256;
    int blocks = (size + threads - 1) / threads;
    hardtanh_kernel<<<blocks, threads>>>(input.data_ptr<float>(), output.data_ptr<float>(), size, min_val, max_val);
    return output;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("hardtanh_forward", &hardtanh_forward, "HardTanh forward (CUDA)");
}
"""

hardtanh_ext = load_inline(
    name="hardtanh_pybind",
    cpp_sources="",
    cuda_sources=hardtanh_source,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return hardtanh_ext.hardtanh_forward(x.contiguous(), -1.0, 1.0)
