import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim_kernel(x_ptr, y_ptr, n_red, n_inner,
                   BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    # x viewed as (outer, n_red, n_inner); y is (outer, n_inner)
    o = tl.program_id(0).to(tl.int64)
    pi = tl.program_id(1)
    r = tl.arange(0, BLOCK_R)[:, None]
    i = pi * BLOCK_I + tl.arange(0, BLOCK_I)[None, :]
    imask = i < n_inner
    base = x_ptr + o * n_red * n_inner
    acc = tl.zeros([BLOCK_R, BLOCK_I], tl.float32)
    for r0 in range(0, n_red - BLOCK_R + 1, BLOCK_R):
        mask = (r0 + r < n_red) & imask
        x = tl.load(base + (r0 + r) * n_inner + i, mask=mask, other=0.0).to(tl.float32)
        acc += x
    total = tl.sum(acc, axis=0)
    i1 = pi * BLOCK_I + tl.arange(0, BLOCK_I)
    tl.store(y_ptr + o * n_inner + i1, total, mask=i1 < n_inner)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = self.dim % x.dim()
        x = x.contiguous()
        shape = list(x.shape)
        n_red = shape[dim]
        n_outer = 1
        for s in shape[:dim]:
            n_outer *= s
        n_inner = 1
        for s in shape[dim + 1:]:
            n_inner *= s
        out_shape = shape[:dim] + [1] + shape[dim + 1:]
        y = torch.empty(out_shape, dtype=x.dtype, device=x.device)
        BLOCK_I = min(triton.next_power_of_2(n_inner), 256)
        BLOCK_R = min(triton.next_power_of_2(n_red), max(1, 4096 // BLOCK_I))
        grid = (n_outer, triton.cdiv(n_inner, BLOCK_I))
        sum_dim_kernel[grid](x, y, n_red, n_inner, BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I)
        return y
