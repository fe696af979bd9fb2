// Archetype hot_atomic: every thread atomically adds into one global address.
//
// Planted problem: a sum reduction done as one float atomicAdd per element
// into a single counter. The adds are resolved at the L2 slice that owns the
// address, one after another, so 4M threads queue on one atomic unit while
// the other slices idle. (Float adds, so the compiler cannot combine a warp's
// adds first, as it may for integer ones.)
// Expected in ncu: global reduction/atomic requests
// (l1tex__t_requests_pipe_lsu_mem_global_op_red.sum + ..._op_atom.sum) one per
// warp instruction, far above every other archetype's zero; the atomic unit of
// one L2 slice busy (lts__d_atomic_input_cycles_active.max high while .avg is
// low); DRAM throughput low.
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

__global__ void atomic_sum(const float* __restrict__ x, float* total, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(total, x[i]);
}

int main() {
  const unsigned n = 1u << 22;
  float *x, *total;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&total, sizeof(float)));
  CHECK(cudaMemset(total, 0, sizeof(float)));
  fill<<<1024, 256>>>(x, n);
  CHECK(cudaGetLastError());
  const int block = 256;
  const int grid = (int)((n + block - 1) / block);
  atomic_sum<<<grid, block>>>(x, total, n);  // warm-up, outside the range
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("hot_atomic");
  atomic_sum<<<grid, block>>>(x, total, n);
  nvtxRangePop();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(x));
  CHECK(cudaFree(total));
  std::printf("ok\n");
  return 0;
}
