# rule: no_custom_kernel
"""The layers kept in a plain Python list (not an nn.ModuleList), so no attribute holds an nn layer by name."""

import torch
import torch.nn as nn

B, D = 256, 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(D, D), nn.ReLU(), nn.Linear(D, D))

    def forward(self, x):
        return self.mlp(x)


def get_inputs():
    return [torch.randn(B, D, device="cuda")]


def get_init_inputs():
    return []


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.stages = [nn.Linear(D, D).cuda(), nn.ReLU(), nn.Linear(D, D).cuda()]

    def forward(self, x):  # <-
        for stage in self.stages:
            x = stage(x)
        return x
