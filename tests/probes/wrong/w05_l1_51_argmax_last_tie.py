# Task: level1/51_Argmax_over_a_dimension (argmax over dim=1)
# Bug: the running comparison is `v >= best`, so among equal maxima the LAST index wins;
#      torch.argmax returns the FIRST. Exact whenever the maximum of a reduction is unique.
# Wrong on: inputs with tied maxima: half precision (fp16/bf16 rows of a few hundred values
#      from rand() tie often), integer-valued or quantised inputs, relu'd / clamped inputs, or
#      large offsets that collapse float32 spacing (rand + 100 has 2^17 values per unit).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def argmax_kernel(x_ptr, out_ptr, R, N, sxb, sxr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    pn = tl.program_id(1)
    cols = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = cols < N
    best = tl.full((BLOCK_N,), -float('inf'), tl.float32)
    idx = tl.zeros((BLOCK_N,), dtype=tl.int64)
    for r in range(0, R):
        v = tl.load(x_ptr + b * sxb + r * sxr + cols, mask=cmask, other=-float('inf'))
        upd = v >= best                               # BUG: ties move to the later index
        best = tl.where(upd, v, best)
        idx = tl.where(upd, r, idx)
    tl.store(out_ptr + b * N + cols, idx, mask=cmask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert self.dim == 1 and x.dim() == 3
        x = x.contiguous()
        B, R, N = x.shape
        out = torch.empty((B, N), device=x.device, dtype=torch.int64)
        BLOCK_N = 64
        argmax_kernel[(B, triton.cdiv(N, BLOCK_N))](x, out, R, N, x.stride(0), x.stride(1),
                                                    BLOCK_N=BLOCK_N)
        return out
