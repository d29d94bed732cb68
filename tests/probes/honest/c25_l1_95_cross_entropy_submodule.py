# Task: level1/95 CrossEntropyLoss (mean). Style: an own nn.Module submodule built in __init__ that
# launches the per-row kernel, int64 class targets loaded in the kernel and used as an offset, logsumexp
# with tl.exp2/tl.log2 and a LOG2E constant, *x.stride() unpacked into the launch, block size from
# int.bit_length(), typing.Tuple hints, META-style grid lambda for the second kernel.
from typing import Tuple

import torch
import torch.nn as nn
import triton
import triton.language as tl

LOG2E: float = 1.4426950408889634
LN2: float = 0.6931471805599453


@triton.jit
def ce_row_kernel(x_ptr, tgt_ptr, loss_ptr, C, stride_r, stride_c, BLOCK_C: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row * stride_r
    m = tl.full((BLOCK_C,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for c0 in range(0, C, BLOCK_C):
        cols = c0 + tl.arange(0, BLOCK_C)
        v = tl.load(base + cols * stride_c, mask=cols < C, other=float("-inf")) * LOG2E
        m_new = tl.maximum(m, v)
        alpha = tl.where(m_new == float("-inf"), 0.0, tl.exp2(m - m_new))
        s = s * alpha + tl.where(v == float("-inf"), 0.0, tl.exp2(v - m_new))
        m = m_new
    mx = tl.max(m, axis=0)
    tot = tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp2(m - mx)), axis=0)
    lse = (mx + tl.log2(tot)) * LN2
    tgt = tl.load(tgt_ptr + row)
    picked = tl.load(base + tgt * stride_c)
    tl.store(loss_ptr + row, lse - picked)


@triton.jit
def mean_kernel(v_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, n, BLOCK):
        o = i + tl.arange(0, BLOCK)
        acc += tl.load(v_ptr + o, mask=o < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


def _blocks(num_classes: int) -> Tuple[int, int]:
    block_c = 1 << max(num_classes - 1, 1).bit_length()
    return min(block_c, 1024), 4 if block_c <= 1024 else 8


class RowCrossEntropy(nn.Module):
    """Per-row negative log-likelihood of softmax(x)."""

    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        n_rows, n_cls = x.shape
        losses = torch.empty(n_rows, device=x.device, dtype=torch.float32)
        block_c, warps = _blocks(n_cls)
        ce_row_kernel[(n_rows,)](x, target, losses, n_cls, *x.stride(), BLOCK_C=block_c, num_warps=warps)
        return losses


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.rows = RowCrossEntropy()

    def forward(self, predictions, targets):
        if targets.dtype != torch.int64:
            raise TypeError("class indices must be int64")
        losses = self.rows(predictions, targets.contiguous())
        out = torch.empty((), device=predictions.device, dtype=torch.float32)
        n = losses.numel()
        mean_kernel[lambda META: (1,)](losses, out, n, BLOCK=256)
        return out
