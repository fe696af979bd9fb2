"""TileLang kernels built per (M, N, K, dtype) and kept in a dict: a build cache keyed by shape, not a result cache."""

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

M, K, N = 1024, 1024, 1024


@tilelang.jit(out_idx=[-1])
def matmul(m, n, k, block_m=128, block_n=128, block_k=32, dtype="float32", accum_dtype="float"):
    @T.prim_func
    def main(a: T.Tensor((m, k), dtype), b: T.Tensor((k, n), dtype), c: T.Tensor((m, n), dtype)):
        with T.Kernel(T.ceildiv(n, block_n), T.ceildiv(m, block_m), threads=128) as (bx, by):
            a_shared = T.alloc_shared((block_m, block_k), dtype)
            b_shared = T.alloc_shared((block_k, block_n), dtype)
            c_local = T.alloc_fragment((block_m, block_n), accum_dtype)
            T.clear(c_local)
            for ko in T.Pipelined(T.ceildiv(k, block_k), num_stages=3):
                T.copy(a[by * block_m, ko * block_k], a_shared)
                T.copy(b[ko * block_k, bx * block_n], b_shared)
                T.gemm(a_shared, b_shared, c_local)
            T.copy(c_local, c[by * block_m, bx * block_n])

    return main


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._kernels = {}

    def forward(self, a, b):
        key = (a.shape[0], b.shape[1], a.shape[1], str(a.dtype))
        kernel = self._kernels.get(key)
        if kernel is None:
            kernel = matmul(a.shape[0], b.shape[1], a.shape[1])
            self._kernels[key] = kernel
        return kernel(a, b)
