import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sym_matmul_half_kernel(a_ptr, b_ptr, c_ptr, N, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
    # Wrong use of symmetry: assumes the product of two symmetric matrices is symmetric (it is only when
    # they commute), computes the tiles on and above the diagonal and mirrors them below
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if pid_n >= pid_m:
        rm = pid_m * BLOCK + tl.arange(0, BLOCK)
        rn = pid_n * BLOCK + tl.arange(0, BLOCK)
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)
        for k0 in range(0, N, BLOCK_K):
            kk = k0 + rk
            a = tl.load(a_ptr + rm[:, None] * N + kk[None, :], mask=(rm[:, None] < N) & (kk[None, :] < N),
                        other=0.0)
            b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < N) & (rn[None, :] < N),
                        other=0.0)
            acc += tl.dot(a, b, input_precision="ieee")
        mask = (rm[:, None] < N) & (rn[None, :] < N)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=mask)
        tl.store(c_ptr + rn[None, :] * N + rm[:, None], acc, mask=mask & (rn[None, :] > rm[:, None]))


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A, B = A.contiguous(), B.contiguous()
        N = A.shape[0]
        C = torch.empty((N, N), dtype=torch.float32, device=A.device)
        BLOCK, BLOCK_K = 64, 32
        grid = (triton.cdiv(N, BLOCK), triton.cdiv(N, BLOCK))
        sym_matmul_half_kernel[grid](A, B, C, N, BLOCK=BLOCK, BLOCK_K=BLOCK_K)
        return C
