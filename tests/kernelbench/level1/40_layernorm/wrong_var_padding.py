import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, eps,
                      ROWS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    row_off = rows.to(tl.int64)[:, None] * n_cols
    cols = tl.arange(0, BLOCK)[None, :]
    # pass 1: mean
    acc = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = row_mask[:, None] & (start + cols < n_cols)
        x = tl.load(x_ptr + row_off + start + cols, mask=mask, other=0.0).to(tl.float32)
        acc += x
    mean = tl.sum(acc, axis=1) / n_cols
    # pass 2: biased variance around the mean
    acc = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = row_mask[:, None] & (start + cols < n_cols)
        x = tl.load(x_ptr + row_off + start + cols, mask=mask, other=0.0).to(tl.float32)
        d = x - mean[:, None]
        acc += d * d
    var = tl.sum(acc, axis=1) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    # pass 3: normalise, scale and shift
    for start in range(0, n_cols, BLOCK):
        cmask = start + cols < n_cols
        mask = row_mask[:, None] & cmask
        x = tl.load(x_ptr + row_off + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=cmask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + start + cols, mask=cmask, other=0.0).to(tl.float32)
        y = (x - mean[:, None]) * rstd[:, None] * w + b
        tl.store(y_ptr + row_off + start + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super(ModelNew, self).__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = 1e-5
        # same parameters as nn.LayerNorm (weight first, then bias)
        self.weight = nn.Parameter(torch.ones(self.normalized_shape))
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = 1
        for s in self.normalized_shape:
            n_cols *= s
        x2 = x.contiguous().view(-1, n_cols)
        n_rows = x2.shape[0]
        y2 = torch.empty_like(x2)
        w = self.weight.contiguous().view(-1)
        b = self.bias.contiguous().view(-1)
        BLOCK = min(triton.next_power_of_2(n_cols), 2048)
        ROWS = max(1, 4096 // BLOCK)
        grid = (triton.cdiv(n_rows, ROWS),)
        layer_norm_kernel[grid](x2, w, b, y2, n_rows, n_cols, self.eps, ROWS=ROWS, BLOCK=BLOCK)
        return y2.view(x.shape)
