import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix multiplication of an (M, K) by a (K, N) matrix."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


m = 1024
k = 4096
n = 512


def get_inputs():
    a = torch.randn(m, k)
    b = torch.randn(k, n)
    return [a, b]


def get_init_inputs():
    return []
