# rule: precision_downcast
"""The Triton kernel loads fp32, does the product in fp16 and stores back to fp32: the reference is fp32 throughout."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

M, K, N = 1024, 1024, 1024


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")]


def get_init_inputs():
    return []


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, m, n, k, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for start in range(0, k, BLOCK_K):
        ks = start + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rows[:, None] * k + ks[None, :], mask=(rows[:, None] < m) & (ks[None, :] < k), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * n + cols[None, :], mask=(ks[:, None] < k) & (cols[None, :] < n), other=0.0)
        acc += tl.dot(a.to(tl.float16), b.to(tl.float16))  # <-
    tl.store(c_ptr + rows[:, None] * n + cols[None, :], acc, mask=(rows[:, None] < m) & (cols[None, :] < n))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        c = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(a.shape[0], 64), triton.cdiv(b.shape[1], 64))
        _matmul_kernel[grid](a, b, c, a.shape[0], b.shape[1], a.shape[1], BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
        return c
