import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(8192, 256, device="cuda")]


def get_init_inputs():
    return [1]


cumsum_source = r"""
#include <torch/extension.h>

template <typename scalar_t>
__global__ void row_cumsum_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const scalar_t* xr = x + (size_t)row * cols;
    scalar_t* yr = y + (size_t)row * cols;
    scalar_t acc = 0;
    for (int c = 0; c < cols; ++c) {
        acc += xr[c];
        yr[c] = acc;
    }
}

torch::Tensor row_cumsum(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int rows = xc.size(0), cols = xc.size(1);
    const int threads = 128;
    const int blocks = (rows + threads - 1) / threads;
    AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "row_cumsum", ([&] {
        row_cumsum_kernel<scalar_t><<<blocks, threads>>>(xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), rows, cols);
    }));
    return y;
}
"""

cumsum_ext = load_inline(
    name="row_cumsum_dispatch",
    cpp_sources="torch::Tensor row_cumsum(torch::Tensor x);",
    cuda_sources=cumsum_source,
    functions=["row_cumsum"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return cumsum_ext.row_cumsum(x)
