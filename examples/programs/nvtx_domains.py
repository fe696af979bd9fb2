"""NVTX ranges in two domains, and a range of the default domain that happens to be named "profsvc".

profsvc profile examples/programs/nvtx_domains.py                          # every range
profsvc profile examples/programs/nvtx_domains.py --nvtx-include "alpha@stage/"   # the matmul
profsvc profile examples/programs/nvtx_domains.py --nvtx-include "beta@stage/"    # the softmax
profsvc profile examples/programs/nvtx_domains.py --nvtx-include "profsvc/"       # the cumsum
"""

import nvtx
import torch

a = torch.randn(2048, 2048, device="cuda")
v = torch.randn(1 << 22, device="cuda")


@nvtx.annotate("stage", domain="beta")
def normalize(scores):
    return scores.softmax(dim=-1)


# Warm-up outside every range: cuBLAS and the kernels' first launches.
(a @ a).softmax(dim=-1).sum()
v.cumsum(0)
torch.cuda.synchronize()
with nvtx.annotate("stage", domain="alpha"):
    product = a @ a
probabilities = normalize(product)
torch.cuda.nvtx.range_push("profsvc")
running = v.cumsum(0)
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print(float(probabilities.sum()), float(running[-1]))
