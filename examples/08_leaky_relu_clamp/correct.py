import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _leaky_relu_clamp_kernel(x_ptr, out_ptr, n_elements, slope, lo, hi, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.where(x >= 0, x, x * slope)
    y = tl.minimum(tl.maximum(y, lo), hi)
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, negative_slope, clamp_min, clamp_max):
        super().__init__()
        self.negative_slope = negative_slope
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        grid = (triton.cdiv(n, BLOCK),)
        _leaky_relu_clamp_kernel[grid](
            x, out, n, float(self.negative_slope), float(self.clamp_min), float(self.clamp_max),
            BLOCK=BLOCK,
        )
        return out
