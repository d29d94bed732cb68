# Task: level2/99 Linear + GELU(erf) + softmax(dim=1). Style: self.linear kept as the weight holder,
# a GEMM kernel with the bias + exact GELU (tl.math.erf, module constant built with math.sqrt) in its
# epilogue, then a row softmax with an online (running max, rescaled sum) first pass and a write pass.
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

INV_SQRT2 = tl.constexpr(1.0 / math.sqrt(2.0))


@triton.jit
def _gelu(v):
    return 0.5 * v * (1.0 + tl.math.erf(v * INV_SQRT2))


@triton.jit
def linear_gelu_kernel(x_ptr, w_ptr, b_ptr, h_ptr, M, N, K,
                       sxm, sxk, swn, swk, shm, shn,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    om = pm * BM + tl.arange(0, BM)
    on = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ok = k0 + tl.arange(0, BK)
        a = tl.load(x_ptr + om[:, None] * sxm + ok[None, :] * sxk,
                    mask=(om[:, None] < M) & (ok[None, :] < K), other=0.0)
        b = tl.load(w_ptr + on[None, :] * swn + ok[:, None] * swk,
                    mask=(on[None, :] < N) & (ok[:, None] < K), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    acc += tl.load(b_ptr + on, mask=on < N, other=0.0)[None, :]
    tl.store(h_ptr + om[:, None] * shm + on[None, :] * shn, _gelu(acc),
             mask=(om[:, None] < M) & (on[None, :] < N))


@triton.jit
def online_softmax_kernel(h_ptr, y_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    src = h_ptr + row * stride
    dst = y_ptr + row * stride
    m_i = tl.full((BLOCK,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK,), dtype=tl.float32)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        v = tl.load(src + cols, mask=cols < N, other=float("-inf"))
        m_new = tl.maximum(m_i, v)
        # lanes that have seen nothing yet keep l_i == 0
        scale = tl.where(m_new == float("-inf"), 0.0, tl.exp(m_i - m_new))
        l_i = l_i * scale + tl.where(v == float("-inf"), 0.0, tl.exp(v - m_new))
        m_i = m_new
    m = tl.max(m_i, axis=0)
    denom = tl.sum(tl.where(m_i == float("-inf"), 0.0, l_i * tl.exp(m_i - m)), axis=0)
    for c in range(0, N, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        msk = cols < N
        v = tl.load(src + cols, mask=msk, other=float("-inf"))
        tl.store(dst + cols, tl.exp(v - m) / denom, mask=msk)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        w, b = self.linear.weight, self.linear.bias
        M, K = x.shape
        N = w.shape[0]
        h = torch.empty((M, N), device=x.device, dtype=torch.float32)
        linear_gelu_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](
            x, w, b, h, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
            h.stride(0), h.stride(1), BM=32, BN=32, BK=32)
        y = torch.empty_like(h)
        online_softmax_kernel[(M,)](h, y, N, h.stride(0), BLOCK=256)
        return y
