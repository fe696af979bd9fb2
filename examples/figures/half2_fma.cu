// Figure case half2_fma: real half-precision arithmetic, packed __half2 FMAs.
//
// Each thread runs 4 independent chains of v = v * a + c on __half2 values, 2048
// steps each, so the FMA pipe stays busy while nothing else does. Every __hfma2
// is one HFMA2 of two halves: 2 FMAs, 4 FLOP per thread. a and c are kernel
// arguments (registers), so no HFMA2 reads the zero register.
// Expected in ncu: FP16 FLOPs (2 x hadd + 2 x hmul + 4 x hfma per thread instruction)
// = 4 x threads x 4 chains x 2048 steps; no FP32 arithmetic; the FMA pipe busiest.
#include <cstdint>
#include <cstdio>
#include <cuda_fp16.h>
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

// Halves in [0.5, 1): a * v + c with a = 0.5 and c = 0.25 stays in [0.5, 1) for ever.
__global__ void fill(__half2* x, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 0x9E3779B9u;
    h ^= h >> 16;
    const float lo = 0.5f + (float)(h & 0xFF) / 512.0f, hi = 0.5f + (float)(h >> 24) / 512.0f;
    x[i] = __floats2half2_rn(lo, hi);
  }
}

constexpr int kChains = 4;

__global__ void half2_chains(const __half2* __restrict__ x, __half2* __restrict__ y, __half2 a, __half2 c,
                             int steps) {
  const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const size_t threads = (size_t)gridDim.x * blockDim.x;
  __half2 v[kChains];
#pragma unroll
  for (int k = 0; k < kChains; ++k) v[k] = x[i + k * threads];
  for (int s = 0; s < steps; ++s) {
#pragma unroll
    for (int k = 0; k < kChains; ++k) v[k] = __hfma2(v[k], a, c);
  }
#pragma unroll
  for (int k = 0; k < kChains; ++k) y[i + k * threads] = v[k];
}

int main() {
  // 8 blocks of 256 threads per SM on the H200's 132 SMs: one full wave.
  const int block = 256, grid = 132 * 8, steps = 2048;
  const size_t threads = (size_t)block * grid;
  const size_t n = threads * kChains;
  __half2 *x, *y;
  CHECK(cudaMalloc(&x, n * sizeof(__half2)));
  CHECK(cudaMalloc(&y, n * sizeof(__half2)));
  fill<<<1024, 256>>>(x, n);
  CHECK(cudaGetLastError());
  const __half2 a = __floats2half2_rn(0.5f, 0.5f), c = __floats2half2_rn(0.25f, 0.25f);
  half2_chains<<<grid, block>>>(x, y, a, c, steps);  // warm-up, outside the range
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("half2_fma");
  half2_chains<<<grid, block>>>(x, y, a, c, steps);
  nvtxRangePop();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  std::printf("ok\n");
  return 0;
}
