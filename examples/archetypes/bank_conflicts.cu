// Archetype bank_conflicts: 32-way shared-memory bank conflicts.
//
// Planted problem: each block stages a 32x32 float tile in shared memory
// without padding and then reads and writes it by column. Row pitch 32 words =
// 32 banks, so the 32 lanes of a warp all hit the same bank and every shared
// load or store is replayed as 32 wavefronts instead of 1.
// Expected in ncu: l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
// and ..._op_st.sum far above zero (~31 conflicts per shared instruction,
// ~32 wavefronts per shared load instead of 1); global accesses coalesced
// (4 sectors per request); 32 threads per executed instruction.
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

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;  // blockDim (32, 8): each thread handles 4 of the tile's 32 rows
constexpr int kReps = 32;        // column sweeps per block, so the conflicting loads dominate the run time

__global__ void column_sweep(const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float tile[kTile][kTile];  // no +1 padding: that is the planted problem
  const int tx = threadIdx.x, ty = threadIdx.y;
  const float* block_in = in + (size_t)blockIdx.x * kTile * kTile;
#pragma unroll
  for (int j = 0; j < kTile / kRowsPerPass; ++j) {
    const int r = ty + j * kRowsPerPass;
    tile[tx][r] = block_in[r * kTile + tx];  // coalesced global load, column store into shared
  }
  __syncthreads();
  float acc = 0.0f;
  for (int rep = 0; rep < kReps; ++rep) {
#pragma unroll
    for (int j = 0; j < kTile / kRowsPerPass; ++j) acc += tile[tx][(ty + j * kRowsPerPass + rep) & (kTile - 1)];  // column load
  }
  out[(size_t)blockIdx.x * kTile * kRowsPerPass + ty * kTile + tx] = acc;
}

int main() {
  const int blocks = 1 << 14;
  const size_t n_in = (size_t)blocks * kTile * kTile;  // 64 MiB
  const size_t n_out = (size_t)blocks * kTile * kRowsPerPass;
  float *in, *out;
  CHECK(cudaMalloc(&in, n_in * sizeof(float)));
  CHECK(cudaMalloc(&out, n_out * sizeof(float)));
  fill<<<1024, 256>>>(in, n_in);
  CHECK(cudaGetLastError());
  const dim3 block(kTile, kRowsPerPass);
  column_sweep<<<blocks, block>>>(in, out);  // warm-up, outside the range
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("bank_conflicts");
  column_sweep<<<blocks, block>>>(in, out);
  nvtxRangePop();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  std::printf("ok\n");
  return 0;
}
