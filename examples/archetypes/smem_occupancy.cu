// Archetype smem_occupancy: occupancy limited by shared memory.
//
// Planted problem: each block of 256 threads stages a 128 KiB chunk of its
// input in dynamic shared memory (opted in above the default 48 KiB with
// cudaFuncSetAttribute). An SM has 228 KiB of shared memory, so only one
// block fits: 8 of the SM's 64 warp slots are used, and there are too few
// warps in flight to hide the memory latency. Registers (32 per thread)
// would allow 8 blocks.
// Expected in ncu: launch__occupancy_limit_shared_mem = 1 block, the smallest
// of the occupancy limits (registers, warps, blocks, barriers); theoretical
// occupancy 12.5 %; shared accesses conflict-free (consecutive words per warp).
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

constexpr int kBlock = 256;
constexpr int kChunk = 32 * 1024;  // floats per block: 128 KiB of shared memory
constexpr size_t kSmemBytes = kChunk * sizeof(float);

// Stages the chunk, then each thread sums its column of the chunk back to front.
__global__ void staged_sum(const float* __restrict__ in, float* __restrict__ out) {
  extern __shared__ float chunk[];
  const float* block_in = in + (size_t)blockIdx.x * kChunk;
  for (int k = threadIdx.x; k < kChunk; k += kBlock) chunk[k] = block_in[k];
  __syncthreads();
  float acc = 0.0f;
  for (int k = kChunk - kBlock + threadIdx.x; k >= 0; k -= kBlock) acc = fmaf(acc, 0.5f, chunk[k]);
  out[(size_t)blockIdx.x * kBlock + threadIdx.x] = acc;
}

int main() {
  const int grid = 1024;  // ~8 waves of one block per SM
  const size_t n = (size_t)grid * kChunk;  // 128 MiB
  float *in, *out;
  CHECK(cudaMalloc(&in, n * sizeof(float)));
  CHECK(cudaMalloc(&out, (size_t)grid * kBlock * sizeof(float)));
  fill<<<1024, 256>>>(in, n);
  CHECK(cudaGetLastError());
  CHECK(cudaFuncSetAttribute(staged_sum, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBytes));
  staged_sum<<<grid, kBlock, kSmemBytes>>>(in, out);  // warm-up, outside the range
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("smem_occupancy");
  staged_sum<<<grid, kBlock, kSmemBytes>>>(in, out);
  nvtxRangePop();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  std::printf("ok\n");
  return 0;
}
