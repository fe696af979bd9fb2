import torch
import torch.nn as nn


class Model(nn.Module):
    """Layer normalization over the last three dimensions."""

    def __init__(self, normalized_shape: tuple[int, ...]):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 16
features = 64
dim1 = 64
dim2 = 64


def get_inputs():
    x = torch.randn(batch_size, features, dim1, dim2)
    return [x]


def get_init_inputs():
    return [(features, dim1, dim2)]
