import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_mean_kernel(x_ptr, out_ptr, n_cols, stride_x, BLOCK: tl.constexpr):
    # One program per row; long rows are summed in chunks of BLOCK.
    row = tl.program_id(0)
    base = x_ptr + row * stride_x
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    count = 0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(base + cols, mask=cols < n_cols, other=0.0)
        count += BLOCK
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + row, total / count)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n_cols = x.shape[-1]
        x2d = x.reshape(-1, n_cols).contiguous()
        n_rows = x2d.shape[0]
        out = torch.empty((n_rows,), device=x.device, dtype=x.dtype)
        BLOCK = min(1024, triton.next_power_of_2(n_cols))
        _row_mean_kernel[(n_rows,)](x2d, out, n_cols, x2d.stride(0), BLOCK=BLOCK)
        return out.reshape(*x.shape[:-1], 1)
