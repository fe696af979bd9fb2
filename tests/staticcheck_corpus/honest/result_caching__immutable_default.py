"""forward takes a defaulted argument, an immutable scale, not a container shared across calls."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

N = 1 << 20


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(N, device="cuda")]


def get_init_inputs():
    return []


@triton.jit
def _scaled_relu_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0) * scale, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, scale=2.0, block=(1024,)):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _scaled_relu_kernel[(triton.cdiv(n, block[0]),)](x, y, n, scale, BLOCK=block[0])
        return y
