# Task: level1/24_LogSoftmax (dim=1)
# Bug: one-pass kernel with BLOCK = min(next_pow2(n_cols), 32768) -- the cap is there to keep
#      the block compilable -- and no loop over the rest of the row: columns past the first
#      32,768 are never read (missing from max and sum) nor written.
# Wrong on: rows longer than 32,768 -- including the task's own 393,216-wide rows. Exact for
#      rows of up to 32,768 columns.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def logsoftmax_kernel(x_ptr, y_ptr, n, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    o = tl.arange(0, BLOCK)
    m = o < n
    x = tl.load(x_ptr + row * stride + o, mask=m, other=-float('inf'))
    mx = tl.max(x, axis=0)
    e = tl.where(m, tl.exp(x - mx), 0.0)
    lse = tl.log(tl.sum(e, axis=0)) + mx
    tl.store(y_ptr + row * stride + o, x - lse, mask=m)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.shape[1]
        BLOCK = min(triton.next_power_of_2(n), 32768)  # BUG: silently truncates longer rows
        logsoftmax_kernel[(x.shape[0],)](x, y, n, x.stride(0), BLOCK=BLOCK)
        return y
