import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumprod_bf16_tail_kernel(x_ptr, y_ptr, n_rows, n_cols, ROWS: tl.constexpr):
    # a running product in float32 while it is above 2^-20 (every such element lies above atol = 1e-4 x RMS, where the
    # usual tolerance checks it); below, the running product is carried in bfloat16 (rounded after every multiply), the
    # "tiny elements in half precision" shortcut of threat model row 27.  bf16's relative step 2^-8 compounds over the
    # ~80 products of a row's tail to more than the small-elements bound 2^-6 of the float64 value: incorrect
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    mask = rows < n_rows
    off = rows.to(tl.int64) * n_cols
    acc = tl.full([ROWS], 1.0, tl.float32)
    for col in range(0, n_cols):
        x = tl.load(x_ptr + off + col, mask=mask, other=1.0).to(tl.float32)
        acc = acc * x
        low = acc.to(tl.bfloat16).to(tl.float32)
        acc = tl.where(tl.abs(acc) < 9.5367431640625e-07, low, acc)
        tl.store(y_ptr + off + col, acc, mask=mask)


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
        cumprod_bf16_tail_kernel[(triton.cdiv(n_rows, ROWS),)](x2, y2, n_rows, n_cols, ROWS=ROWS)
        return y2.view(xt.shape).movedim(-1, dim)
