# Task: level1/91 reverse cumsum. Style: tl.associative_scan with a @triton.jit add combine and
# reverse=True, chunks walked from the end with a running carry, generic dim via movedim/contiguous.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def reverse_cumsum_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    n_chunks = tl.cdiv(n_cols, BLOCK)
    carry = tl.zeros((), dtype=tl.float32)
    for i in range(0, n_chunks):
        start = (n_chunks - 1 - i) * BLOCK
        cols = start + tl.arange(0, BLOCK)
        m = cols < n_cols
        v = tl.load(x_row + cols, mask=m, other=0.0)
        suffix = tl.associative_scan(v, 0, _add, reverse=True)
        tl.store(y_row + cols, suffix + carry, mask=m)
        carry += tl.sum(v, axis=0)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        xm = x.movedim(self.dim, -1).contiguous()
        n_cols = xm.shape[-1]
        rows = xm.numel() // n_cols if n_cols > 0 else 0
        y = torch.empty_like(xm)
        block = min(1024, triton.next_power_of_2(n_cols))
        reverse_cumsum_kernel[(rows,)](xm, y, n_cols, BLOCK=block)
        return y.movedim(-1, self.dim)
