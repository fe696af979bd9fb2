import torch
import torch.nn as nn


class Model(nn.Module):
    """diag(A) @ B: scales the rows of B by the vector A."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.diag(a) @ b


n = 2048
m = 2048


def get_inputs():
    a = torch.randn(n)
    b = torch.randn(n, m)
    return [a, b]


def get_init_inputs():
    return []
