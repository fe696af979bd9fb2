// Archetype strided_read: uncoalesced global loads.
//
// Planted problem: the input is a row-major [rows][1024] float matrix read
// column by column, so the 32 lanes of a warp load 32 floats 4 KiB apart:
// every lane needs its own 32 B sector, and 7/8 of each sector fetched is
// wasted. The stores are coalesced, so only the loads carry the problem.
// Expected in ncu: ~32 sectors per global load request (a coalesced fp32
// warp load needs 4), ~4 per store request; no shared memory, no atomics,
// 32 threads per executed instruction.
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

constexpr unsigned kN = 1u << 24;  // 64 MiB in, 64 MiB out
constexpr unsigned kCols = 1024;   // row pitch 4 KiB: neighbouring lanes never share a sector
constexpr unsigned kRows = kN / kCols;

// Thread i reads element (i % kRows, i / kRows): consecutive threads walk down a column.
__global__ void column_gather(const float* __restrict__ in, float* __restrict__ out) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kN) out[i] = 2.0f * in[(i % kRows) * kCols + i / kRows];
}

int main() {
  float *in, *out;
  CHECK(cudaMalloc(&in, kN * sizeof(float)));
  CHECK(cudaMalloc(&out, kN * sizeof(float)));
  fill<<<1024, 256>>>(in, kN);
  CHECK(cudaGetLastError());
  const int block = 256;
  const int grid = (int)((kN + block - 1) / block);
  column_gather<<<grid, block>>>(in, out);  // warm-up, outside the range
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("strided_read");
  column_gather<<<grid, block>>>(in, out);
  nvtxRangePop();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  std::printf("ok\n");
  return 0;
}
