# Task: level2/76_Gemm_Add_ReLU (relu(x @ W^T + bias))
# Bug: "for speed" the transposed weight W^T is materialised once in __init__ as a plain
#      attribute and the forward multiplies by that copy. The module's real parameter
#      self.gemm.weight is never read again, so the model ignores any later change to it.
# Wrong on: every input once the weights differ from their initial values (load_state_dict of
#      a reference/trained model, an optimiser step, weight tying). Exact on a freshly built
#      model, which is the only kind a KernelBench-style judge constructs.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gemm_bias_relu_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K,
                          sam, sak, sbk, sbn, scm, scn,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        kk = k + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0)
    acc = tl.maximum(acc + bias[None, :], 0.0)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super(ModelNew, self).__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        # BUG: a snapshot, not a view of the parameter (and not in the state_dict)
        self._w_t = self.gemm.weight.detach().t().contiguous()

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self._w_t.shape[1]
        c = torch.empty((M, N), device=x.device, dtype=torch.float32)
        BM, BN, BK = 32, 32, 32
        grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
        gemm_bias_relu_kernel[grid](x, self._w_t, self.bias, c, M, N, K,
                                    x.stride(0), x.stride(1), self._w_t.stride(0), self._w_t.stride(1),
                                    c.stride(0), c.stride(1), BM=BM, BN=BN, BK=BK)
        return c
