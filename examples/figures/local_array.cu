// Figure case local_array: a per-thread array indexed at run time, no register spills.
//
// Each thread counts its keys into 64 float slots, slots[key % 64] += 1: the index
// is known only at run time, so the compiler cannot keep the array in registers
// and places it in local memory (a 256-byte stack frame per thread) although it
// has registers to spare (__launch_bounds__(256) leaves up to 255 per thread).
// `nvcc -Xptxas -v` reports the stack frame and 0 bytes of spill stores and loads.
// Lanes of a warp hit different slots, so each local load and store touches up
// to 32 sectors while the key loads are coalesced (4 sectors per warp).
// Expected in ncu: local loads and stores (LDL/STL, l1tex__t_sectors_pipe_lsu_mem_local_op_ld/st)
// far above the global traffic, and sass__inst_executed_register_spilling = 0.
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

// Hashed keys: every slot equally likely, no pattern the hardware could compress.
__global__ void fill(uint32_t* keys, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 0x9E3779B9u;
    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    keys[i] = h;
  }
}

constexpr int kSlots = 64;

__global__ void __launch_bounds__(256) bin_counts(const uint32_t* __restrict__ keys, float* __restrict__ out,
                                                  int per_thread) {
  float slots[kSlots];
#pragma unroll
  for (int k = 0; k < kSlots; ++k) slots[k] = 0.0f;
  const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (int r = 0; r < per_thread; ++r) {
    const uint32_t key = keys[tid + r * stride];  // consecutive threads, consecutive keys
    slots[key % kSlots] += 1.0f;                  // the run-time index: a local load and a local store
  }
  float weighted = 0.0f;
#pragma unroll
  for (int k = 0; k < kSlots; ++k) weighted += slots[k] * (float)(k + 1);
  out[tid] = weighted;
}

int main() {
  // 8 blocks of 256 threads per SM on the H200's 132 SMs: one full wave.
  const int block = 256, grid = 132 * 8;
  const int per_thread = 128;
  const size_t threads = (size_t)block * grid;
  const size_t n = threads * per_thread;  // 34.6 M keys, 138 MB
  uint32_t* keys;
  float* out;
  CHECK(cudaMalloc(&keys, n * sizeof(uint32_t)));
  CHECK(cudaMalloc(&out, threads * sizeof(float)));
  fill<<<1024, 256>>>(keys, n);
  CHECK(cudaGetLastError());
  bin_counts<<<grid, block>>>(keys, out, per_thread);  // warm-up, outside the range
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("local_array");
  bin_counts<<<grid, block>>>(keys, out, per_thread);
  nvtxRangePop();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(keys));
  CHECK(cudaFree(out));
  std::printf("ok\n");
  return 0;
}
