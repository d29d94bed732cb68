# Task: level1/53 Min over a dimension. Style: tl.make_block_ptr over the (R, INNER) slab of each outer
# index, tl.advance down the reduced axis, boundary_check + padding_option="zero" with the padded rows
# replaced by +inf through tl.where, 2-D grid.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def min_dim_kernel(x_ptr, out_ptr, R, INNER, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    pid_o = tl.program_id(0)
    pid_i = tl.program_id(1)
    slab = x_ptr + pid_o.to(tl.int64) * R * INNER
    bp = tl.make_block_ptr(base=slab, shape=(R, INNER), strides=(INNER, 1),
                           offsets=(0, pid_i * BLOCK_I), block_shape=(BLOCK_R, BLOCK_I), order=(1, 0))
    acc = tl.full((BLOCK_I,), float("inf"), dtype=tl.float32)
    r_offs = tl.arange(0, BLOCK_R)
    for r0 in range(0, R, BLOCK_R):
        tile = tl.load(bp, boundary_check=(0, 1), padding_option="zero")
        tile = tl.where((r0 + r_offs)[:, None] < R, tile, float("inf"))
        acc = tl.minimum(acc, tl.min(tile, axis=0))
        bp = tl.advance(bp, (BLOCK_R, 0))
    cols = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    tl.store(out_ptr + pid_o.to(tl.int64) * INNER + cols, acc, mask=cols < INNER)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.dim if self.dim >= 0 else x.dim() + self.dim
        x = x.contiguous()
        outer = 1
        for s in x.shape[:d]:
            outer *= s
        inner = 1
        for s in x.shape[d + 1:]:
            inner *= s
        R = x.shape[d]
        out = torch.empty(x.shape[:d] + x.shape[d + 1:], device=x.device, dtype=x.dtype)
        BLOCK_R, BLOCK_I = 32, 64
        min_dim_kernel[(outer, triton.cdiv(inner, BLOCK_I))](x, out, R, inner,
                                                            BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I)
        return out
