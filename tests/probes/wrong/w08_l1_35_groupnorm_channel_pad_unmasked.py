# Task: level1/35_GroupNorm_
# Bug: each (batch, group) program loads a [next_pow2(C/G), BLOCK_HW] tile of its group's
#      channels but masks only the spatial axis, not the channel axis. When channels per group
#      C/G is a power of two the padding is empty and the kernel is exact; otherwise the padded
#      rows read the NEXT group's channels into this group's statistics (and past the tensor for
#      the last group).
# Wrong on: any C/G that is not a power of two, e.g. features=24 or 48 with num_groups=8
#      (the task's Model accepts any features divisible by num_groups; the task uses 64/8 = 8).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gn_kernel(x_ptr, y_ptr, w_ptr, b_ptr, C, HW, CPG, eps,
              CPG_P2: tl.constexpr, BLOCK_HW: tl.constexpr):
    pid = tl.program_id(0)
    G = C // CPG
    bidx = pid // G
    g = pid % G
    c = g * CPG + tl.arange(0, CPG_P2)                  # BUG: no `< CPG` mask on channels
    base = x_ptr + bidx * C * HW
    s = tl.zeros((CPG_P2, BLOCK_HW), dtype=tl.float32)
    ss = tl.zeros((CPG_P2, BLOCK_HW), dtype=tl.float32)
    for start in range(0, HW, BLOCK_HW):
        hw = start + tl.arange(0, BLOCK_HW)
        m = (hw < HW)[None, :]
        x = tl.load(base + c[:, None] * HW + hw[None, :], mask=m, other=0.0)
        s += x
    cnt = CPG * HW
    mean = tl.sum(tl.sum(s, axis=1), axis=0) / cnt
    for start in range(0, HW, BLOCK_HW):
        hw = start + tl.arange(0, BLOCK_HW)
        m = (hw < HW)[None, :]
        x = tl.load(base + c[:, None] * HW + hw[None, :], mask=m, other=0.0)
        d = tl.where(m, x - mean, 0.0)
        ss += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(tl.sum(ss, axis=1), axis=0) / cnt + eps)
    cm = tl.arange(0, CPG_P2) < CPG                      # the store is masked correctly
    w = tl.load(w_ptr + c, mask=cm, other=1.0)
    bb = tl.load(b_ptr + c, mask=cm, other=0.0)
    for start in range(0, HW, BLOCK_HW):
        hw = start + tl.arange(0, BLOCK_HW)
        m = cm[:, None] & (hw < HW)[None, :]
        x = tl.load(base + c[:, None] * HW + hw[None, :], mask=m, other=0.0)
        y = (x - mean) * rstd * w[:, None] + bb[:, None]
        tl.store(y_ptr + bidx * C * HW + c[:, None] * HW + hw[None, :], y, mask=m)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, num_groups: int):
        super(ModelNew, self).__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        B, C = x.shape[0], x.shape[1]
        HW = x.numel() // (B * C)
        G = self.gn.num_groups
        CPG = C // G
        BLOCK_HW = min(1024, triton.next_power_of_2(HW))
        gn_kernel[(B * G,)](x, y, self.gn.weight, self.gn.bias, C, HW, CPG, self.gn.eps,
                            CPG_P2=triton.next_power_of_2(CPG), BLOCK_HW=BLOCK_HW)
        return y
