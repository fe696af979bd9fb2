import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Cross-entropy over class logits."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(predictions, targets)


batch_size = 4096
num_classes = 1000


def get_inputs():
    predictions = torch.randn(batch_size, num_classes)
    targets = torch.randint(0, num_classes, (batch_size,))
    return [predictions, targets]


def get_init_inputs():
    return []
