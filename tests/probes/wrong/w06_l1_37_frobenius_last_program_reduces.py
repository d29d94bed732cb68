# Task: level1/37_FrobeniusNorm_ (x / ||x||_F)
# Bug: one kernel writes per-block partial sums of squares and lets the program with the
#      highest id add the partials up, assuming it runs after every other program. There is no
#      atomic counter or fence: on a GPU programs run concurrently and in any order, so the last
#      program reads partials not yet written (zeros) -> norm too small. Triton's CPU
#      interpreter runs programs in order 0..n-1, so there it is exact.
# Wrong on: a GPU, any input of more than one block (numel > 4,096), e.g. the task's own sizes.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sumsq_kernel(x_ptr, partial_ptr, norm_ptr, n, BLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(partial_ptr + pid, tl.sum(x * x, axis=0))
    if pid == nprog - 1:                               # BUG: "last" program is not last to finish
        acc = tl.zeros((RBLOCK,), dtype=tl.float32)
        for s in range(0, nprog, RBLOCK):
            o = s + tl.arange(0, RBLOCK)
            acc += tl.load(partial_ptr + o, mask=o < nprog, other=0.0)
        tl.store(norm_ptr, tl.sqrt(tl.sum(acc, axis=0)))


@triton.jit
def scale_kernel(x_ptr, y_ptr, norm_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    nrm = tl.load(norm_ptr)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m, other=0.0) / nrm, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.numel()
        BLOCK = 4096
        nb = triton.cdiv(n, BLOCK)
        partial = torch.zeros(nb, device=x.device, dtype=torch.float32)
        norm = torch.zeros(1, device=x.device, dtype=torch.float32)
        sumsq_kernel[(nb,)](x, partial, norm, n, BLOCK=BLOCK, RBLOCK=1024)
        y = torch.empty_like(x)
        scale_kernel[(nb,)](x, y, norm, n, BLOCK=BLOCK)
        return y
