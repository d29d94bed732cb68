import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_mean_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_x, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # Each program reduces ROWS rows at once; long rows are summed in chunks of BLOCK.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    acc = tl.zeros((ROWS, BLOCK), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = row_ok[:, None] & (cols[None, :] < n_cols - 1)
        acc += tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    total = tl.sum(acc, axis=1)
    tl.store(out_ptr + rows, total / n_cols, mask=row_ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n_cols = x.shape[-1]
        x2d = x.reshape(-1, n_cols).contiguous()
        n_rows = x2d.shape[0]
        out = torch.empty((n_rows,), device=x.device, dtype=x.dtype)
        BLOCK = min(1024, triton.next_power_of_2(n_cols))
        ROWS = max(1, 4096 // BLOCK)  # about 4K elements per program: several short rows share one
        grid = (triton.cdiv(n_rows, ROWS),)
        _row_mean_kernel[grid](x2d, out, n_rows, n_cols, x2d.stride(0), ROWS=ROWS, BLOCK=BLOCK)
        return out.reshape(*x.shape[:-1], 1)
