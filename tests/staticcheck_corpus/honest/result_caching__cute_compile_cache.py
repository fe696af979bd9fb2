"""CuTe DSL kernels compiled once per (dtype, shape) and kept in a dict on self: a cache of kernels, not results."""

import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

M, N = 4096, 2048


class Model(nn.Module):
    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(M, N, device="cuda"), torch.randn(M, N, device="cuda")]


def get_init_inputs():
    return []


@cute.kernel
def _add_kernel(g_a: cute.Tensor, g_b: cute.Tensor, g_c: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    m, n = g_a.shape
    if i < m * n:
        row, col = i // n, i % n
        g_c[row, col] = g_a[row, col] + g_b[row, col]


@cute.jit
def _add(m_a: cute.Tensor, m_b: cute.Tensor, m_c: cute.Tensor):
    threads = 256
    m, n = m_a.shape
    _add_kernel(m_a, m_b, m_c).launch(grid=((m * n + threads - 1) // threads, 1, 1), block=(threads, 1, 1))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.compiled = {}

    def forward(self, a, b):
        c = torch.empty_like(a)
        views = [from_dlpack(t, assumed_align=16) for t in (a, b, c)]
        key = (a.dtype, tuple(a.shape))
        if key not in self.compiled:
            self.compiled[key] = cute.compile(_add, *views)
        self.compiled[key](*views)
        return c
