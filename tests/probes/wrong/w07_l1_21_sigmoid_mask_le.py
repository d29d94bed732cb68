# Task: level1/21_Sigmoid
# Bug: off-by-one mask `offs <= n` instead of `offs < n`: every launch reads one element past
#      the input and WRITES one element past the end of the output. The output's own n values
#      are all right.
# Wrong on: every n that is not a multiple of BLOCK=1,024 (then the last program's lane
#      offs == n is live): one float is stored past the output's end. Invisible in the output's
#      values; it corrupts whatever lies next to the output (on a GPU the caching allocator
#      packs tensors into shared segments at 512-byte granularity, so the neighbour can be a
#      live tensor; with an output that is a view into a larger buffer it is that buffer's data).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sigmoid_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs <= n                                   # BUG: off by one
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, 1.0 / (1.0 + tl.exp(-x)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        sigmoid_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
