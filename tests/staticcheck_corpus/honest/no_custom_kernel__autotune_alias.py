"""A Triton kernel wrapped by triton.autotune by hand and bound to a new name: an alias of its own kernel."""

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
def _scaled_relu_impl(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0) * 2.0, mask=mask)


scaled_relu = triton.autotune(configs=[triton.Config({"BLOCK": 512}), triton.Config({"BLOCK": 1024})], key=["n"])(
    _scaled_relu_impl
)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        scaled_relu[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
        return y
