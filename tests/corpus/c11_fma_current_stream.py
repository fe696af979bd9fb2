import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b, c):
        return torch.addcmul(c, a, b)


size = 1 << 23


def get_inputs():
    return [torch.randn(size, device="cuda"), torch.randn(size, device="cuda"), torch.randn(size, device="cuda")]


def get_init_inputs():
    return []


fma_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void fma_kernel(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ c,
                           float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = c[i] + a[i] * b[i];
    }
}

torch::Tensor fma_cuda(torch::Tensor a, torch::Tensor b, torch::Tensor c) {
    auto out = torch::empty_like(a);
    int n = a.numel();
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    fma_kernel<<<blocks, threads, 0, stream>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(),
                                               out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

fma_ext = load_inline(
    name="fma_stream",
    cpp_sources="torch::Tensor fma_cuda(torch::Tensor a, torch::Tensor b, torch::Tensor c);",
    cuda_sources=fma_source,
    functions=["fma_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b, c):
        return fma_ext.fma_cuda(a, b, c)
