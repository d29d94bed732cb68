# Task: level1/45_Average_Pooling_2D (kernel 11, stride 11, no padding)
# Bug: the (batch*channel) plane offset is computed in 32-bit: plane * H * W with plane the
#      int32 program id and H, W int32 arguments. It wraps once the input holds 2^31 elements
#      or more.
# Wrong on: inputs of >= 2^31 elements -- the task's own input is 16 x 64 x 2048 x 2048 = 2^32
#      elements (16 GiB): planes >= 512 read wrapped (negative) addresses. Exact on anything
#      smaller, so only a GPU run at the task's size can show it.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def avgpool_kernel(x_ptr, y_ptr, H, W, OH, OW, K: tl.constexpr, BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    pb = tl.program_id(1)
    p = pb * BLOCK + tl.arange(0, BLOCK)
    pm = p < OH * OW
    oh = p // OW
    ow = p % OW
    xplane = x_ptr + plane * H * W                     # BUG: int32 product
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for kh in tl.static_range(K):
        for kw in tl.static_range(K):
            acc += tl.load(xplane + (oh * K + kh) * W + (ow * K + kw), mask=pm, other=0.0)
    tl.store(y_ptr + plane * OH * OW + p, acc / (K * K), mask=pm)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0):
        super(ModelNew, self).__init__()
        self.k = kernel_size
        self.stride = stride or kernel_size
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert self.stride == self.k and self.padding == 0
        x = x.contiguous()
        B, C, H, W = x.shape
        OH, OW = (H - self.k) // self.k + 1, (W - self.k) // self.k + 1
        y = torch.empty((B, C, OH, OW), device=x.device, dtype=x.dtype)
        BLOCK = 256
        avgpool_kernel[(B * C, triton.cdiv(OH * OW, BLOCK))](x, y, H, W, OH, OW, K=self.k, BLOCK=BLOCK)
        return y
