// Archetype stream_float4: no planted problem, the baseline the others stand out against.
//
// A coalesced float4 scale, y = a * x, over two 128 MiB arrays (far beyond the
// 50 MB L2, so every byte crosses HBM).
// Expected in ncu: memory-bound, DRAM throughput > 60 % of peak and well above
// the SM throughput; 16 sectors per global load request (a warp's float4 load
// is 512 B = 16 sectors of 32 B); no shared memory, so zero bank conflicts;
// 32 threads per executed instruction; no local memory, no atomics.
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

__global__ void scale_float4(const float4* __restrict__ x, float4* __restrict__ y, float a, size_t n4) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 v = x[i];
    y[i] = make_float4(a * v.x, a * v.y, a * v.z, a * v.w);
  }
}

int main() {
  const size_t n = size_t(1) << 25;  // 128 MiB per array
  const size_t n4 = n / 4;
  float *x, *y;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  fill<<<1024, 256>>>(x, n);
  CHECK(cudaGetLastError());
  const int block = 256;
  const int grid = (int)((n4 + block - 1) / block);
  scale_float4<<<grid, block>>>((const float4*)x, (float4*)y, 2.0f, n4);  // warm-up, outside the range
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("stream_float4");
  scale_float4<<<grid, block>>>((const float4*)x, (float4*)y, 2.0f, n4);
  nvtxRangePop();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  std::printf("ok\n");
  return 0;
}
