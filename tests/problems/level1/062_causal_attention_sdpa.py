import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Causal attention through scaled_dot_product_attention."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


batch_size = 8
heads = 16
seq_len = 512
head_dim = 64


def get_inputs():
    q = torch.randn(batch_size, heads, seq_len, head_dim, dtype=torch.float16)
    k = torch.randn(batch_size, heads, seq_len, head_dim, dtype=torch.float16)
    v = torch.randn(batch_size, heads, seq_len, head_dim, dtype=torch.float16)
    return [q, k, v]


def get_init_inputs():
    return []
