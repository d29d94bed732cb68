# Task: level1/25 Swish. Style: the kernel is a @staticmethod @triton.jit in the module's class body,
# launched as self._swish_kernel[grid]; tl.sigmoid; a @property for the block size; assert on contiguity
# after .contiguous().
import torch
import torch.nn as nn
import triton
import triton.language as tl


class ModelNew(nn.Module):
    """x * sigmoid(x), computed by a kernel that lives in the class."""

    BLOCK_SIZE = 2048

    def __init__(self):
        super().__init__()

    @staticmethod
    @triton.jit
    def _swish_kernel(x_ptr, y_ptr, n, BLOCK_SIZE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(y_ptr + offs, x * tl.sigmoid(x), mask=m)

    @property
    def block(self):
        return self.BLOCK_SIZE

    def forward(self, x):
        x = x.contiguous()
        assert x.is_contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        self._swish_kernel[(triton.cdiv(n, self.block),)](x, y, n, BLOCK_SIZE=self.block)
        return y
