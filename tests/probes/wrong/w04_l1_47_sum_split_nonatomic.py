# Task: level1/47_Sum_reduction_over_a_dimension (sum over dim=1, keepdim)
# Bug: split reduction -- programs each sum an 8-row slice of the reduced dimension and add
#      their partial into the output with a plain load + add + store instead of tl.atomic_add.
#      Programs that share an output tile race: on a GPU they run concurrently and updates are
#      lost. Triton's CPU interpreter runs programs one after another, so there it is exact.
# Wrong on: a GPU, any size with more than one split (dim1 > 8: every kgym CPU variant but
#      size_long, and the task's own 128 x 4096 x 4095). Never wrong under TRITON_INTERPRET=1.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_split_kernel(x_ptr, out_ptr, R, N, sxb, sxr, rows_per_split,
                     BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    pn = tl.program_id(1)
    ps = tl.program_id(2)
    cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = cols < N
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    r0 = ps * rows_per_split
    for r in range(r0, r0 + rows_per_split, BLOCK_R):
        rows = r + tl.arange(0, BLOCK_R)
        rmask = (rows < R) & (rows < r0 + rows_per_split)
        x = tl.load(x_ptr + b * sxb + rows[:, None] * sxr + cols[None, :],
                    mask=rmask[:, None] & cmask[None, :], other=0.0)
        acc += tl.sum(x, axis=0)
    o = out_ptr + b * N + cols
    prev = tl.load(o, mask=cmask, other=0.0)        # BUG: read-modify-write, not atomic
    tl.store(o, prev + acc, mask=cmask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert self.dim == 1 and x.dim() == 3
        x = x.contiguous()
        B, R, N = x.shape
        out = torch.zeros((B, 1, N), device=x.device, dtype=x.dtype)
        rows_per_split = 8
        split = triton.cdiv(R, rows_per_split)
        BLOCK_N = 64
        grid = (B, triton.cdiv(N, BLOCK_N), split)
        sum_split_kernel[grid](x, out, R, N, x.stride(0), x.stride(1), rows_per_split,
                               BLOCK_R=16, BLOCK_N=BLOCK_N)
        return out
