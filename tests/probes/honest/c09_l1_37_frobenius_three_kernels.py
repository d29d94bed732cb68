# Task: level1/37 FrobeniusNorm. Style: three kernels per forward: per-block partial sums of squares
# into a torch.empty workspace, a single-program finisher that reduces the partials and takes sqrt
# (one-element tensor), and a scaling kernel that tl.loads the norm; float32 accumulation.
import torch
import torch.nn as nn
import triton
import triton.language as tl

PARTIAL_BLOCK = 4096
FINAL_BLOCK = 1024
SCALE_BLOCK = 2048


@triton.jit
def _sumsq_partial_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(partial_ptr + pid, tl.sum(x * x, axis=0))


@triton.jit
def _finish_norm_kernel(partial_ptr, norm_ptr, n_partials, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_partials, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < n_partials, other=0.0)
    total = tl.sum(acc, axis=0)
    tl.store(norm_ptr, tl.sqrt(total))


@triton.jit
def _divide_kernel(x_ptr, norm_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    norm = tl.load(norm_ptr)
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(y_ptr + offs, x / norm, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32:
            raise ValueError("this kernel expects float32 input")
        xc = x.contiguous()
        n = xc.numel()
        n_partials = triton.cdiv(n, PARTIAL_BLOCK)
        partials = torch.empty(n_partials, device=x.device, dtype=torch.float32)
        norm = torch.empty(1, device=x.device, dtype=torch.float32)
        _sumsq_partial_kernel[(n_partials,)](xc, partials, n, BLOCK=PARTIAL_BLOCK)
        _finish_norm_kernel[(1,)](partials, norm, n_partials, BLOCK=FINAL_BLOCK)
        y = torch.empty_like(xc)
        _divide_kernel[(triton.cdiv(n, SCALE_BLOCK),)](xc, norm, y, n, BLOCK=SCALE_BLOCK)
        return y
