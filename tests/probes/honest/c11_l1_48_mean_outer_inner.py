# Task: level1/48 Mean over a dimension. Style: any reduced dim handled by viewing the input as
# (outer, R, inner) with no copy; 2-D grid (outer, inner blocks) via tl.program_id(1); loop over R;
# math.prod for the shape arithmetic; negative dims normalised.
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mean_mid_kernel(x_ptr, out_ptr, R, INNER, inv_r, BLOCK_I: tl.constexpr):
    o = tl.program_id(0)
    ib = tl.program_id(1)
    inner = ib * BLOCK_I + tl.arange(0, BLOCK_I)
    m = inner < INNER
    base = x_ptr + o.to(tl.int64) * R * INNER
    acc = tl.zeros([BLOCK_I], dtype=tl.float32)
    for r in range(0, R):
        acc += tl.load(base + r * INNER + inner, mask=m, other=0.0)
    tl.store(out_ptr + o.to(tl.int64) * INNER + inner, acc * inv_r, mask=m)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.dim if self.dim >= 0 else self.dim + x.dim()
        shape = list(x.shape)
        outer = math.prod(shape[:d])
        R = shape[d]
        inner = math.prod(shape[d + 1:])
        xc = x.contiguous()
        out_shape = shape[:d] + shape[d + 1:]
        out = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        BLOCK_I = 128
        grid = (outer, triton.cdiv(inner, BLOCK_I))
        mean_mid_kernel[grid](xc, out, R, inner, 1.0 / R, BLOCK_I=BLOCK_I)
        return out
