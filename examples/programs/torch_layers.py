"""A small torch workload: a linear layer and a softmax, each in an NVTX range."""

import nvtx
import torch

layer = torch.nn.Linear(1024, 1024, device="cuda")
x = torch.randn(4096, 1024, device="cuda")
with torch.no_grad():
    layer(x).softmax(dim=-1)
    torch.cuda.synchronize()
    with nvtx.annotate("linear"):
        h = layer(x)
    torch.cuda.nvtx.range_push("softmax")
    p = h.softmax(dim=-1)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
print("rows", p.shape[0])
