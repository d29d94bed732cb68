import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumsum_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # inclusive prefix sum along each row; rows are walked in chunks with a running carry
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    row_off = rows.to(tl.int64)[:, None] * n_cols
    cols = tl.arange(0, BLOCK)[None, :]
    carry = tl.zeros([ROWS], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = row_mask[:, None] & (start + cols < n_cols)
        x = tl.load(x_ptr + row_off + start + cols, mask=mask, other=0.0).to(tl.float32)
        cs = tl.cumsum(x, axis=1) + carry[:, None]
        tl.store(y_ptr + row_off + start + cols, cs, mask=mask)
        # masked lanes load 0, so the last column holds the running total of the row so far
        carry = tl.sum(tl.where(cols == BLOCK - 1, cs, 0.0), axis=1)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        dim = self.dim % x.dim()
        xt = x.movedim(dim, -1).contiguous()
        n_cols = xt.shape[-1]
        x2 = xt.view(-1, n_cols)
        n_rows = x2.shape[0]
        y2 = torch.empty_like(x2)
        BLOCK = min(triton.next_power_of_2(n_cols), 128)
        ROWS = max(1, 4096 // BLOCK)
        grid = (triton.cdiv(n_rows, ROWS),)
        cumsum_rows_kernel[grid](x2, y2, n_rows, n_cols, ROWS=ROWS, BLOCK=BLOCK)
        return y2.view(xt.shape).movedim(-1, dim)
