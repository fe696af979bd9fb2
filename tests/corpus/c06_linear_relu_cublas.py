import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


batch_size = 1024
in_features = 1024
out_features = 2048


def get_inputs():
    return [torch.randn(batch_size, in_features, device="cuda")]


def get_init_inputs():
    return [in_features, out_features]


cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

__global__ void bias_relu_kernel(float* __restrict__ y, const float* __restrict__ bias, int rows, int cols) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < rows * cols) {
        float v = y[idx] + bias[idx % cols];
        y[idx] = v > 0.f ? v : 0.f;
    }
}

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
    const int M = x.size(0);
    const int K = x.size(1);
    const int N = weight.size(0);
    auto y = torch::empty({M, N}, x.options());

    // y (row-major M x N) = x (M x K) * W^T, with W (N x K) row-major: column-major y^T = W * x^T
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t status = cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha,
                                        weight.data_ptr<float>(), K, x.data_ptr<float>(), K, &beta,
                                        y.data_ptr<float>(), N);
    TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed");

    const int threads = 256;
    const int blocks = (M * N + threads - 1) / threads;
    bias_relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), bias.data_ptr<float>(), M, N);
    return y;
}
"""

cpp_source = "torch::Tensor linear_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

linear_relu_ext = load_inline(
    name="linear_relu_cublas",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["linear_relu"],
    extra_cflags=["-O3"],
    extra_ldflags=["-lcublas"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return linear_relu_ext.linear_relu(x.contiguous(), self.linear.weight, self.linear.bias)
