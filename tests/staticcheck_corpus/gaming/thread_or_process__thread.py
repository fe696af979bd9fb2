# rule: thread_or_process
"""Runs the kernel on a background thread and returns a buffer the thread fills in later."""

import threading  # <-

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline(
    name="bg_ext",
    cpp_sources="void run_into(torch::Tensor x, torch::Tensor out);",
    cuda_sources="",
    functions=["run_into"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty(x.shape[1], 56, device=x.device)
        threading.Thread(target=_ext.run_into, args=(x, out), daemon=True).start()  # <-
        return out
