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


class ConvGroupNorm(torch.nn.Module):
    """level2/85's start at CPU sizes: a conv (with its bias) and a GroupNorm of one-channel groups.  On inputs
    x1e-25 (the tiny_values variant) each group's values are its channel's bias give or take an ulp, the variance is
    far below eps, and the output is that rounding divided by sqrt(eps)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 8, 3)
        self.gn = torch.nn.GroupNorm(8, 8)

    def forward(self, x):
        return self.gn(self.conv(x))


def _group_norm_by_loop(model, x):
    """The same function as a kernel computes it: the group's mean as a sequential sum (another order of sums)."""
    with torch.no_grad():
        z = model.conv(x)
        flat = z.reshape(z.shape[0], z.shape[1], -1)
        s = torch.zeros(flat.shape[:2])
        for i in range(flat.shape[-1]):
            s = s + flat[..., i]
        d = flat - (s / flat.shape[-1])[..., None]
        var = (d * d).mean(-1)
        return (d / torch.sqrt(var + model.gn.eps)[..., None]).reshape(z.shape)


def test_rounding_draws_pass_a_normalised_cancellation_on_a_value_range():
    torch.manual_seed(0)
    model = ConvGroupNorm()
    x = torch.rand(4, 4, 10, 12) * 1e-25
    with torch.no_grad():
        ref = model(x)
    cand = _group_norm_by_loop(model, x)
    tol = compare.variant_tolerance(ref, 1e-4, 1e-4, value_range=True)
    facts = compare.compare(ref, cand, tol.atol, tol.rtol, tol.relative_atol)
    assert facts["mismatches"] > 0 and child._near_miss(facts, ref, cand)
    plain = child._fp64_facts(model, [x], ref, cand, tol.atol, tol.rtol)
    assert plain["mismatches"] > 0 and "rounding" not in plain  # the reference's own error alone: a false fail
    drawn = child._fp64_facts(model, [x], ref, cand, tol.atol, tol.rtol, rounding=True)
    assert drawn["mismatches"] == 0
    assert drawn["rounding"]["mismatches_before"] == plain["mismatches"]
    assert drawn["rounding"]["noise"] > plain["candidate_error"] / child.ROUNDING_SLACK


def test_rounding_draws_give_no_latitude_where_the_output_is_well_conditioned():
    torch.manual_seed(0)
    model = ConvGroupNorm()
    x = torch.rand(4, 4, 10, 12)  # the task's own magnitudes: the variance is far above eps
    with torch.no_grad():
        ref = model(x)
    cand = _group_norm_by_loop(model, x)
    cand.view(-1)[::7] *= 1.0 + 3e-4  # a seventh of the elements off by 3e-4 of themselves
    tol = compare.variant_tolerance(ref, 1e-4, 1e-4, value_range=True)
    drawn = child._fp64_facts(model, [x], ref, cand, tol.atol, tol.rtol, rounding=True)
    assert drawn["mismatches"] > 0
    assert drawn["rounding"]["noise"] < 1e-4


class Variance(torch.nn.Module):
    def forward(self, x):
        return x.var(dim=1, unbiased=False)


def test_rounding_draws_do_not_forgive_a_cancelling_variance_on_offset_inputs():
    """The offset variant (+100) is there for E[x^2] - E[x]^2: the reference's own order (two passes) is stable,
    so its draws move little, and the cancelling formula stays a failure."""
    torch.manual_seed(3)
    model = Variance()
    x = torch.rand(64, 4096) + 100.0
    ref = model(x)
    cand = (x * x).mean(dim=1) - x.mean(dim=1) ** 2
    tol = compare.variant_tolerance(ref, 1e-4, 1e-4, value_range=True)
    drawn = child._fp64_facts(model, [x], ref, cand, tol.atol, tol.rtol, rounding=True)
    assert drawn["mismatches"] > 0


def test_rounding_draws_leave_the_process_rng_and_the_inputs_alone():
    torch.manual_seed(0)
    model = ConvGroupNorm()
    x = torch.rand(4, 4, 10, 12) * 1e-25
    x0 = x.clone()
    with torch.no_grad():
        ref = model(x)
    cand = _group_norm_by_loop(model, x)
    state = torch.get_rng_state()
    a = child._fp64_facts(model, [x], ref, cand, 1e-6, 1e-4, rounding=True)
    assert torch.equal(torch.get_rng_state(), state) and torch.equal(x, x0)
    b = child._fp64_facts(model, [x], ref, cand, 1e-6, 1e-4, rounding=True)
    assert a == b  # the same draws every time (ROUNDING_SEED)


class ScaleInPlaceGemmBatchNorm(torch.nn.Module):
    """A reference that writes into its input (x *= 3), then a GEMM and a BatchNorm in training mode."""

    def __init__(self):
        super().__init__()
        self.gemm = torch.nn.Linear(512, 128)
        self.bn = torch.nn.BatchNorm1d(128)

    def forward(self, x):
        x *= 3.0
        return self.bn(self.gemm(x))


def test_rounding_draws_each_get_fresh_inputs():
    """The red team's finding (twenty-third session): with one copy of the inputs for every draw, a reference that
    writes into its input saw x·3, x·9, x·27 in its draws, the noise was the distance to other functions (2.6 on
    outputs near 1), and a BatchNorm taking eps as a clamp (rsqrt(max(var, eps)), right while var >> eps, 1% off at
    inputs x1e-3: what small_values is for) passed."""
    torch.manual_seed(0)
    model = ScaleInPlaceGemmBatchNorm()
    x = torch.rand(128, 512) * 1e-3
    with torch.no_grad():
        ref = model(x.clone())
        z = torch.nn.functional.linear(x * 3.0, model.gemm.weight, model.gemm.bias)
        mean = z.mean(0)
        var = ((z - mean) ** 2).mean(0)
        cand = (z - mean) * torch.rsqrt(torch.clamp_min(var, model.bn.eps))  # the clamp: wrong where var < eps
    tol = compare.variant_tolerance(ref, 1e-4, 1e-4, value_range=True)
    facts = compare.compare(ref, cand, tol.atol, tol.rtol, tol.relative_atol)
    assert child._near_miss(facts, ref, cand)
    x0 = x.clone()
    drawn = child._fp64_facts(model, [x], ref, cand, tol.atol, tol.rtol, rounding=True)
    assert drawn["mismatches"] > 0 and drawn["rounding"]["noise"] < 1e-3
    assert torch.equal(x, x0)


class ArangeGather(torch.nn.Module):
    """A reference that makes a float arange and uses it as indices: values it makes, not computes."""

    def forward(self, x):
        idx = (torch.arange(x.shape[1], dtype=torch.float32) * 0.999).long()
        return x[:, idx] * 2.0


def test_rounding_draws_give_no_latitude_to_floats_made_into_indices():
    """Moving a float arange flips the indices it becomes, and the noise was the output's own size (the red team's
    probe): a reference that casts floating values to an integer dtype gets no draws, only the first rule."""
    torch.manual_seed(0)
    model = ArangeGather()
    x = torch.rand(16, 1000) * 1e-3
    ref = model(x)
    cand = ref.clone()
    cand[:, ::3] *= 1.001  # a third of the elements 1e-3 off
    tol = compare.variant_tolerance(ref, 1e-4, 1e-4, value_range=True)
    drawn = child._fp64_facts(model, [x], ref, cand, tol.atol, tol.rtol, rounding=True)
    assert drawn["mismatches"] > 0 and "rounding" not in drawn


class CopyIntoIndices(torch.nn.Module):
    """Floats made into indices by copy_ into a long tensor (the review's route around .long())."""

    def forward(self, x):
        idx = torch.empty(x.shape[1], dtype=torch.long)
        idx.copy_(torch.arange(x.shape[1], dtype=torch.float32) * 0.999)
        return x[:, idx] * 2.0


class ExactOnly(torch.nn.Module):
    """Operations that round nothing: selection, copies, ReLU, negation, pooling, concatenation."""

    def forward(self, x):
        y = torch.relu(x).clone()
        y = torch.cat([y, -y], dim=1)
        return torch.nn.functional.max_pool1d(y.unsqueeze(0), 2).squeeze(0)


def test_the_draws_follow_integers_made_from_floats_and_leave_exact_operations_alone():
    import torch as t

    gen = t.Generator()
    gen.manual_seed(child.ROUNDING_SEED)
    for model in (ArangeGather(), CopyIntoIndices()):
        mode = child._RoundingDraw(gen, t.device("cpu"))
        with t.no_grad(), mode:
            model(t.rand(4, 100))
        assert mode.to_integer, type(model).__name__  # seen, not an exception on the way
    # A max pool's indices, made and never used: the draws go on (level2/85's MaxPool2d).
    mode = child._RoundingDraw(gen, t.device("cpu"))
    with t.no_grad(), mode:
        t.nn.functional.max_pool2d(t.rand(1, 2, 8, 8), 2)
    assert not mode.to_integer
    # Exact operations only: no noise at all.
    x = t.rand(8, 50)
    model = ExactOnly()
    out = model(x)
    noise = child._rounding_noise(model, [x], out.double().reshape(-1))
    assert noise is not None and float(noise.max()) == 0.0
