import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.randn(2048, 8192, device="cuda")]


def get_init_inputs():
    return [-1]


row_mean_source = r"""
#include <torch/extension.h>

template <typename T>
__device__ __forceinline__ T warp_reduce_sum(T val) {
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        val += __shfl_down_sync(0xffffffff, val, offset);
    }
    return val;
}

template <int BLOCK_SIZE>
__global__ void row_mean_kernel(const float* __restrict__ x, float* __restrict__ out, int cols) {
    __shared__ float warp_sums[BLOCK_SIZE / 32];
    const float* row = x + (size_t)blockIdx.x * cols;
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK_SIZE) {
        sum += row[c];
    }
    sum = warp_reduce_sum<float>(sum);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = sum;
    __syncthreads();
    if (warp == 0) {
        sum = lane < BLOCK_SIZE / 32 ? warp_sums[lane] : 0.0f;
        sum = warp_reduce_sum<float>(sum);
        if (lane == 0) out[blockIdx.x] = sum / cols;
    }
}

torch::Tensor row_mean(torch::Tensor x) {
    auto xc = x.contiguous();
    int rows = xc.size(0), cols = xc.size(1);
    auto out = torch::empty({rows}, xc.options());
    if (cols >= 4096) {
        row_mean_kernel<512><<<rows, 512>>>(xc.data_ptr<float>(), out.data_ptr<float>(), cols);
    } else {
        row_mean_kernel<128><<<rows, 128>>>(xc.data_ptr<float>(), out.data_ptr<float>(), cols);
    }
    return out;
}
"""

row_mean_ext = load_inline(
    name="row_mean_template",
    cpp_sources="torch::Tensor row_mean(torch::Tensor x);",
    cuda_sources=row_mean_source,
    functions=["row_mean"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return row_mean_ext.row_mean(x)
