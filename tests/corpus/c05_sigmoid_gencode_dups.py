import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sigmoid(x)


batch_size = 64
dim = 65536


def get_inputs():
    return [torch.randn(batch_size, dim, device="cuda")]


def get_init_inputs():
    return []


sigmoid_src = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void sigmoid_kernel(const float* in, float* out, int64_t n) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        out[idx] = 1.0f / (1.0f + __expf(-in[idx]));
    }
}

torch::Tensor sigmoid_cuda(torch::Tensor input) {
    auto output = torch::empty_like(input);
    int64_t n = input.numel();
    const int threads = 1024;
    const int64_t blocks = (n + threads - 1) / threads;
    sigmoid_kernel<<<blocks, threads>>>(input.data_ptr<float>(), output.data_ptr<float>(), n);
    return output;
}
"""

sigmoid_cpp = "torch::Tensor sigmoid_cuda(torch::Tensor input);"

sigmoid_module = load_inline(
    name="sigmoid_gencode",
    cpp_sources=sigmoid_cpp,
    cuda_sources=sigmoid_src,
    functions=["sigmoid_cuda"],
    verbose=False,
    extra_cflags=["-O3", "-O3", ""],
    extra_cuda_cflags=[
        "-O3",
        " --use_fast_math ",
        "-gencode=arch=compute_90,code=sm_90",
        "-O3",
        "--use_fast_math",
    ],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.sigmoid = sigmoid_module

    def forward(self, x):
        return self.sigmoid.sigmoid_cuda(x)
