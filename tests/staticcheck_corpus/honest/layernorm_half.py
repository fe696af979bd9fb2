"""LayerNorm over the last dim of a (4096, 2048) fp16 tensor, statistics in fp32.

The reference itself is fp16, so the fp16 conversions below are the problem's
precision, not a downcast. The extension is built on the first call behind a
flag that never changes what forward returns.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ROWS, HIDDEN = 4096, 2048


class Model(nn.Module):
    def __init__(self, hidden=HIDDEN):
        super().__init__()
        self.ln = nn.LayerNorm(hidden, eps=1e-5).half()

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(ROWS, HIDDEN, device="cuda").half()]


def get_init_inputs():
    return []


_cpp_src = "torch::Tensor layernorm_fp16(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps);"

_cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>

__inline__ __device__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
  return v;
}

__global__ void layernorm_fp16_kernel(const __half* __restrict__ x, const __half* __restrict__ gamma,
                                      const __half* __restrict__ beta, __half* __restrict__ y, int cols, float eps) {
  __shared__ float partial[2][32];
  const __half* row = x + (size_t)blockIdx.x * cols;
  __half* out = y + (size_t)blockIdx.x * cols;
  float sum = 0.f, sq = 0.f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    float v = __half2float(row[i]);
    sum += v;
    sq += v * v;
  }
  sum = warp_sum(sum);
  sq = warp_sum(sq);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) { partial[0][warp] = sum; partial[1][warp] = sq; }
  __syncthreads();
  if (warp == 0) {
    int warps = blockDim.x >> 5;
    sum = warp_sum(lane < warps ? partial[0][lane] : 0.f);
    sq = warp_sum(lane < warps ? partial[1][lane] : 0.f);
    if (lane == 0) { partial[0][0] = sum; partial[1][0] = sq; }
  }
  __syncthreads();
  float mean = partial[0][0] / cols;
  float var = fmaxf(partial[1][0] / cols - mean * mean, 0.f);
  float rstd = rsqrtf(var + eps);
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    float v = (__half2float(row[i]) - mean) * rstd;
    out[i] = __float2half(v * __half2float(gamma[i]) + __half2float(beta[i]));
  }
}

torch::Tensor layernorm_fp16(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps) {
  TORCH_CHECK(x.scalar_type() == torch::kHalf && x.is_contiguous(), "contiguous fp16 input expected");
  auto y = torch::empty_like(x);
  int cols = x.size(-1);
  int rows = x.numel() / cols;
  layernorm_fp16_kernel<<<rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const __half*>(x.data_ptr<at::Half>()),
      reinterpret_cast<const __half*>(gamma.data_ptr<at::Half>()),
      reinterpret_cast<const __half*>(beta.data_ptr<at::Half>()),
      reinterpret_cast<__half*>(y.data_ptr<at::Half>()), cols, (float)eps);
  return y;
}
"""


class ModelNew(nn.Module):
    def __init__(self, hidden=HIDDEN):
        super().__init__()
        # Holds the parameters only: forward reads ln.weight and ln.bias, it never calls ln.
        self.ln = nn.LayerNorm(hidden, eps=1e-5).half()
        self._ext = None
        self._ready = False

    def forward(self, x):
        if not self._ready:
            self._ext = load_inline(
                name="layernorm_fp16_ext",
                cpp_sources=_cpp_src,
                cuda_sources=_cuda_src,
                functions=["layernorm_fp16"],
                extra_cuda_cflags=["-O3"],
                verbose=False,
            )
            self._ready = True
        return self._ext.layernorm_fp16(x.contiguous(), self.ln.weight.detach(), self.ln.bias.detach(), self.ln.eps)
