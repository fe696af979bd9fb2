import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size = 4096
dim = 2048


def get_inputs():
    return [torch.randn(batch_size, dim, device="cuda")]


def get_init_inputs():
    return []


softmax_cpp = "torch::Tensor softmax_rows(torch::Tensor x);"

softmax_cuda = r"""
#include <torch/extension.h>
#include <cfloat>

__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    extern __shared__ float sdata[];
    const float* row = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    int tid = threadIdx.x;

    float local_max = -FLT_MAX;
    for (int c = tid; c < cols; c += blockDim.x) local_max = fmaxf(local_max, row[c]);
    sdata[tid] = local_max;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] = fmaxf(sdata[tid], sdata[tid + s]);
        __syncthreads();
    }
    float row_max = sdata[0];
    __syncthreads();

    float local_sum = 0.0f;
    for (int c = tid; c < cols; c += blockDim.x) local_sum += expf(row[c] - row_max);
    sdata[tid] = local_sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    float inv_sum = 1.0f / sdata[0];

    for (int c = tid; c < cols; c += blockDim.x) out[c] = expf(row[c] - row_max) * inv_sum;
}

torch::Tensor softmax_rows(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int rows = xc.size(0), cols = xc.size(1);
    const int threads = 256;
    softmax_rows_kernel<<<rows, threads, threads * sizeof(float)>>>(xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y;
}
"""

_softmax_ext = None


def _softmax():
    global _softmax_ext
    if _softmax_ext is None:
        _softmax_ext = load_inline(
            name="softmax_rows_lazy",
            cpp_sources=softmax_cpp,
            cuda_sources=softmax_cuda,
            functions=["softmax_rows"],
            extra_cuda_cflags=["-O3"],
            verbose=False,
        )
    return _softmax_ext


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _softmax().softmax_rows(x)
