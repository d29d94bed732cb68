import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def triu_matmul_kernel(a_ptr, b_ptr, c_ptr, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):
    # A and B upper triangular: A[i, k] = 0 for k < i and B[k, j] = 0 for k > j, so C[i, j] sums only
    # i <= k <= j: tiles wholly below the diagonal are zero, and the others read k in [row start, col end)
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    m0 = pid_m * BLOCK_M
    n0 = pid_n * BLOCK_N
    rm = m0 + tl.arange(0, BLOCK_M)
    rn = n0 + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    if m0 < n0 + BLOCK_N:
        k_hi = tl.minimum(n0 + BLOCK_N, N)
        for k0 in range((m0 // BLOCK_K) * BLOCK_K, k_hi, BLOCK_K):
            kk = k0 + rk
            a = tl.load(a_ptr + rm[:, None] * N + kk[None, :], mask=(rm[:, None] < N) & (kk[None, :] < k_hi),
                        other=0.0)
            b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < k_hi) & (rn[None, :] < N),
                        other=0.0)
            acc += tl.dot(a, b, input_precision="ieee")
    acc = tl.where(rn[None, :] >= rm[:, None], acc, 0.0)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < N) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A, B = A.contiguous(), B.contiguous()
        N = A.shape[0]
        C = torch.empty((N, N), dtype=torch.float32, device=A.device)
        BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
        grid = (triton.cdiv(N, BLOCK_M), triton.cdiv(N, BLOCK_N))
        triu_matmul_kernel[grid](A, B, C, N, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
        return C
