// Archetype warp_divergence: every warp split in two by a per-lane branch.
//
// Planted problem: odd lanes run a floating-point recurrence, even lanes an
// integer hash, each a loop of the same length. The branch depends on the lane,
// so every warp executes both loops one after the other with half of its
// threads masked off: half of the issued instructions do no work.
// Expected in ncu: smsp__thread_inst_executed_per_inst_executed.ratio ~16
// (32 when a warp's threads agree); global accesses coalesced; no shared
// memory, no atomics, no local memory.
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

__global__ void split_lanes(const float* __restrict__ x, float* __restrict__ y, int iters) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i];
  if (threadIdx.x & 1) {
    for (int k = 0; k < iters; ++k) v = fmaf(v, 0.9999f, 0.0001f) * (1.0f + 1e-7f * v);
  } else {
    uint32_t h = __float_as_uint(v);
    for (int k = 0; k < iters; ++k) {
      h = h * 1664525u + 1013904223u;
      h ^= h >> 13;
    }
    v = (float)(h >> 8) * (1.0f / 16777216.0f);
  }
  y[i] = v;
}

int main() {
  const unsigned n = 1u << 22;  // one element per thread, 16 MiB in and out
  const int iters = 512;        // runtime trip count: the compiler cannot turn the branch into predication
  float *x, *y;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  fill<<<1024, 256>>>(x, n);
  CHECK(cudaGetLastError());
  const int block = 256;
  const int grid = (int)(n / block);
  split_lanes<<<grid, block>>>(x, y, iters);  // warm-up, outside the range
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("warp_divergence");
  split_lanes<<<grid, block>>>(x, y, iters);
  nvtxRangePop();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  std::printf("ok\n");
  return 0;
}
