import torch
import torch.nn as nn


class Model(nn.Module):
    """Multi-head self-attention with nn.MultiheadAttention."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.attn(x, x, x, need_weights=False)
        return out


batch_size = 8
seq_len = 256
embed_dim = 256
num_heads = 8


def get_inputs():
    x = torch.randn(batch_size, seq_len, embed_dim)
    return [x]


def get_init_inputs():
    return [embed_dim, num_heads]
