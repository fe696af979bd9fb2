import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix-vector product, (M, K) @ (K, 1)."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, v)


m = 4096
k = 8192


def get_inputs():
    a = torch.randn(m, k)
    v = torch.randn(k, 1)
    return [a, v]


def get_init_inputs():
    return []
