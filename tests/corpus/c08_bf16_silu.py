import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.silu(x)


def get_inputs():
    return [torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)]


def get_init_inputs():
    return []


silu_bf16_source = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>

__global__ void silu_bf16_kernel(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = __bfloat162float(x[i]);
        y[i] = __float2bfloat16(v / (1.0f + expf(-v)));
    }
}

torch::Tensor silu_bf16(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kBFloat16, "bfloat16 input expected");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int n = xc.numel();
    const int threads = 256;
    silu_bf16_kernel<<<(n + threads - 1) / threads, threads>>>(
        reinterpret_cast<const __nv_bfloat16*>(xc.data_ptr<at::BFloat16>()),
        reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>()), n);
    return y;
}
"""

silu_bf16 = load_inline(
    name="silu_bf16",
    cpp_sources="torch::Tensor silu_bf16(torch::Tensor x);",
    cuda_sources=silu_bf16_source,
    functions=["silu_bf16"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return silu_bf16.silu_bf16(x)
