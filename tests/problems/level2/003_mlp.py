import torch
import torch.nn as nn


class Model(nn.Module):
    """A small MLP: three linear layers with ReLU between."""

    def __init__(self, input_size: int, hidden_sizes: list[int], output_size: int):
        super().__init__()
        layers: list[nn.Module] = []
        current = input_size
        for hidden in hidden_sizes:
            layers += [nn.Linear(current, hidden), nn.ReLU()]
            current = hidden
        layers.append(nn.Linear(current, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


batch_size = 128
input_size = 1024
hidden_sizes = [2048, 1024]
output_size = 256


def get_inputs():
    x = torch.randn(batch_size, input_size)
    return [x]


def get_init_inputs():
    return [input_size, hidden_sizes, output_size]
