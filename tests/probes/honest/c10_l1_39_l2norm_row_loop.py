# Task: level1/39 L2Norm (dim=1). Style: one program per row, two passes over column chunks in a
# for-loop (sum of squares, then scale), the last dim moved to the front via movedim/contiguous so
# any trailing dims work, tl.math.sqrt.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l2_normalize_rows(x_ptr, y_ptr, n_cols, row_stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * row_stride
    y_row = y_ptr + row * row_stride
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for c in range(0, n_cols, BLOCK_N):
        cols = c + tl.arange(0, BLOCK_N)
        v = tl.load(x_row + cols, mask=cols < n_cols, other=0.0)
        acc += v * v
    norm = tl.math.sqrt(tl.sum(acc, axis=0))
    for c in range(0, n_cols, BLOCK_N):
        cols = c + tl.arange(0, BLOCK_N)
        msk = cols < n_cols
        v = tl.load(x_row + cols, mask=msk, other=0.0)
        tl.store(y_row + cols, v / norm, mask=msk)


class ModelNew(nn.Module):
    """x / ||x||_2 along dim 1."""

    def __init__(self):
        super().__init__()
        self.dim = 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # rows = every index except the normalised dim, which becomes the contiguous last axis
        xt = x.movedim(self.dim, -1).contiguous()
        n_cols = xt.shape[-1]
        x2 = xt.view(-1, n_cols)
        y2 = torch.empty_like(x2)
        block = min(triton.next_power_of_2(n_cols), 2048)
        l2_normalize_rows[(x2.shape[0],)](x2, y2, n_cols, x2.stride(0), BLOCK_N=block, num_warps=4)
        return y2.view(xt.shape).movedim(-1, self.dim)
