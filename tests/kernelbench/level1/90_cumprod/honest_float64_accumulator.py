import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumprod_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, ROWS: tl.constexpr):
    # one running product per row in float64, rounded to float32 on store: more accurate than the reference
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    mask = rows < n_rows
    off = rows.to(tl.int64) * n_cols
    acc = tl.full([ROWS], 1.0, tl.float64)
    for col in range(0, n_cols):
        x = tl.load(x_ptr + off + col, mask=mask, other=1.0).to(tl.float64)
        acc = acc * x
        tl.store(y_ptr + off + col, acc.to(tl.float32), mask=mask)


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
        ROWS = 64
        cumprod_rows_kernel[(triton.cdiv(n_rows, ROWS),)](x2, y2, n_rows, n_cols, ROWS=ROWS)
        return y2.view(xt.shape).movedim(-1, dim)
