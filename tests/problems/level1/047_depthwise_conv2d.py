import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise 2D convolution (one filter per channel)."""

    def __init__(self, channels: int, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, stride=stride, padding=padding, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 16
channels = 64
kernel_size = 3
height = 128
width = 128


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [channels, kernel_size, 1, 1]
