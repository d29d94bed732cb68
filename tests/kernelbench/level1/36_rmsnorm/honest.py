import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rms_norm_kernel(x_ptr, y_ptr, n_feat, n_spatial, eps,
                    BLOCK_F: tl.constexpr, BLOCK_S: tl.constexpr):
    # x is (batch, features, spatial); normalise over features for every (batch, spatial) point
    b = tl.program_id(0).to(tl.int64)
    ps = tl.program_id(1)
    f = tl.arange(0, BLOCK_F)[:, None]
    s = ps * BLOCK_S + tl.arange(0, BLOCK_S)[None, :]
    mask = (f < n_feat) & (s < n_spatial)
    offs = b * n_feat * n_spatial + f * n_spatial + s
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=0) / n_feat
    rms = tl.sqrt(mean_sq + eps)
    y = x / rms[None, :]
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super(ModelNew, self).__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_batch, n_feat = x.shape[0], x.shape[1]
        n_spatial = x.numel() // max(1, n_batch * n_feat)
        y = torch.empty_like(x)
        # all features of a point fit in one tile
        BLOCK_F = triton.next_power_of_2(n_feat)
        BLOCK_S = max(1, min(triton.next_power_of_2(n_spatial), 4096 // BLOCK_F))
        grid = (n_batch, triton.cdiv(n_spatial, BLOCK_S))
        rms_norm_kernel[grid](x, y, n_feat, n_spatial, self.eps, BLOCK_F=BLOCK_F, BLOCK_S=BLOCK_S)
        return y
