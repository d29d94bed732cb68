import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumprod_log_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    # cumprod as exp(cumsum(log|x|)) with the sign from the parity of the negative factors so far: less accurate
    # than a running product (the log-sum's rounding is absolute, ~|sum| * 2^-24 per step), still far within
    # 2^-6 of each element; a zero factor gives log 0 = -inf and exp(-inf) = 0, as the product does
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    log_carry = tl.zeros([1], tl.float32)
    neg_carry = tl.zeros([1], tl.int32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=mask, other=1.0).to(tl.float32)
        s = tl.cumsum(tl.log(tl.abs(x)), axis=0) + log_carry
        n = tl.cumsum((x < 0).to(tl.int32), axis=0) + neg_carry
        mag = tl.exp(s)
        y = tl.where((n % 2) == 1, -mag, mag)
        tl.store(y_ptr + row * n_cols + start + cols, y, mask=mask)
        log_carry = tl.sum(tl.where(cols == BLOCK - 1, s, 0.0), axis=0, keep_dims=True)
        neg_carry = tl.sum(tl.where(cols == BLOCK - 1, n, 0), axis=0, keep_dims=True)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        dim = self.dim % x.dim()
        xt = x.movedim(dim, -1).contiguous()
        n_cols = xt.shape[-1]
        x2 = xt.view(-1, n_cols)
        y2 = torch.empty_like(x2)
        BLOCK = min(triton.next_power_of_2(n_cols), 128)
        cumprod_log_kernel[(x2.shape[0],)](x2, y2, n_cols, BLOCK=BLOCK)
        return y2.view(xt.shape).movedim(-1, dim)
