import torch
import torch.nn as nn


class Model(nn.Module):
    """2D average pooling, 3x3 with stride 1."""

    def __init__(self, kernel_size: int, stride: int, padding: int = 0):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 16
channels = 32
height = 256
width = 256


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [3, 1, 1]
