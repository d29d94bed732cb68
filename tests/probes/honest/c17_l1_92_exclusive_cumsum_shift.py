# Task: level1/92 exclusive cumsum. Style: tl.cumsum per chunk, exclusive value = carry + inclusive - x,
# written into a torch.empty output of the input's shape; row stride passed explicitly; BLOCK from
# triton.next_power_of_2 capped by a module constant.
import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_BLOCK = 2048


@triton.jit
def exclusive_cumsum_kernel(x_ptr, out_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    carry = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n_cols
        v = tl.load(x_ptr + row * stride_x + offs, mask=m, other=0.0)
        inc = tl.cumsum(v, axis=0)
        tl.store(out_ptr + row * stride_o + offs, carry + (inc - v), mask=m)
        carry = carry + tl.sum(v, axis=0)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xt = x.transpose(self.dim, -1).contiguous()
        L = xt.shape[-1]
        x2 = xt.view(-1, L)
        out = torch.empty_like(x2)
        BLOCK = min(MAX_BLOCK, triton.next_power_of_2(L))
        exclusive_cumsum_kernel[(x2.shape[0],)](x2, out, L, x2.stride(0), out.stride(0), BLOCK=BLOCK)
        return out.view(xt.shape).transpose(self.dim, -1)
