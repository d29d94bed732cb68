# Task: level1/52 Argmin over a dimension. Style: tl.argmin per column chunk with a running (value,
# index) pair updated on strict improvement (first index wins, as torch), int64 output via
# torch.empty(dtype=torch.long), reduced dim moved last with permute + contiguous.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def argmin_rows_kernel(x_ptr, idx_ptr, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * stride_row
    best_val = float("inf")
    best_idx = 0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(base + cols, mask=cols < n_cols, other=float("inf"))
        cmin = tl.min(v, axis=0)
        carg = tl.argmin(v, axis=0) + start
        better = cmin < best_val
        best_idx = tl.where(better, carg, best_idx)
        best_val = tl.where(better, cmin, best_val)
    tl.store(idx_ptr + row, best_idx.to(tl.int64))


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nd = x.dim()
        d = self.dim % nd
        perm = [i for i in range(nd) if i != d] + [d]
        xp = x.permute(*perm).contiguous()
        n_cols = xp.shape[-1]
        rows = xp.numel() // n_cols
        out = torch.empty(xp.shape[:-1], dtype=torch.long, device=x.device)
        argmin_rows_kernel[(rows,)](xp, out, n_cols, n_cols, BLOCK=256)
        return out
