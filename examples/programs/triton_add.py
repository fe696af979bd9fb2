"""Vector add in Triton: compiled and warmed up first, then one call in an NVTX range."""

import nvtx
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out


x = torch.randn(1 << 24, device="cuda")
y = torch.randn(1 << 24, device="cuda")
add(x, y)
torch.cuda.synchronize()


@nvtx.annotate("vector_add", domain="demo")
def measured():
    return add(x, y)


out = measured()
torch.cuda.synchronize()
assert torch.allclose(out, x + y)
print("max", float(out.max()))
