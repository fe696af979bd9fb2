"""A static scratch buffer in the C++, grown when too small and rewritten by the kernel on every call."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

B, D = 4096, 1024

_cuda_src = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void partial_sums_kernel(const float* __restrict__ x, float* __restrict__ partial, int64_t cols) {
  extern __shared__ float buf[];
  const float* row = x + blockIdx.x * cols;
  float acc = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) acc += row[j];
  buf[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = buf[0];
}

__global__ void scale_kernel(const float* __restrict__ partial, float* __restrict__ out, int64_t rows, float inv) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < rows) out[i] = partial[i] * inv;
}

torch::Tensor row_mean(torch::Tensor x) {
  static float* workspace = nullptr;
  static int64_t workspace_rows = 0;
  const int64_t rows = x.size(0), cols = x.size(1);
  if (workspace_rows < rows) {
    if (workspace != nullptr) cudaFree(workspace);
    cudaMalloc(&workspace, rows * sizeof(float));
    workspace_rows = rows;
  }
  auto out = torch::empty({rows}, x.options());
  partial_sums_kernel<<<rows, 256, 256 * sizeof(float)>>>(x.data_ptr<float>(), workspace, cols);
  scale_kernel<<<(rows + 255) / 256, 256>>>(workspace, out.data_ptr<float>(), rows, 1.0f / cols);
  return out;
}
"""
_ext = load_inline(
    name="static_workspace_ext",
    cpp_sources="torch::Tensor row_mean(torch::Tensor x);",
    cuda_sources=_cuda_src,
    functions=["row_mean"],
)


class Model(nn.Module):
    def forward(self, x):
        return x.mean(dim=1)


def get_inputs():
    return [torch.randn(B, D, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.row_mean(x.contiguous())
