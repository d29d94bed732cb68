"""The float64 adjudication of near misses (child._near_miss, child._fp64_facts)."""
import torch

from kgym_harness.judge import child, compare


class RowSum(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=1)


class LossyRowSum(torch.nn.Module):
    """A reference whose float32 arithmetic loses digits (adds then removes an offset), as long signed
    reductions do at KernelBench sizes: its own error is far above 1e-4."""

    def forward(self, x):
        return (x + 1000.0).sum(dim=1) - 1000.0 * x.shape[1]


def test_honest_reordered_sum_is_adjudicated_correct():
    torch.manual_seed(0)
    x = torch.randn(64, 100)
    model = LossyRowSum()
    ref = model(x)
    cand = x.double().sum(dim=1).float()  # the candidate is closer to the truth than the reference
    cmp = compare.compare(ref, cand, 1e-4, 1e-4)
    assert cmp["mismatches"] > 0  # a plain fp32 comparison rejects the honest result
    assert child._near_miss(cmp, ref, cand)
    facts = child._fp64_facts(model, [x], ref, cand, 1e-4, 1e-4)
    assert facts["mismatches"] == 0
    assert facts["candidate_error"] > 0 and facts["reference_error"] > 0


def test_wrong_result_stays_wrong_against_fp64():
    torch.manual_seed(0)
    x = torch.randn(64, 100)
    model = LossyRowSum()
    ref = model(x)
    cand = x.double().sum(dim=1).float()
    cand[5] += 0.5  # one row off by far more than rounding
    cmp = compare.compare(ref, cand, 1e-4, 1e-4)
    facts = child._fp64_facts(model, [x], ref, cand, 1e-4, 1e-4)
    assert facts["mismatches"] >= 1


def test_gross_errors_are_not_near_misses():
    x = torch.rand(8, 100)
    ref = RowSum()(x)
    cand = ref + 10.0
    cmp = compare.compare(ref, cand, 1e-4, 1e-4)
    assert not child._near_miss(cmp, ref, cand)
    nan_out = ref.clone()
    nan_out[0] = float("nan")
    cmp = compare.compare(ref, nan_out, 1e-4, 1e-4)
    assert not child._near_miss(cmp, ref, nan_out)  # unwritten output is not a rounding question


def test_host_memory_adjudication_agrees():
    """on_cpu (the judge's fallback when the GPU has no room for the float64 copies) gives the same facts."""
    torch.manual_seed(1)
    x = torch.randn(64, 100)
    model = LossyRowSum()
    ref = model(x)
    cand = x.double().sum(dim=1).float()
    cand[3] += 0.25
    a = child._fp64_facts(model, [x], ref, cand, 1e-4, 1e-4)
    b = child._fp64_facts(model, [x], ref, cand, 1e-4, 1e-4, on_cpu=True)
    assert a == b and a["mismatches"] == 1


class Softmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


class Cancel(torch.nn.Module):
    """Output that is the rounding noise of a cancellation (GroupNorm of one-element groups, level2/94 at CPU
    sizes): nothing is relative-accurate to it, the reference included."""

    def forward(self, x):
        return (x + 1.0) - 1.0 - x


def test_below_the_floor_an_approximation_fails_and_rounding_noise_passes():
    torch.manual_seed(2)
    x = torch.rand(4, 50000)
    model = Softmax()
    ref = model(x)
    tol = compare.variant_tolerance(ref, 1e-4, 1e-4)
    assert tol.below_floor and tol.relative_atol is not None
    approx = ref * 1.004  # a denominator estimated from samples
    facts = compare.compare(ref, approx, tol.atol, tol.rtol, tol.relative_atol)
    assert facts["mismatches"] == 0 and child._relative_miss(facts, tol)
    assert not child.Evaluation.output_passes(None, tol, model, [x], ref, approx)
    honest = torch.softmax(x.double(), dim=1).float()
    assert child.Evaluation.output_passes(None, tol, model, [x], ref, honest)
    # noise: the candidate's own rounding differs from the reference's everywhere, by as much as the
    # reference's own error from the exact (zero) result
    y = torch.randn(64, 100)
    noise = Cancel()
    r = noise(y)
    tol = compare.variant_tolerance(r, 1e-4, 1e-4)
    assert tol.below_floor and tol.relative_atol is not None and float(r.abs().max()) > 0
    cand = torch.zeros_like(r)
    facts = compare.compare(r, cand, tol.atol, tol.rtol, tol.relative_atol)
    assert child._relative_miss(facts, tol)
    assert child.Evaluation.output_passes(None, tol, noise, [y], r, cand)


def test_precision_ops_read_from_the_source():
    """What the precision feedback points at (result.c's candidate_precision): TF32 dots, full-precision dots,
    fp16/bf16 references."""
    import ast

    src = '''
import triton.language as tl
import torch
@triton.jit
def k(a, b, c):
    x = tl.dot(a, b)                                # the default: TF32 for float32 inputs
    y = tl.dot(a, b, input_precision="tf32")
    z = tl.dot(a, b, input_precision="ieee")
    w = tl.dot(a, b, allow_tf32=False)
    v = tl.dot(a, b, input_precision="tf32x3")
    h = a.to(tl.float16) + tl.load(c).to(tl.bfloat16)
def f(x):
    return x.half()
'''
    assert child._precision_ops(ast.parse(src)) == {"dot_reduced": 2, "dot_full": 3, "half_precision": 3}
    assert child._precision_ops(ast.parse("x = 1")) == {"dot_reduced": 0, "dot_full": 0, "half_precision": 0}
