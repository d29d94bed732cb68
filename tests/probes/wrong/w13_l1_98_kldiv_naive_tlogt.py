# Task: level1/98_KLDivLoss (kl_div(log(predictions), targets, reduction='batchmean'))
# Bug: computes t * (log(t) - log(p)) literally. PyTorch's kl_div uses xlogy semantics: a term
#      with t == 0 contributes 0. Here t == 0 gives 0 * (-inf) = NaN and the loss is NaN.
# Wrong on: any targets with exact zeros (one-hot / sparse label distributions, probabilities
#      that underflowed) while predictions are > 0 there. Exact for strictly positive targets.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kl_rows_kernel(p_ptr, t_ptr, part_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, n, BLOCK):
        o = s + tl.arange(0, BLOCK)
        m = o < n
        p = tl.load(p_ptr + row * n + o, mask=m, other=1.0)
        t = tl.load(t_ptr + row * n + o, mask=m, other=1.0)
        acc += t * (tl.log(t) - tl.log(p))             # BUG: no special case for t == 0
    tl.store(part_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def finish_kernel(part_ptr, out_ptr, rows, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, rows, BLOCK):
        o = s + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + o, mask=o < rows, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / rows)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions, targets):
        p = predictions.contiguous()
        t = targets.contiguous()
        rows = p.shape[0]
        n = p.numel() // rows
        part = torch.empty(rows, device=p.device, dtype=torch.float32)
        kl_rows_kernel[(rows,)](p, t, part, n, BLOCK=1024)
        out = torch.empty((), device=p.device, dtype=torch.float32)
        finish_kernel[(1,)](part, out, rows, BLOCK=1024)
        return out
