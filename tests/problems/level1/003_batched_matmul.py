import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matrix multiplication, (B, M, K) @ (B, K, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


batch_size = 32
m = 256
k = 512
n = 256


def get_inputs():
    a = torch.randn(batch_size, m, k)
    b = torch.randn(batch_size, k, n)
    return [a, b]


def get_init_inputs():
    return []
