// Archetype tensor_gemm: a matrix product on the tensor cores (WMMA).
//
// No planted problem beyond simplicity: C = A * B for 2048 x 2048 x 2048 half
// inputs with float accumulation, each warp computing a 32 x 32 tile of C from
// 16 x 16 x 16 WMMA fragments loaded straight from global memory (L1/L2 serve
// the reuse; no shared-memory staging). It is here so the tensor pipe shows up
// in one archetype: every other one leaves it idle.
// Expected in ncu: sm__pipe_tensor_cycles_active and
// sm__inst_executed_pipe_tensor_op_hmma well above zero (HMMA instructions);
// zero for the FMA loop and every other archetype.
#include <cstdint>
#include <cstdio>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>
#include <nvtx3/nvToolsExt.h>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t err_ = (call);                                                             \
    if (err_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));   \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

using namespace nvcuda;

constexpr int kSize = 2048;         // M = N = K
constexpr int kFrag = 16;           // WMMA m16n16k16
constexpr int kWarpTile = 32;       // each warp: 2 x 2 fragments of C
constexpr int kWarpsPerSide = 2;    // 2 x 2 warps per block: a 64 x 64 block tile
constexpr int kBlockTile = kWarpTile * kWarpsPerSide;

// Values in [-0.5, 0.5): non-zero, and small enough that half holds them and the sums stay finite.
__global__ void fill_half(half* x, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 0x9E3779B9u;
    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    x[i] = __float2half((float)(h >> 8) * (1.0f / 16777216.0f) - 0.5f);
  }
}

// A is row-major [M][K]; B is column-major (stored as [N][K]) so both fragments read along K; C is row-major.
__global__ void wmma_gemm(const half* __restrict__ a, const half* __restrict__ b, float* __restrict__ c) {
  const int warp = threadIdx.x / 32;
  const int row0 = blockIdx.y * kBlockTile + (warp / kWarpsPerSide) * kWarpTile;
  const int col0 = blockIdx.x * kBlockTile + (warp % kWarpsPerSide) * kWarpTile;
  wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, half, wmma::row_major> fa[2];
  wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, half, wmma::col_major> fb[2];
  for (int k = 0; k < kSize; k += kFrag) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      wmma::load_matrix_sync(fa[i], a + (size_t)(row0 + i * kFrag) * kSize + k, kSize);
      wmma::load_matrix_sync(fb[i], b + (size_t)(col0 + i * kFrag) * kSize + k, kSize);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(c + (size_t)(row0 + i * kFrag) * kSize + col0 + j * kFrag, acc[i][j], kSize,
                              wmma::mem_row_major);
}

int main() {
  const size_t n = (size_t)kSize * kSize;
  half *a, *b;
  float* c;
  CHECK(cudaMalloc(&a, n * sizeof(half)));
  CHECK(cudaMalloc(&b, n * sizeof(half)));
  CHECK(cudaMalloc(&c, n * sizeof(float)));
  fill_half<<<1024, 256>>>(a, n);
  CHECK(cudaGetLastError());
  fill_half<<<1024, 256>>>(b, n);
  CHECK(cudaGetLastError());
  const dim3 grid(kSize / kBlockTile, kSize / kBlockTile);
  const int block = 32 * kWarpsPerSide * kWarpsPerSide;
  wmma_gemm<<<grid, block>>>(a, b, c);  // warm-up, outside the range
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("tensor_gemm");
  wmma_gemm<<<grid, block>>>(a, b, c);
  nvtxRangePop();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
  std::printf("ok\n");
  return 0;
}
