"""getattr(torch, "float32") reads a dtype by name, as configuration code does: no torch function is looked up."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

N = 1 << 20
DTYPE_NAME = "float32"


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(N, device="cuda", dtype=getattr(torch, DTYPE_NAME))]


def get_init_inputs():
    return []


@triton.jit
def _scaled_relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0) * 2.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous().to(getattr(torch, "float32"))
        y = torch.empty_like(x)
        n = x.numel()
        _scaled_relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
