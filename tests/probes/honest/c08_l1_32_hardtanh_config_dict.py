# Task: level1/32 HardTanh. Style: module-level dict of launch configs, launch with **cfg, tl.clamp,
# min/max passed as constexpr floats.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_CONFIGS = {
    "small": {"BLOCK": 256, "num_warps": 2},
    "large": {"BLOCK": 2048, "num_warps": 8},
}


@triton.jit
def hardtanh_kernel(x_ptr, o_ptr, N, LO: tl.constexpr, HI: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    v = tl.load(x_ptr + i, mask=m, other=0.0)
    tl.store(o_ptr + i, tl.clamp(v, LO, HI), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.min_val = -1.0
        self.max_val = 1.0

    def forward(self, x):
        xf = x.contiguous().view(-1)
        out = torch.empty_like(xf)
        N = xf.numel()
        cfg = _CONFIGS["small"] if N < 65536 else _CONFIGS["large"]
        grid = (triton.cdiv(N, cfg["BLOCK"]),)
        hardtanh_kernel[grid](xf, out, N, LO=self.min_val, HI=self.max_val, **cfg)
        return out.view(x.shape)
