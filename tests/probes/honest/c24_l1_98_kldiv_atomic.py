# Task: level1/98 KLDivLoss(log(p), t, reduction='batchmean'). Style: a single kernel whose programs
# tl.atomic_add their scaled partial sums into a torch.zeros(()) accumulator; xlogy-style handling of
# t == 0 with tl.where; tl.log; 1/batch folded in as a Python float.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kl_div_batchmean_kernel(p_ptr, t_ptr, out_ptr, n, inv_batch, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    p = tl.load(p_ptr + offs, mask=m, other=1.0)
    t = tl.load(t_ptr + offs, mask=m, other=0.0)
    term = tl.where(t > 0.0, t * (tl.log(t) - tl.log(p)), 0.0)
    term = tl.where(m, term, 0.0)
    tl.atomic_add(out_ptr, tl.sum(term, axis=0) * inv_batch)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p = predictions.contiguous()
        t = targets.contiguous()
        assert p.shape == t.shape
        n = p.numel()
        out = torch.zeros((), device=p.device, dtype=torch.float32)
        BLOCK = 1024
        kl_div_batchmean_kernel[(triton.cdiv(n, BLOCK),)](p, t, out, n, 1.0 / p.shape[0], BLOCK=BLOCK)
        return out
