"""A plain harness, as one would write it without profsvc: import, warm up, one call in NVTX range `profsvc`.

ncu --set full --nvtx --nvtx-include profsvc/ python benchmarks/plain_harness.py PROBLEM.py
"""

import importlib
import sys
from pathlib import Path

import torch

path = Path(sys.argv[1])
sys.path.insert(0, str(path.parent))
module = importlib.import_module(path.stem)
torch.manual_seed(0)
model = module.ModelNew(*module.get_init_inputs()).cuda().eval()
inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
with torch.no_grad():
    model(*inputs)
    for _ in range(3):
        model(*inputs)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("profsvc")
    model(*inputs)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
