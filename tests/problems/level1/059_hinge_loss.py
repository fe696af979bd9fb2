import torch
import torch.nn as nn


class Model(nn.Module):
    """Hinge loss against targets of -1 and 1."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


batch_size = 128
dim = 4096


def get_inputs():
    predictions = torch.randn(batch_size, dim)
    targets = torch.randint(0, 2, (batch_size, dim)).float() * 2 - 1
    return [predictions, targets]


def get_init_inputs():
    return []
