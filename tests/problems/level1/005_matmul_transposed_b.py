import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B.T with B given as (N, K)."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b.T)


m = 1024
k = 2048
n = 1024


def get_inputs():
    a = torch.randn(m, k)
    b = torch.randn(n, k)
    return [a, b]


def get_init_inputs():
    return []
