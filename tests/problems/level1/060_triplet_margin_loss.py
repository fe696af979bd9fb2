import torch
import torch.nn as nn


class Model(nn.Module):
    """Triplet margin loss over anchors, positives and negatives."""

    def __init__(self, margin: float = 1.0):
        super().__init__()
        self.loss_fn = nn.TripletMarginLoss(margin=margin)

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(anchor, positive, negative)


batch_size = 128
dim = 4096


def get_inputs():
    anchor = torch.randn(batch_size, dim)
    positive = torch.randn(batch_size, dim)
    negative = torch.randn(batch_size, dim)
    return [anchor, positive, negative]


def get_init_inputs():
    return [1.0]
