import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """LeakyReLU activation with a negative slope of 0.01."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=0.01)


batch_size = 64
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
