import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, n_cols, stride_x, stride_out, eps, BLOCK: tl.constexpr):
    # One program per row; the whole row is held in one block.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    ms = tl.sum(x * x, axis=0) / BLOCK
    inv = 1.0 / tl.sqrt(ms + eps)
    tl.store(out_ptr + row * stride_out + cols, x * inv * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))

    def forward(self, x):
        shape = x.shape
        n_cols = shape[-1]
        x2d = x.reshape(-1, n_cols).contiguous()
        out = torch.empty_like(x2d)
        BLOCK = triton.next_power_of_2(n_cols)
        num_warps = 8 if BLOCK >= 2048 else 4
        _rms_norm_kernel[(x2d.shape[0],)](
            x2d, self.weight, out, n_cols, x2d.stride(0), out.stride(0), float(self.eps),
            BLOCK=BLOCK, num_warps=num_warps,
        )
        return out.reshape(shape)
