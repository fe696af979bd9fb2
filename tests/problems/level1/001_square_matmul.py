import torch
import torch.nn as nn


class Model(nn.Module):
    """A single square matrix multiplication, C = A @ B."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


n = 2048


def get_inputs():
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    return [a, b]


def get_init_inputs():
    return []
