# Task: level1/48_Mean_reduction_over_a_dimension (mean over dim=1)
# Bug: split reduction accumulating with tl.atomic_add into a float64 scratch buffer that is
#      allocated with torch.empty instead of torch.zeros: the sums start from whatever the
#      allocator hands back. Correct only when that memory happens to be zero (fresh pages).
# Wrong on: any call where the scratch block is recycled memory (a GPU caching allocator after
#      any earlier tensor was freed; a CPU heap chunk reused after a free).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def partial_sum_kernel(x_ptr, acc_ptr, R, N, sxb, sxr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    pn = tl.program_id(1)
    ps = tl.program_id(2)
    cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    cm = cols < N
    rows = ps * ROWS + tl.arange(0, ROWS)
    x = tl.load(x_ptr + b * sxb + rows[:, None] * sxr + cols[None, :],
                mask=(rows < R)[:, None] & cm[None, :], other=0.0)
    tl.atomic_add(acc_ptr + b * N + cols, tl.sum(x, axis=0).to(tl.float64), mask=cm)


@triton.jit
def finish_kernel(acc_ptr, out_ptr, n, R, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    s = tl.load(acc_ptr + offs, mask=m, other=0.0)
    tl.store(out_ptr + offs, (s / R).to(tl.float32), mask=m)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert self.dim == 1 and x.dim() == 3
        x = x.contiguous()
        B, R, N = x.shape
        acc = torch.empty((B, N), device=x.device, dtype=torch.float64)   # BUG: not zeroed
        ROWS, BLOCK_N = 8, 64
        partial_sum_kernel[(B, triton.cdiv(N, BLOCK_N), triton.cdiv(R, ROWS))](
            x, acc, R, N, x.stride(0), x.stride(1), ROWS=ROWS, BLOCK_N=BLOCK_N)
        out = torch.empty((B, N), device=x.device, dtype=torch.float32)
        finish_kernel[(triton.cdiv(B * N, 1024),)](acc, out, B * N, R, BLOCK=1024)
        return out
