import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def col_scale_kernel(a_ptr, b_ptr, c_ptr, N, M, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
    # Wrong use of the diagonal: scales column j by A[j] (B @ diag(A)), as if a diagonal factor commuted
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rm = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    a = tl.load(a_ptr + rm, mask=rm < M, other=0.0)
    mask = (rn[:, None] < N) & (rm[None, :] < M)
    offs = rn.to(tl.int64)[:, None] * M + rm[None, :]
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, b * a[None, :], mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A, B = A.contiguous(), B.contiguous()
        N, M = B.shape
        C = torch.empty_like(B)
        BLOCK_N, BLOCK_M = 16, 256
        grid = (triton.cdiv(N, BLOCK_N), triton.cdiv(M, BLOCK_M))
        col_scale_kernel[grid](A, B, C, N, M, BLOCK_N=BLOCK_N, BLOCK_M=BLOCK_M)
        return C
