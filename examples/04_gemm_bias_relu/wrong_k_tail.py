import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_relu_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr,
    M, N, K,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    # out[m, n] = relu(sum_k x[m, k] * w[n, k] + b[n])
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, K // BLOCK_K):
        k = kb * BLOCK_K + offs_k
        mask_k = k < K
        a = tl.load(x_ptr + offs_m[:, None] * stride_xm + k[None, :] * stride_xk,
                    mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        # w is (N, K); load a (BLOCK_K, BLOCK_N) tile of w.T
        bt = tl.load(w_ptr + offs_n[None, :] * stride_wn + k[:, None] * stride_wk,
                     mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        acc = tl.dot(a, bt, acc, input_precision="ieee")
    bias = tl.load(b_ptr + offs_n, mask=mask_n, other=0.0)
    acc = acc + bias[None, :]
    acc = tl.maximum(acc, 0.0)
    tl.store(out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on, acc,
             mask=mask_m[:, None] & mask_n[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        w = self.linear.weight
        b = self.linear.bias
        lead = x.shape[:-1]
        x2d = x.reshape(-1, x.shape[-1]).contiguous()
        M, K = x2d.shape
        N = w.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        _linear_relu_kernel[grid](
            x2d, w, b, out, M, N, K,
            x2d.stride(0), x2d.stride(1), w.stride(0), w.stride(1), out.stride(0), out.stride(1),
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        )
        return out.reshape(*lead, N)
