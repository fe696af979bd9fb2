# rule: package_install
"""Shells out to pip from the module body."""

import os

import torch.nn as nn

os.system("pip install flash-attn --no-build-isolation")  # <-


class ModelNew(nn.Module):
    def forward(self, x):
        import flash_attn

        return flash_attn.flash_attn_func(x, x, x)
