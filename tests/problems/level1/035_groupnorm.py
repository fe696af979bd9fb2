import torch
import torch.nn as nn


class Model(nn.Module):
    """Group normalization, 8 groups."""

    def __init__(self, num_features: int, num_groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)


batch_size = 16
features = 64
num_groups = 8
dim1 = 128
dim2 = 128


def get_inputs():
    x = torch.randn(batch_size, features, dim1, dim2)
    return [x]


def get_init_inputs():
    return [features, num_groups]
