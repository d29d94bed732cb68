# Task: level1/27 SELU. Style: libdevice expm1 imported from triton.language.extra, constants as
# module-level tl.constexpr, tl.where select, wrapper function outside the class.
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra import libdevice

SELU_ALPHA = tl.constexpr(1.6732632423543772848170429916717)
SELU_SCALE = tl.constexpr(1.0507009873554804934193349852946)


@triton.jit
def selu_kernel(x_ptr, y_ptr, numel, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    idx = pid * BLOCK + tl.arange(0, BLOCK)
    valid = idx < numel
    x = tl.load(x_ptr + idx, mask=valid, other=0.0)
    neg = SELU_ALPHA * libdevice.expm1(tl.minimum(x, 0.0))
    y = SELU_SCALE * tl.where(x > 0.0, x, neg)
    tl.store(y_ptr + idx, y, mask=valid)


def triton_selu(x: torch.Tensor) -> torch.Tensor:
    xc = x.contiguous()
    y = torch.empty_like(xc)
    numel = xc.numel()
    BLOCK = 512
    selu_kernel[(triton.cdiv(numel, BLOCK),)](xc, y, numel, BLOCK=BLOCK)
    return y


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return triton_selu(x)
