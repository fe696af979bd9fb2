import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return self.ln(x)


rows = 8192
features = 1024


def get_inputs():
    return [torch.randn(rows, features, device="cuda")]


def get_init_inputs():
    return [features]


layernorm_source = r"""
#include <torch/extension.h>

#ifndef WARP_SIZE
#define WARP_SIZE 32
#endif

#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

__inline__ __device__ float warp_all_sum(float v) {
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2) {
        v += __shfl_xor_sync(0xffffffff, v, offset);
    }
    return v;
}

// One warp per row: mean, then variance around it, then the normalized and scaled row.
__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, float* __restrict__ y, int rows, int cols, float eps) {
    int row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    int lane = threadIdx.x % WARP_SIZE;
    if (row >= rows) return;
    const float* xr = x + (size_t)row * cols;
    float* yr = y + (size_t)row * cols;

    float sum = 0.0f;
    for (int c = lane; c < cols; c += WARP_SIZE) sum += xr[c];
    float mean = warp_all_sum(sum) / cols;

    float sq = 0.0f;
    for (int c = lane; c < cols; c += WARP_SIZE) {
        float d = xr[c] - mean;
        sq += d * d;
    }
    float rstd = rsqrtf(warp_all_sum(sq) / cols + eps);

    for (int c = lane; c < cols; c += WARP_SIZE) {
        yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
    }
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps) {
    CHECK_INPUT(x);
    CHECK_INPUT(gamma);
    CHECK_INPUT(beta);
    int cols = x.size(-1);
    int rows = x.numel() / cols;
    auto y = torch::empty_like(x);
    const int warps_per_block = 8;
    int blocks = (rows + warps_per_block - 1) / warps_per_block;
    layernorm_kernel<<<blocks, warps_per_block * WARP_SIZE>>>(x.data_ptr<float>(), gamma.data_ptr<float>(),
                                                            beta.data_ptr<float>(), y.data_ptr<float>(), rows, cols,
                                                            (float)eps);
    return y;
}
"""

layernorm_ext = load_inline(
    name="layernorm_warp",
    cpp_sources="torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps);",
    cuda_sources=layernorm_source,
    functions=["layernorm_forward"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return layernorm_ext.layernorm_forward(x.contiguous(), self.ln.weight, self.ln.bias, self.ln.eps)
