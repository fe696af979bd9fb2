import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.flip(x, dims=[1])


def get_inputs():
    return [torch.randn(1024, 16384, device="cuda")]


def get_init_inputs():
    return []


flip_source = r"""
#include <torch/extension.h>

// One block per row: the whole row (64 KB for 16384 floats) is staged in dynamic shared memory.
__global__ void flip_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    extern __shared__ float row[];
    const float* src = x + (size_t)blockIdx.x * cols;
    float* dst = y + (size_t)blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) row[c] = src[c];
    __syncthreads();
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = row[cols - 1 - c];
}

torch::Tensor flip_rows(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int rows = xc.size(0), cols = xc.size(1);
    size_t smem = cols * sizeof(float);
    cudaError_t err = cudaFuncSetAttribute(flip_rows_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    TORCH_CHECK(err == cudaSuccess, "cudaFuncSetAttribute: ", cudaGetErrorString(err));
    flip_rows_kernel<<<rows, 1024, smem>>>(xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y;
}
"""

flip_ext = load_inline(
    name="flip_rows_smem",
    cpp_sources="torch::Tensor flip_rows(torch::Tensor x);",
    cuda_sources=flip_source,
    functions=["flip_rows"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return flip_ext.flip_rows(x)
