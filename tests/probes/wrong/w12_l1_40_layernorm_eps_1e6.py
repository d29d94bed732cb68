# Task: level1/40_LayerNorm (nn.LayerNorm over (features, dim1, dim2), eps = 1e-5)
# Bug: hard-codes eps = 1e-6 (the common transformer default) instead of the module's 1e-5.
# Wrong on: inputs whose normalised variance is not >> 1e-5: e.g. rand * 1e-3 (variance ~1e-7,
#      where eps dominates); at variance ~0.08 (torch.rand) the error is ~5e-5 relative.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def ln_kernel(x_ptr, y_ptr, w_ptr, b_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = row * n
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        o = start + tl.arange(0, BLOCK)
        s += tl.load(x_ptr + base + o, mask=o < n, other=0.0)
    mean = tl.sum(s, axis=0) / n
    v = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        o = start + tl.arange(0, BLOCK)
        m = o < n
        d = tl.where(m, tl.load(x_ptr + base + o, mask=m, other=0.0) - mean, 0.0)
        v += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(v, axis=0) / n + 1e-6)     # BUG: eps 1e-6, module uses 1e-5
    for start in range(0, n, BLOCK):
        o = start + tl.arange(0, BLOCK)
        m = o < n
        x = tl.load(x_ptr + base + o, mask=m, other=0.0)
        w = tl.load(w_ptr + o, mask=m, other=1.0)
        b = tl.load(b_ptr + o, mask=m, other=0.0)
        tl.store(y_ptr + base + o, (x - mean) * rstd * w + b, mask=m)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super(ModelNew, self).__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = self.ln.weight.numel()
        ln_kernel[(x.numel() // n,)](x, y, self.ln.weight, self.ln.bias, n, BLOCK=1024)
        return y
