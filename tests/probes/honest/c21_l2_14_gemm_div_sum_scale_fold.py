# Task: level2/14 Gemm / 2, sum over hidden, * scale. Style: algebraic rewrite done in Triton:
# sum_n (x @ W.T)[m, n] = x[m] . colsum(W), so one kernel column-sums W per call and a second does the
# mat-vec with the constant 0.5 * scale folded in as a Python float from __init__; torch.randn weight
# created exactly as the reference.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def colsum_kernel(w_ptr, out_ptr, N, K, stride_wn, stride_wk,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    ks = pid * BLOCK_K + tl.arange(0, BLOCK_K)
    kmask = ks < K
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for n0 in range(0, N, BLOCK_N):
        ns = n0 + tl.arange(0, BLOCK_N)
        tile = tl.load(w_ptr + ns[:, None] * stride_wn + ks[None, :] * stride_wk,
                       mask=(ns[:, None] < N) & kmask[None, :], other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + ks, acc, mask=kmask)


@triton.jit
def rowdot_kernel(x_ptr, v_ptr, out_ptr, M, K, stride_xm, stride_xk, alpha,
                  BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < M
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        kmask = ks < K
        xt = tl.load(x_ptr + rows[:, None] * stride_xm + ks[None, :] * stride_xk,
                     mask=rmask[:, None] & kmask[None, :], other=0.0)
        v = tl.load(v_ptr + ks, mask=kmask, other=0.0)
        acc += tl.sum(xt * v[None, :], axis=1)
    tl.store(out_ptr + rows, acc * alpha, mask=rmask)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor
        self._alpha = 0.5 * float(scaling_factor)

    def forward(self, x):
        M, K = x.shape
        N = self.weight.shape[0]
        w = self.weight
        wsum = torch.empty(K, device=x.device, dtype=torch.float32)
        colsum_kernel[(triton.cdiv(K, 64),)](w, wsum, N, K, w.stride(0), w.stride(1), BLOCK_N=64, BLOCK_K=64)
        out = torch.empty((M, 1), device=x.device, dtype=x.dtype)
        rowdot_kernel[(triton.cdiv(M, 16),)](x, wsum, out, M, K, x.stride(0), x.stride(1), self._alpha,
                                             BLOCK_M=16, BLOCK_K=128)
        return out
