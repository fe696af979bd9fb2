// A standalone CUDA program profsvc can profile: the kernel launch it wants
// measured sits inside an NVTX range (nvtx3 is header-only, shipped with CUDA).
//
//   profsvc profile examples/saxpy.cu --server gpu-host:50051
#include <cstdio>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

__global__ void saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

#define CHECK(call)                                                                   \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

int main() {
  const int n = 1 << 24;
  float *x, *y;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  CHECK(cudaMemset(x, 0, n * sizeof(float)));
  CHECK(cudaMemset(y, 0, n * sizeof(float)));
  const int block = 256, grid = (n + block - 1) / block;
  saxpy<<<grid, block>>>(n, 2.0f, x, y);  // warm-up, outside the range
  CHECK(cudaDeviceSynchronize());
  nvtxRangePushA("saxpy");
  saxpy<<<grid, block>>>(n, 2.0f, x, y);
  nvtxRangePop();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  std::printf("ok\n");
  return 0;
}
