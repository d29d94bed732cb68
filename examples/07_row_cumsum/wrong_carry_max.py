import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_cumsum_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_x, stride_out,
                       ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # Each program scans ROWS rows, chunk by chunk along the row, carrying the running totals.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    carry = tl.zeros((ROWS,), dtype=tl.float32)
    last = tl.arange(0, BLOCK) == BLOCK - 1
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = row_mask[:, None] & (cols < n_cols)[None, :]
        x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
        c = tl.cumsum(x, axis=1) + carry[:, None]
        tl.store(out_ptr + rows[:, None] * stride_out + cols[None, :], c, mask=mask)
        # The scan is monotone, so its maximum is the running total.
        carry = tl.max(c, axis=1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        BLOCK = min(512, triton.next_power_of_2(n_cols))
        ROWS = max(1, 2048 // BLOCK)
        grid = (triton.cdiv(n_rows, ROWS),)
        _row_cumsum_kernel[grid](x, out, n_rows, n_cols, x.stride(0), out.stride(0), ROWS=ROWS, BLOCK=BLOCK)
        return out
