# Task: level2/1_Conv2D_ReLU_BiasAdd (conv2d -> relu -> + bias)
# Bug: unpacks the Conv2d weight as (C_in, C_out, KH, KW) (the ConvTranspose2d layout) when
#      nn.Conv2d stores (C_out, C_in, KH, KW): the channel loop runs over out_channels and the
#      output is allocated with in_channels channels.
# Wrong on: any input/model where in_channels != out_channels -- the task's own sizes
#      (64 -> 128): wrong output shape (and out-of-bounds weight reads). Exact when
#      in_channels == out_channels.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def conv_relu_bias_kernel(x_ptr, w_ptr, cb_ptr, b_ptr, y_ptr,
                          C_IN, C_OUT, H, W, OH, OW,
                          sxb, sxc, sxh, sxw,
                          swo, swi, swh, sww,
                          KH: tl.constexpr, KW: tl.constexpr,
                          BLOCK_OC: tl.constexpr, BLOCK_P: tl.constexpr):
    b = tl.program_id(0)
    pid_p = tl.program_id(1)
    p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    pmask = p < OH * OW
    oh = p // OW
    ow = p % OW
    oc = tl.arange(0, BLOCK_OC)
    ocmask = oc < C_OUT
    acc = tl.zeros((BLOCK_OC, BLOCK_P), dtype=tl.float32)
    for ic in range(0, C_IN):
        for kh in tl.static_range(KH):
            for kw in tl.static_range(KW):
                xv = tl.load(x_ptr + b * sxb + ic * sxc + (oh + kh) * sxh + (ow + kw) * sxw,
                             mask=pmask, other=0.0)
                wv = tl.load(w_ptr + oc * swo + ic * swi + kh * swh + kw * sww,
                             mask=ocmask, other=0.0)
                acc += wv[:, None] * xv[None, :]
    cb = tl.load(cb_ptr + oc, mask=ocmask, other=0.0)
    bb = tl.load(b_ptr + oc, mask=ocmask, other=0.0)
    acc = tl.maximum(acc + cb[:, None], 0.0) + bb[:, None]
    out = y_ptr + b * C_OUT * OH * OW + oc[:, None] * (OH * OW) + p[None, :]
    tl.store(out, acc, mask=ocmask[:, None] & pmask[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = x.contiguous()
        w = self.conv.weight.contiguous()
        C_in, C_out, KH, KW = w.shape          # BUG: Conv2d weight is (C_out, C_in, KH, KW)
        B, _, H, W = x.shape
        OH, OW = H - KH + 1, W - KW + 1
        y = torch.empty((B, C_out, OH, OW), device=x.device, dtype=torch.float32)
        BLOCK_P = 128
        grid = (B, triton.cdiv(OH * OW, BLOCK_P))
        conv_relu_bias_kernel[grid](
            x, w, self.conv.bias, self.bias.reshape(-1), y,
            C_in, C_out, H, W, OH, OW,
            x.stride(0), x.stride(1), x.stride(2), x.stride(3),
            w.stride(0), w.stride(1), w.stride(2), w.stride(3),
            KH=KH, KW=KW, BLOCK_OC=triton.next_power_of_2(C_out), BLOCK_P=BLOCK_P)
        return y
