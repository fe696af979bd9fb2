// Figure case fp32_copy: a pure FP32 copy, no floating-point arithmetic at all.
//
// Each thread copies 16 floats, one per block-wide row, y = x over 2 x 128 MiB.
// nvcc 13.0 (-O3, sm_90) zeroes a register of the loop's 64-bit index with
// HFMA2.MMA Rd, -RZ, RZ, 0, 0: a constant move that ncu counts as one FP16 FMA
// (4 FLOP) per thread, on the pipe it reports as the tensor pipe. The kernel
// does no arithmetic on floats.
// Expected in ncu: smsp__sass_thread_inst_executed_op_hfma_pred_on = one per thread
// (fp16 FLOPs 4 x threads), no FADD/FMUL/FFMA; 4 sectors per global load and store
// request; DRAM reads of the 128 MiB read once.
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

__global__ void copy_rows(const float* __restrict__ x, float* __restrict__ y, int per_thread) {
  const size_t base = ((size_t)blockIdx.x * blockDim.x) * per_thread + threadIdx.x;
#pragma unroll 1
  for (int k = 0; k < per_thread; ++k) y[base + (size_t)k * blockDim.x] = x[base + (size_t)k * blockDim.x];
}

int main() {
  const size_t n = size_t(1) << 25;  // 128 MiB per array, beyond the 50 MB L2
  const int block = 256, per_thread = 16;
  const int grid = (int)(n / ((size_t)block * per_thread));  // 8192 blocks
  float *x, *y;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  fill<<<1024, 256>>>(x, n);
  CHECK(cudaGetLastError());
  copy_rows<<<grid, block>>>(x, y, per_thread);  // warm-up, outside the range
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("fp32_copy");
  copy_rows<<<grid, block>>>(x, y, per_thread);
  nvtxRangePop();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  std::printf("ok\n");
  return 0;
}
