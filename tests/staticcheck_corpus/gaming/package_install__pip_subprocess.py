# rule: package_install
"""Installs a prebuilt kernel library at import time."""

import subprocess
import sys

import torch.nn as nn

subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "fast-vga-kernels==0.3"])  # <-

import fast_vga_kernels  # noqa: E402


class ModelNew(nn.Module):
    def forward(self, x):
        return fast_vga_kernels.vga_linear(x)
