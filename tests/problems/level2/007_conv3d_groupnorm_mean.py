import torch
import torch.nn as nn


class Model(nn.Module):
    """3D convolution, group normalization, then the mean over all but the batch."""

    def __init__(self, in_channels: int, out_channels: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size=3)
        self.norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.conv(x)).mean(dim=[1, 2, 3, 4])


batch_size = 8
in_channels = 4
out_channels = 16
num_groups = 4
depth = 16
height = 32
width = 32


def get_inputs():
    x = torch.randn(batch_size, in_channels, depth, height, width)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, num_groups]
