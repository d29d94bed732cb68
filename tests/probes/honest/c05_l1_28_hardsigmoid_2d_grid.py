# Task: level1/28 HardSigmoid. Style: 2-D launch grid over (rows, column blocks) with tl.program_id(1),
# the input viewed as (rows, last_dim), explicit row strides, tl.minimum/tl.maximum clamp.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def hardsigmoid_2d_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_xr, stride_yr,
                          BLOCK_COLS: tl.constexpr):
    row = tl.program_id(0)
    col_block = tl.program_id(1)
    cols = col_block * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xr + cols, mask=mask, other=0.0)
    y = tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0) / 6.0
    tl.store(y_ptr + row * stride_yr + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.block_cols = 1024

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        orig_shape = x.shape
        if x.dim() == 0:
            x2 = x.reshape(1, 1)
        else:
            x2 = x.reshape(-1, orig_shape[-1])
        x2 = x2.contiguous()
        rows, cols = x2.shape
        y2 = torch.empty_like(x2)
        grid = (rows, triton.cdiv(cols, self.block_cols))
        hardsigmoid_2d_kernel[grid](x2, y2, rows, cols, x2.stride(0), y2.stride(0),
                                    BLOCK_COLS=self.block_cols)
        return y2.reshape(orig_shape)
