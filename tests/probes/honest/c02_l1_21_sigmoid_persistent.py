# Task: level1/21 Sigmoid. Style: persistent grid-stride kernel using tl.num_programs, program count
# from a functools.lru_cache'd helper, `from triton import cdiv`, reshape(-1)/view_as plumbing.
import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton import cdiv

BLOCK = 1024
MAX_PROGRAMS = 64


@functools.lru_cache(maxsize=None)
def _num_programs(n_tiles: int) -> int:
    return max(1, min(n_tiles, MAX_PROGRAMS))


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
