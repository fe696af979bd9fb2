"""Mean squared error of two 32768 x 32768 float32 tensors (4.3 GB each), the size KernelBench's published
level-1 losses use, with a candidate of its own reduction kernel written the way generated candidates are."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean((predictions - targets) ** 2)


batch_size = 32768
dim = 32768


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


mse_source = r"""
#include <torch/extension.h>

__global__ void squared_error_sum(const float* __restrict__ a, const float* __restrict__ b, double* out,
                                  long long n) {
    __shared__ double partial[256];
    double sum = 0.0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float d = a[i] - b[i];
        sum += (double)d * d;
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

torch::Tensor mse_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && a.is_contiguous() && b.is_contiguous(), "contiguous CUDA inputs");
    auto total = torch::zeros({}, a.options().dtype(torch::kFloat64));
    squared_error_sum<<<132 * 8, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), total.data_ptr<double>(),
                                        a.numel());
    return (total / (double)a.numel()).to(torch::kFloat32);
}
"""

mse = load_inline(
    name="full_size_mse",
    cpp_sources="torch::Tensor mse_forward(torch::Tensor a, torch::Tensor b);",
    cuda_sources=mse_source,
    functions=["mse_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return mse.mse_forward(predictions, targets)
