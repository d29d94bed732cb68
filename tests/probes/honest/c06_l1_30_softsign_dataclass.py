# Task: level1/30 Softsign. Style: launch configuration in a frozen dataclass record held at module
# level, tl.abs, num_warps/num_stages launch options from the record.
from dataclasses import dataclass

import torch
import torch.nn as nn
import triton
import triton.language as tl


@dataclass(frozen=True)
class LaunchConfig:
    block: int = 2048
    num_warps: int = 4
    num_stages: int = 1


CONFIG = LaunchConfig()


@triton.jit
def softsign_kernel(in_ptr, out_ptr, n, BLOCK: tl.constexpr):
    start = tl.program_id(0) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    msk = offs < n
    v = tl.load(in_ptr + offs, mask=msk, other=0.0)
    tl.store(out_ptr + offs, v / (1.0 + tl.abs(v)), mask=msk)


class ModelNew(nn.Module):
    def __init__(self, config: LaunchConfig = CONFIG):
        super().__init__()
        self.config = config

    def forward(self, x):
        cfg = self.config
        src = x.contiguous()
        dst = torch.empty_like(src)
        n = src.numel()
        softsign_kernel[(triton.cdiv(n, cfg.block),)](
            src, dst, n, BLOCK=cfg.block, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        return dst
