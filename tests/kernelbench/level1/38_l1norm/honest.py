import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l1_normalize_kernel(x_ptr, y_ptr, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    row_off = rows.to(tl.int64)[:, None] * n_cols
    cols = tl.arange(0, BLOCK)[None, :]
    # mean of |x| over the row
    acc = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = row_mask[:, None] & (start + cols < n_cols)
        x = tl.load(x_ptr + row_off + start + cols, mask=mask, other=0.0).to(tl.float32)
        acc += tl.abs(x)
    mean_abs = tl.sum(acc, axis=1) / n_cols
    inv = 1.0 / tl.where(row_mask, mean_abs, 1.0)
    for start in range(0, n_cols, BLOCK):
        mask = row_mask[:, None] & (start + cols < n_cols)
        x = tl.load(x_ptr + row_off + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row_off + start + cols, x * inv[:, None], mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # normalise over dim 1: move it last and treat everything else as rows
        xt = x.movedim(1, -1).contiguous()
        n_cols = xt.shape[-1]
        x2 = xt.view(-1, n_cols)
        n_rows = x2.shape[0]
        y2 = torch.empty_like(x2)
        BLOCK = min(triton.next_power_of_2(n_cols), 1024)
        ROWS = max(1, 4096 // BLOCK)
        grid = (triton.cdiv(n_rows, ROWS),)
        l1_normalize_kernel[grid](x2, y2, n_rows, n_cols, ROWS=ROWS, BLOCK=BLOCK)
        return y2.view(xt.shape).movedim(-1, 1)
