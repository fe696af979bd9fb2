# lint: warn
"""A partial replacement: its own 2x2 max-pool kernel, the convolution, ReLU and linear left in PyTorch.

Under the default policy the PyTorch operations are warnings (it runs a kernel of its own); a policy that
makes torch_fallback an error fails it.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

BATCH, CHANNELS, SIZE, CLASSES = 64, 16, 32, 10

_cuda_src = r"""
#include <torch/extension.h>

__global__ void max_pool_2x2_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t planes, int h, int w) {
  const int oh = h / 2, ow = w / 2;
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= planes * oh * ow) return;
  const int64_t plane = i / (oh * ow);
  const int r = (i / ow) % oh, c = i % ow;
  const float* p = x + plane * h * w + (2 * r) * w + 2 * c;
  y[i] = fmaxf(fmaxf(p[0], p[1]), fmaxf(p[w], p[w + 1]));
}

torch::Tensor max_pool_2x2(torch::Tensor x) {
  const int64_t n = x.size(0), ch = x.size(1);
  const int h = x.size(2), w = x.size(3);
  auto y = torch::empty({n, ch, h / 2, w / 2}, x.options());
  const int64_t total = y.numel();
  max_pool_2x2_kernel<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n * ch, h, w);
  return y;
}
"""
_ext = load_inline(
    name="partial_maxpool_ext",
    cpp_sources="torch::Tensor max_pool_2x2(torch::Tensor x);",
    cuda_sources=_cuda_src,
    functions=["max_pool_2x2"],
)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, CHANNELS, kernel_size=3, padding=1)
        self.fc = nn.Linear(CHANNELS * (SIZE // 2) ** 2, CLASSES)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return self.fc(x.flatten(1))


def get_inputs():
    return [torch.randn(BATCH, 3, SIZE, SIZE, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(Model):
    def forward(self, x):
        x = torch.relu(self.conv(x))
        x = _ext.max_pool_2x2(x.contiguous())
        return self.fc(x.flatten(1))
