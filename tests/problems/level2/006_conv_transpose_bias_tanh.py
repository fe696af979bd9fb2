import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed convolution, a bias added, then tanh."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=2, padding=1)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv_transpose(x) + self.bias)


batch_size = 16
in_channels = 32
out_channels = 16
kernel_size = 4
height = 32
width = 32


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
