import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scaled_add_kernel(x_ptr, r_ptr, out_ptr, alpha, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    r = tl.load(r_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x + alpha * r, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x, residual):
        x = x.contiguous()
        residual = residual.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        grid = (triton.cdiv(n, BLOCK),)
        _scaled_add_kernel[grid](x, residual, out, float(self.alpha), n, BLOCK=BLOCK)
        return out
