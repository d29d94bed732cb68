# Task: level1/49 Max over a dimension. Style: tl.reduce with a @triton.jit combine function,
# reduced dim permuted to the end and made contiguous, rows processed in 2-D tiles
# (BLOCK_ROWS x BLOCK_COLS) with a running maximum, -inf padding.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def row_max_kernel(x_ptr, out_ptr, n_rows, n_cols,
                   BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    row_mask = rows < n_rows
    running = tl.full([BLOCK_ROWS], float("-inf"), tl.float32)
    for c0 in range(0, n_cols, BLOCK_COLS):
        cols = c0 + tl.arange(0, BLOCK_COLS)
        mask = row_mask[:, None] & (cols[None, :] < n_cols)
        tile = tl.load(x_ptr + rows[:, None].to(tl.int64) * n_cols + cols[None, :], mask=mask,
                       other=float("-inf"))
        running = tl.maximum(running, tl.reduce(tile, 1, _max_combine))
    tl.store(out_ptr + rows, running, mask=row_mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        xt = torch.movedim(x, self.dim, -1).contiguous()
        n_cols = xt.shape[-1]
        out_shape = xt.shape[:-1]
        n_rows = xt.numel() // n_cols
        out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
        BR, BC = 16, 128
        row_max_kernel[(triton.cdiv(n_rows, BR),)](xt, out, n_rows, n_cols, BLOCK_ROWS=BR, BLOCK_COLS=BC)
        return out
