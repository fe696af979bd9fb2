# rule: cuda_vendor_library
# lint: warn
"""Calls cuBLAS's SGEMM from the extension instead of writing a kernel."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

torch::Tensor gemm(torch::Tensor a, torch::Tensor b) {
  auto c = torch::empty({a.size(0), b.size(1)}, a.options());
  float alpha = 1.0f, beta = 0.0f;
  cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();  // <-
  cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, b.size(1), a.size(0), a.size(1), &alpha,  // <-
              b.data_ptr<float>(), b.size(1), a.data_ptr<float>(), a.size(1), &beta, c.data_ptr<float>(), b.size(1));
  return c;
}
"""
_ext = load_inline(
    name="cublas_ext",
    cpp_sources="torch::Tensor gemm(torch::Tensor a, torch::Tensor b);",
    cuda_sources=_cuda_src,
    functions=["gemm"],
    extra_ldflags=["-lcublas"],
)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return _ext.gemm(a, b)
