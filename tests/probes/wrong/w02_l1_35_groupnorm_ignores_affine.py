# Task: level1/35_GroupNorm_
# Bug: normalises each group correctly but never applies the GroupNorm's affine weight and bias
#      (it keeps nn.GroupNorm only to own the parameters). Exact while weight == 1 and
#      bias == 0, i.e. at nn.GroupNorm's default initialisation.
# Wrong on: any model whose gn.weight / gn.bias are not the defaults (a trained or loaded
#      state_dict, any optimiser step). Every input is affected then, at every size.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gn_kernel(x_ptr, y_ptr, w_ptr, b_ptr, group_numel, eps, BLOCK: tl.constexpr):
    pid = tl.program_id(0)              # one program per (batch, group); groups are contiguous
    base = pid * group_numel
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, group_numel, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < group_numel
        s += tl.load(x_ptr + base + offs, mask=m, other=0.0)
    mean = tl.sum(s, axis=0) / group_numel
    v = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, group_numel, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < group_numel
        x = tl.load(x_ptr + base + offs, mask=m, other=0.0)
        d = tl.where(m, x - mean, 0.0)
        v += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(v, axis=0) / group_numel + eps)
    for start in range(0, group_numel, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < group_numel
        x = tl.load(x_ptr + base + offs, mask=m, other=0.0)
        tl.store(y_ptr + base + offs, (x - mean) * rstd, mask=m)   # BUG: no * weight[c] + bias[c]


class ModelNew(nn.Module):
    def __init__(self, num_features: int, num_groups: int):
        super(ModelNew, self).__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        B, C = x.shape[0], x.shape[1]
        G = self.gn.num_groups
        group_numel = (C // G) * (x.numel() // (B * C))
        gn_kernel[(B * G,)](x, y, self.gn.weight, self.gn.bias, group_numel, self.gn.eps, BLOCK=1024)
        return y
