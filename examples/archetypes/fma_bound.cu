// Archetype fma_bound: compute-bound on the FP32 FMA pipe.
//
// No planted problem in the memory system: each thread reads one float, runs
// 8 independent FMA chains (enough instruction-level parallelism to hide the
// FMA latency) for thousands of iterations, and writes one float.
// Expected in ncu: sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
// high (SM throughput near its peak), DRAM throughput near zero (a few MB
// against ~10^10 FMAs); no tensor-pipe activity, no shared or local memory.
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    cudaError_t err_ = (call);                                                             \
    if (err_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));   \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

// Values in [0.5, 1): non-zero, and not a pattern the hardware could compress.
__global__ void fill(float* x, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 0x9E3779B9u;
    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    x[i] = 0.5f + (float)(h >> 8) * (0.5f / 16777216.0f);
  }
}

constexpr int kChains = 8;

__global__ void fma_chains(const float* __restrict__ x, float* __restrict__ y, float a, float b, int iters) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) acc[c] = x[i] + (float)c;
  for (int k = 0; k < iters; ++k) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) acc[c] = fmaf(acc[c], a, b);
  }
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) sum += acc[c];
  y[i] = sum;
}

int main() {
  // 8 blocks of 256 threads per SM on the H200's 132 SMs: one full wave.
  const int block = 256, grid = 132 * 8;
  const unsigned n = (unsigned)(block * grid);
  const int iters = 8192;  // 8 x 8192 FMAs per thread, ~1.8e10 in all
  // a and b are kernel arguments so the compiler cannot fold the chains; a < 1 keeps them finite.
  const float a = 0.9999f, b = 0.0001f;
  float *x, *y;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  fill<<<1024, 256>>>(x, n);
  CHECK(cudaGetLastError());
  fma_chains<<<grid, block>>>(x, y, a, b, iters);  // warm-up, outside the range
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("fma_bound");
  fma_chains<<<grid, block>>>(x, y, a, b, iters);
  nvtxRangePop();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  std::printf("ok\n");
  return 0;
}
