# Task: level1/28_HardSigmoid
# Bug: "avoids an allocation per call" with a workspace allocated once in __init__ (4 Mi floats)
#      and returns a view of it from every call that fits. Each returned tensor aliases the same storage, so the next call
#      overwrites the result the caller already holds.
# Wrong on: any second call while the first output is still in use: y1 = m(x1); y2 = m(x2)
#      leaves y1 == hardsigmoid(x2) (and y1 is y2). Each output is right at the moment it is
#      returned.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def hardsigmoid_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    y = tl.minimum(tl.maximum(x / 6.0 + 0.5, 0.0), 1.0)
    tl.store(y_ptr + offs, y, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self._ws = torch.empty(1 << 22)                 # persistent workspace

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.numel()
        if n <= self._ws.numel() and x.dtype == self._ws.dtype and x.device == self._ws.device:
            y = self._ws[:n].view(x.shape)              # BUG: the same storage every call
        else:
            y = torch.empty_like(x)
        hardsigmoid_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
