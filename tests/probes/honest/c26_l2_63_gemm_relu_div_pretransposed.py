# Task: level2/63 Linear + ReLU + divide. Style: a temporary nn.Linear built in __init__ only to copy
# its weights into nn.Parameters, the weight stored pre-transposed (K, N) and contiguous, the divisor
# folded into a reciprocal multiply (exact: divisor is a power of two here; other divisors differ by
# <= 1 ulp), kernels and launch config at module level, tl.dot with input_precision="ieee",
# kernel launched with keyword arguments only.
import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, BK = 32, 64, 32


@triton.jit
def linear_relu_scale_kernel(a_ptr, bt_ptr, bias_ptr, c_ptr, M, N, K, scale,
                             stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        b = tl.load(bt_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc=acc, input_precision="ieee")
    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
    acc = tl.maximum(acc + bias[None, :], 0.0) * scale
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        ref = nn.Linear(in_features, out_features)
        self.weight_t = nn.Parameter(ref.weight.detach().t().contiguous())
        self.bias = nn.Parameter(ref.bias.detach().clone())
        self.divisor = float(divisor)

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.weight_t.shape[1]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        linear_relu_scale_kernel[(triton.cdiv(M, BM), triton.cdiv(N, BN))](
            a_ptr=x, bt_ptr=self.weight_t, bias_ptr=self.bias, c_ptr=out, M=M, N=N, K=K,
            scale=1.0 / self.divisor,
            stride_am=x.stride(0), stride_ak=x.stride(1),
            stride_bk=self.weight_t.stride(0), stride_bn=self.weight_t.stride(1),
            stride_cm=out.stride(0), stride_cn=out.stride(1),
            BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK)
        return out
