# rule: package_install
"""Bootstraps pip, points sys.path at a downloaded wheel and imports it by name."""

import ensurepip  # <-
import importlib
import sys

import torch.nn as nn

ensurepip.bootstrap(upgrade=True)  # <-
sys.path.insert(0, "/tmp/wheels/fast_ops")  # <-
_ops = importlib.import_module("fast_ops")  # <-


class ModelNew(nn.Module):
    def forward(self, x):
        return _ops.vga_linear(x)
