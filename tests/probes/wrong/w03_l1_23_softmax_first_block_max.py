# Task: level1/23_Softmax (softmax over dim=1)
# Bug: the "stabilising" max is taken over the first 1,024 columns of the row only, not the whole
#      row. Mathematically softmax is shift-invariant, so this is exact until some value in a
#      later block exceeds the first block's max by more than ~88.7: exp() then overflows to inf
#      and the row becomes NaN / 0.
# Wrong on: rows longer than 1,024 whose spread between the first block and the rest exceeds
#      ~88 (e.g. logits of scale ~100: randn * 100 over a row of 4,096+; or any row whose large
#      values sit after the first 1,024 columns).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    xr = x_ptr + row * stride
    yr = y_ptr + row * stride
    offs = tl.arange(0, BLOCK)
    first = tl.load(xr + offs, mask=offs < n_cols, other=-float('inf'))
    m = tl.max(first, axis=0)                       # BUG: max of the first block only
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        o = start + offs
        x = tl.load(xr + o, mask=o < n_cols, other=-float('inf'))
        acc += tl.exp(x - m)
    denom = tl.sum(acc, axis=0)
    for start in range(0, n_cols, BLOCK):
        o = start + offs
        x = tl.load(xr + o, mask=o < n_cols, other=-float('inf'))
        tl.store(yr + o, tl.exp(x - m) / denom, mask=o < n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=1024)
        return y
