# KernelBench level2/86 (Matmul -> divide -> GELU): one Triton kernel = tiled GEMM with the epilogue fused.
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def _gelu(v):
    # exact (erf) GELU, as nn.GELU() / F.gelu default
    return 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))


@triton.jit
def matmul_div_gelu_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr,
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
    divisor, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N
    # out[m, n] = sum_k x[m, k] * w[n, k]   (nn.Linear: x @ W^T)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + offs_k
        a = tl.load(x_ptr + offs_m[:, None] * stride_xm + kk[None, :] * stride_xk,
                    mask=mask_m[:, None] & (kk[None, :] < K), other=0.0)
        b = tl.load(w_ptr + offs_n[None, :] * stride_wn + kk[:, None] * stride_wk,
                    mask=mask_n[None, :] & (kk[:, None] < K), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    bias = tl.load(b_ptr + offs_n, mask=mask_n, other=0.0)
    y = _gelu(acc + bias[None, :]) / divisor
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on, y,
             mask=mask_m[:, None] & mask_n[None, :])


class ModelNew(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        M, K = x.shape
        w = self.linear.weight
        N = w.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=torch.float32)
        BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 64
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        matmul_div_gelu_kernel[grid](
            x, w, self.linear.bias, out, M, N, K,
            x.stride(0), x.stride(1), w.stride(0), w.stride(1), out.stride(0), out.stride(1),
            float(self.divisor), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        )
        return out
