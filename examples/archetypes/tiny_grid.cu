// Archetype tiny_grid: latency-bound, a grid far too small for the GPU.
//
// Planted problem: 4 blocks of 64 threads (8 warps on a 132-SM GPU) each
// follow a chain of dependent loads through a 64 MiB ring of 128 B nodes, so
// every load waits for the previous one to come back from HBM. A warp's 32
// lanes read the 32 words of one node, so each load is coalesced: the problem
// is latency and too little parallelism, not access pattern.
// Expected in ncu: launch__waves_per_multiprocessor far below 1 (~0.001);
// compute and memory throughput both a few % of peak; 4 sectors per global
// load request; warps stalled on long scoreboard (memory dependency).
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

constexpr unsigned kWords = 32;           // one node = 32 unsigned = 128 B, one per lane
constexpr unsigned kNodes = 1u << 19;     // 64 MiB ring, larger than the 50 MB L2
constexpr unsigned kHop = 104729;         // odd, so the ring visits every node; ~13 MB per hop

// Every word of node k holds the index of the node after it.
__global__ void link_ring(unsigned* next) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < kNodes * kWords; i += gridDim.x * blockDim.x)
    next[i] = (i / kWords + kHop) & (kNodes - 1);
}

__global__ void chase(const unsigned* __restrict__ next, unsigned* __restrict__ out, int steps) {
  const unsigned thread = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned lane = threadIdx.x % kWords;
  unsigned node = (thread / kWords) * (kNodes / 8);  // each warp starts on its own stretch of the ring
  for (int s = 0; s < steps; ++s) node = next[node * kWords + lane];
  out[thread] = node;
}

int main() {
  const int grid = 4, block = 64;
  const int steps = 2048;  // ~2048 HBM round trips in sequence: about a millisecond
  unsigned *next, *out;
  CHECK(cudaMalloc(&next, (size_t)kNodes * kWords * sizeof(unsigned)));
  CHECK(cudaMalloc(&out, grid * block * sizeof(unsigned)));
  link_ring<<<1024, 256>>>(next);
  CHECK(cudaGetLastError());
  chase<<<grid, block>>>(next, out, steps);  // warm-up, outside the range
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("tiny_grid");
  chase<<<grid, block>>>(next, out, steps);
  nvtxRangePop();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(next));
  CHECK(cudaFree(out));
  std::printf("ok\n");
  return 0;
}
