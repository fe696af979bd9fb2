import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class Model(nn.Module):
    """C = A @ B in half precision."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


M = 1024
K = 512
N = 1024


def get_inputs():
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(K, N, device="cuda", dtype=torch.float16)
    return [A, B]


def get_init_inputs():
    return []


wmma_source = r"""
#include <torch/extension.h>
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

#define WMMA_M 16
#define WMMA_N 16
#define WMMA_K 16
#define WARPS_X 4
#define WARPS_Y 4

// Each warp computes one 16x16 tile of C, accumulating in fp32 on the tensor cores.
__global__ void wmma_gemm_kernel(const half* __restrict__ a, const half* __restrict__ b, half* __restrict__ c,
                                 int M, int N, int K) {
    __shared__ __align__(32) float stage[WARPS_X * WARPS_Y][WMMA_M * WMMA_N];  // wmma wants 256-bit alignment
    int tile_m = blockIdx.y * blockDim.y + threadIdx.y;
    int tile_n = (blockIdx.x * blockDim.x + threadIdx.x) / warpSize;
    if (tile_m * WMMA_M >= M || tile_n * WMMA_N >= N) return;  // the whole warp leaves together

    wmma::fragment<wmma::matrix_a, WMMA_M, WMMA_N, WMMA_K, half, wmma::row_major> a_frag;
    wmma::fragment<wmma::matrix_b, WMMA_M, WMMA_N, WMMA_K, half, wmma::row_major> b_frag;
    wmma::fragment<wmma::accumulator, WMMA_M, WMMA_N, WMMA_K, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += WMMA_K) {
        wmma::load_matrix_sync(a_frag, a + (size_t)tile_m * WMMA_M * K + k, K);
        wmma::load_matrix_sync(b_frag, b + (size_t)k * N + tile_n * WMMA_N, N);
        wmma::mma_sync(acc, a_frag, b_frag, acc);
    }
    int warp = threadIdx.y * (blockDim.x / warpSize) + threadIdx.x / warpSize;
    wmma::store_matrix_sync(stage[warp], acc, WMMA_N, wmma::mem_row_major);
    __syncwarp();
    int lane = threadIdx.x % warpSize;
    for (int i = lane; i < WMMA_M * WMMA_N; i += warpSize) {
        int r = i / WMMA_N, col = i % WMMA_N;
        c[(size_t)(tile_m * WMMA_M + r) * N + tile_n * WMMA_N + col] = __float2half(stage[warp][i]);
    }
}

torch::Tensor wmma_gemm(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.dtype() == torch::kHalf && B.dtype() == torch::kHalf, "half inputs expected");
    int M = A.size(0), K = A.size(1), N = B.size(1);
    TORCH_CHECK(M % WMMA_M == 0 && N % WMMA_N == 0 && K % WMMA_K == 0, "sizes must be multiples of 16");
    auto C = torch::empty({M, N}, A.options());
    dim3 block(WARPS_X * 32, WARPS_Y);
    dim3 grid((N / WMMA_N + WARPS_X - 1) / WARPS_X, (M / WMMA_M + WARPS_Y - 1) / WARPS_Y);
    wmma_gemm_kernel<<<grid, block>>>(reinterpret_cast<const half*>(A.data_ptr<at::Half>()),
                                      reinterpret_cast<const half*>(B.data_ptr<at::Half>()),
                                      reinterpret_cast<half*>(C.data_ptr<at::Half>()), M, N, K);
    return C;
}
"""

wmma_cpp_source = "torch::Tensor wmma_gemm(torch::Tensor A, torch::Tensor B);"

wmma_gemm = load_inline(
    name="wmma_gemm",
    cpp_sources=wmma_cpp_source,
    cuda_sources=wmma_source,
    functions=["wmma_gemm"],
    verbose=True,
    extra_cflags=[""],
    extra_cuda_cflags=["-O3", "-arch=sm_90"],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.gemm = wmma_gemm

    def forward(self, A, B):
        return self.gemm.wmma_gemm(A.contiguous(), B.contiguous())
