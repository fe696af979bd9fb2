import torch
import torch.nn as nn


class Model(nn.Module):
    """Attention written out: scores, scale, softmax, weighted sum."""

    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = head_dim**-0.5

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        weights = torch.softmax(scores, dim=-1)
        return torch.matmul(weights, v)


batch_size = 8
heads = 8
seq_len = 256
head_dim = 64


def get_inputs():
    q = torch.randn(batch_size, heads, seq_len, head_dim)
    k = torch.randn(batch_size, heads, seq_len, head_dim)
    v = torch.randn(batch_size, heads, seq_len, head_dim)
    return [q, k, v]


def get_init_inputs():
    return [head_dim]
