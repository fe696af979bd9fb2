import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=0)


def get_inputs():
    return [torch.randn(8192, 1024, device="cuda")]


def get_init_inputs():
    return []


colsum_source = r"""
#include <torch/extension.h>

#define COLS_PER_BLOCK 32
#define ROW_THREADS 8
#define ROWS_PER_BLOCK 256

// Each block sums a 256-row slab of 32 columns and adds its partial sums into out with atomicAdd.
__global__ void column_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
    __shared__ float partial[ROW_THREADS][COLS_PER_BLOCK];
    int col = blockIdx.x * COLS_PER_BLOCK + threadIdx.x;
    int row0 = blockIdx.y * ROWS_PER_BLOCK;
    float s = 0.0f;
    if (col < cols) {
        for (int r = row0 + threadIdx.y; r < min(row0 + ROWS_PER_BLOCK, rows); r += ROW_THREADS) {
            s += x[(size_t)r * cols + col];
        }
    }
    partial[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
        float total = 0.0f;
        for (int i = 0; i < ROW_THREADS; ++i) total += partial[i][threadIdx.x];
        atomicAdd(&out[col], total);
    }
}

torch::Tensor column_sum(torch::Tensor x) {
    auto xc = x.contiguous();
    int rows = xc.size(0), cols = xc.size(1);
    auto out = torch::zeros({cols}, xc.options());
    dim3 block(COLS_PER_BLOCK, ROW_THREADS);
    dim3 grid((cols + COLS_PER_BLOCK - 1) / COLS_PER_BLOCK, (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    column_sum_kernel<<<grid, block>>>(xc.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    return out;
}
"""

colsum_ext = load_inline(
    name="column_sum_atomic",
    cpp_sources="torch::Tensor column_sum(torch::Tensor x);",
    cuda_sources=colsum_source,
    functions=["column_sum"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return colsum_ext.column_sum(x)
