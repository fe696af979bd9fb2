import torch
import torch.nn as nn


class Model(nn.Module):
    """Product of two lower-triangular matrices, kept lower-triangular."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.tril(torch.matmul(a, b))


n = 2048


def get_inputs():
    a = torch.tril(torch.randn(n, n))
    b = torch.tril(torch.randn(n, n))
    return [a, b]


def get_init_inputs():
    return []
