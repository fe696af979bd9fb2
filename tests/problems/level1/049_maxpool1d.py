import torch
import torch.nn as nn


class Model(nn.Module):
    """1D max pooling."""

    def __init__(self, kernel_size: int, stride: int, padding: int = 0):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 16
channels = 64
length = 8192


def get_inputs():
    x = torch.randn(batch_size, channels, length)
    return [x]


def get_init_inputs():
    return [4, 2, 1]
