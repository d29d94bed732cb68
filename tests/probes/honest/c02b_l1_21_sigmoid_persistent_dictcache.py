# Task: level1/21 Sigmoid. Style: as c02, but the program count is cached in a module-level dict
# (the rewrite of c02's functools.lru_cache); persistent grid-stride kernel using tl.num_programs,
# `from triton import cdiv`, reshape(-1)/view_as plumbing.

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton import cdiv

BLOCK = 1024
MAX_PROGRAMS = 64

_NPROG_CACHE = {}

def _num_programs(n_tiles: int) -> int:
    if n_tiles in _NPROG_CACHE:
        return _NPROG_CACHE[n_tiles]
    _NPROG_CACHE[n_tiles] = max(1, min(n_tiles, MAX_PROGRAMS))
    return _NPROG_CACHE[n_tiles]

@triton.jit
def sigmoid_persistent_kernel(x_ptr, out_ptr, n_elements, n_tiles, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for tile in range(pid, n_tiles, nprog):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_elements
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = 1.0 / (1.0 + tl.exp(-x))
        tl.store(out_ptr + offs, y, mask=mask)

class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1)
        if not flat.is_contiguous():
            flat = flat.contiguous()
        out = torch.empty_like(flat)
        n = flat.numel()
        n_tiles = cdiv(n, BLOCK)
        grid = (_num_programs(n_tiles),)
        sigmoid_persistent_kernel[grid](flat, out, n, n_tiles, BLOCK=BLOCK, num_warps=4)
        return out.view_as(x)
