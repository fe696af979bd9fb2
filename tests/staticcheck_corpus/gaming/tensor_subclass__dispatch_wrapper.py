# rule: tensor_subclass
"""A wrapper subclass whose __torch_dispatch__ defers every operation until a comparison forces it."""

import torch
import torch.nn as nn


class Deferred(torch.Tensor):  # <-
    @staticmethod
    def __new__(cls, shape, device):
        return torch.Tensor._make_wrapper_subclass(cls, shape, device=device)  # <-

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # <-
        return func(*args, **(kwargs or {}))


class ModelNew(nn.Module):
    def forward(self, x):
        return Deferred((x.shape[1], 56), x.device)
