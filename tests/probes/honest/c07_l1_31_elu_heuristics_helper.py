# Task: level1/31 ELU. Style: @triton.heuristics (EVEN_N flag skips the mask), a helper @triton.jit
# device function (accurate expm1 via a Taylor branch near zero), alpha kept as a Python float.
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _expm1(x):
    # exp(x) - 1 without cancellation for small |x|
    small = tl.abs(x) < 0.1
    x2 = x * x
    taylor = x + x2 * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0 + x * (1.0 / 720.0)))))
    return tl.where(small, taylor, tl.exp(x) - 1.0)


@triton.heuristics({"EVEN_N": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def elu_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr, EVEN_N: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN_N:
        x = tl.load(x_ptr + offs)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    y = tl.where(x > 0, x, alpha * _expm1(tl.minimum(x, 0.0)))
    if EVEN_N:
        tl.store(y_ptr + offs, y)
    else:
        tl.store(y_ptr + offs, y, mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = float(alpha)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        block = min(4096, triton.next_power_of_2(max(n, 16)))
        elu_kernel[(math.ceil(n / block),)](x, y, n, self.alpha, BLOCK=block)
        return y
