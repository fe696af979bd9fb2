// Archetype register_spill: registers spilled to local memory.
//
// Planted problem: __launch_bounds__(1024, 2) asks for 2048 resident threads
// per SM, which leaves 65536 / 2048 = 32 registers per thread, while the loop
// keeps 64 floats live across every iteration. ptxas has to spill the excess to
// local memory (thread-private, cached in L1, backed by L2 and HBM) and reload
// it on every pass: `nvcc -Xptxas -v` reports spill stores and loads.
// Expected in ncu: local-memory traffic (l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum
// and ..._op_st.sum, smsp__sass_inst_executed_op_local_ld.sum / _st.sum)
// well above zero, where every other archetype has none.
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

constexpr int kLive = 64;  // live floats per thread, twice the 32-register budget

__global__ void __launch_bounds__(1024, 2) rotate_mix(const float* __restrict__ x, float* __restrict__ y, int iters) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  float v[kLive];
  const float seed = x[i];
#pragma unroll
  for (int k = 0; k < kLive; ++k) v[k] = seed + (float)k;
  // Each value is updated from its neighbour, so all 64 stay live from one iteration to the next.
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < kLive; ++k) v[k] = fmaf(v[k], 0.5f, v[(k + 1) % kLive] * 0.25f);
  }
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kLive; ++k) sum += v[k];
  y[i] = sum;
}

int main() {
  // 2 blocks of 1024 threads per SM on the H200's 132 SMs: one full wave.
  const int block = 1024, grid = 132 * 2;
  const unsigned n = (unsigned)(block * grid);
  const int iters = 64;  // ~70 MB of spilled state swept 64 times: milliseconds, not seconds
  float *x, *y;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  fill<<<1024, 256>>>(x, n);
  CHECK(cudaGetLastError());
  rotate_mix<<<grid, block>>>(x, y, iters);  // warm-up, outside the range
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("register_spill");
  rotate_mix<<<grid, block>>>(x, y, iters);
  nvtxRangePop();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  std::printf("ok\n");
  return 0;
}
