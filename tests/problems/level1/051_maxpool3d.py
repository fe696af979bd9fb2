import torch
import torch.nn as nn


class Model(nn.Module):
    """3D max pooling, 3x3x3 with stride 2."""

    def __init__(self, kernel_size: int, stride: int, padding: int = 0):
        super().__init__()
        self.pool = nn.MaxPool3d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 8
channels = 16
depth = 32
height = 64
width = 64


def get_inputs():
    x = torch.randn(batch_size, channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [3, 2, 1]
