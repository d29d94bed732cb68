import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sym_matmul_kernel(a_ptr, b_ptr, c_ptr, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    # C = A @ B with B symmetric: B[k, n] == B[n, k], so the B tile is read along rows of B (n-major,
    # contiguous in k) like A's, instead of down its columns
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, N, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * N + kk[None, :], mask=(rm[:, None] < N) & (kk[None, :] < N), other=0.0)
        # rows rn of B, columns kk: B[rn, kk] = B[kk, rn] by symmetry, transposed in registers
        bt = tl.load(b_ptr + rn[:, None] * N + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < N), other=0.0)
        acc += tl.dot(a, tl.trans(bt), input_precision="ieee")
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
        sym_matmul_kernel[grid](A, B, C, N, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
        return C
