import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """SiLU (swish) activation."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)


batch_size = 64
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
