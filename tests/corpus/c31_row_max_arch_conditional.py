import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.amax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(4096, 4096, device="cuda")]


def get_init_inputs():
    return [1]


row_max_source = r"""
#include <torch/extension.h>
#include <cfloat>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ __forceinline__ float warp_max(float v) {
    // sm_80+: redux.sync works on integers; floats go through the shuffle tree as below.
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, offset));
    return v;
}
#else
__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffff, v, offset));
    return __shfl_sync(0xffffffff, v, 0);
}
#endif

__global__ void row_max_kernel(const float* __restrict__ x, float* __restrict__ out, int cols) {
    __shared__ float warp_best[32];
    const float* row = x + (size_t)blockIdx.x * cols;
    float best = -FLT_MAX;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) best = fmaxf(best, row[c]);
    best = warp_max(best);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_best[warp] = best;
    __syncthreads();
    if (warp == 0) {
        best = lane < (blockDim.x >> 5) ? warp_best[lane] : -FLT_MAX;
        best = warp_max(best);
        if (lane == 0) out[blockIdx.x] = best;
    }
}

torch::Tensor row_max(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty({xc.size(0)}, xc.options());
    row_max_kernel<<<xc.size(0), 256>>>(xc.data_ptr<float>(), out.data_ptr<float>(), xc.size(1));
    return out;
}
"""

row_max_ext = load_inline(
    name="row_max_arch",
    cpp_sources="torch::Tensor row_max(torch::Tensor x);",
    cuda_sources=row_max_source,
    functions=["row_max"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return row_max_ext.row_max(x)
