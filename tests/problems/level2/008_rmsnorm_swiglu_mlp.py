import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A transformer feed-forward block: RMS norm, SwiGLU, projection, residual."""

    def __init__(self, dim: int, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        return x + self.down(F.silu(self.gate(normed)) * self.up(normed))


batch_size = 8
seq_len = 256
dim = 512
hidden = 1408


def get_inputs():
    x = torch.randn(batch_size, seq_len, dim)
    return [x]


def get_init_inputs():
    return [dim, hidden]
