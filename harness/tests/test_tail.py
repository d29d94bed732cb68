"""The small-elements check of heavy-tailed float32 outputs (compare.tail_tolerance, child._tail_facts; threat
model row 27): announced from the reference output alone, and failing unwritten small elements while honest
summation orders, log-space products and cancellations pass."""
import torch

from kgym_harness.judge import child, compare


class CumProd(torch.nn.Module):
    def forward(self, x):
        return torch.cumprod(x, dim=1)


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        with torch.random.fork_rng():  # this process's RNG as it was for the tests after this one
            torch.manual_seed(0)
            self.fc = torch.nn.Linear(64, 64)

    def forward(self, x):
        return self.fc(x)


def _tol(out, profile="strict", value_range=False):
    atol, rtol = compare.tolerances(out.dtype, profile)
    tol = compare.variant_tolerance(out, atol, rtol, value_range=value_range, profile=profile)
    return compare.tail_tolerance(out, tol, value_range=value_range)


def _inputs(seed=0, shape=(64, 128)):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(shape, generator=g)]


def test_announced_for_a_cumprod_only_under_strict_on_its_own_magnitudes():
    x = _inputs()
    out = CumProd()(*x)
    tol = _tol(out)
    assert tol.tail is not None and tol.tail["tiny"] > compare.TAIL_SHARE * tol.tail["nonzero"]
    assert tol.facts()["tail"]["bound"] == compare.TAIL_BOUND
    assert _tol(out, profile="kernelbench").tail is None
    assert _tol(out, value_range=True).tail is None
    # a GEMM's output has next to no element below atol: not announced (no float64 runs)
    assert _tol(Linear()(torch.randn(256, 64))).tail is None


def test_honest_orders_pass_and_unwritten_small_elements_fail():
    model, x = CumProd(), _inputs()
    ref = model(*x)
    # another association order (chunks of 16 with a carry) and a log-space product: both honest
    chunks = []
    carry = torch.ones(x[0].shape[0], 1)
    for part in x[0].split(16, dim=1):
        c = torch.cumprod(part, 1) * carry
        chunks.append(c)
        carry = c[:, -1:]
    chunked = torch.cat(chunks, 1)
    logspace = torch.exp(torch.cumsum(torch.log(x[0]), 1))
    for cand in (ref.clone(), chunked, logspace):
        facts = child._tail_facts(model, x, ref, cand, _tol(ref).atol)
        assert facts["checked"] > 0 and facts["mismatches"] == 0, facts
        assert facts["max_rel_error"] < 1e-4
    for cut in (1e-9, 1e-20, 1e-30):
        cand = torch.where(ref.abs() < cut, torch.zeros_like(ref), ref)
        assert compare.compare(ref, cand, _tol(ref).atol, 1e-4)["mismatches"] == 0  # the tolerance alone passes it
        facts = child._tail_facts(model, x, ref, cand, _tol(ref).atol)
        assert facts["mismatches"] > 0 and facts["first_mismatch_values"][1] == 0.0, (cut, facts)
    nan = ref.clone()
    nan[3, 40] = float("nan")
    assert child._tail_facts(model, x, ref, nan, _tol(ref).atol)["mismatches"] == 1


def test_flush_to_zero_below_the_least_magnitude_is_left_out():
    model, x = CumProd(), [torch.rand(16, 256, generator=torch.Generator().manual_seed(1)) * 0.5]
    ref = model(*x)
    ftz = torch.where(ref.abs() < 2.0 ** -126, torch.zeros_like(ref), ref)
    facts = child._tail_facts(model, x, ref, ftz, _tol(ref).atol)
    assert facts["mismatches"] == 0 and facts["least"] > 0


def test_cancellation_is_ill_conditioned():
    """A GEMM element near zero is the rounding noise of a cancellation: left out, whatever its relative error."""
    model, x = Linear(), [torch.randn(256, 64, generator=torch.Generator().manual_seed(2))]
    with torch.no_grad():
        ref = model(*x)
    noisy = ref + 1e-6 * ref.abs().max() * torch.randn(ref.shape, generator=torch.Generator().manual_seed(3))
    facts = child._tail_facts(model, x, ref, noisy, 1e-4 * float(ref.abs().max()))
    assert facts["ill_conditioned"] > 0 and facts["mismatches"] == 0


def test_the_same_draws_every_time():
    model, x = CumProd(), _inputs(4)
    ref = model(*x)
    cand = torch.where(ref.abs() < 1e-12, torch.zeros_like(ref), ref)
    state = torch.get_rng_state()
    assert child._tail_facts(model, x, ref, cand, _tol(ref).atol) == child._tail_facts(model, x, ref, cand, _tol(ref).atol)
    assert torch.equal(state, torch.get_rng_state())  # the process's RNG is left alone


class Float32Only(torch.nn.Module):
    def forward(self, x):
        if x.dtype != torch.float32:
            raise TypeError("this reference takes float32 only")
        return torch.cumprod(x, dim=1)


def test_a_reference_that_cannot_run_in_float64_skips_the_check_and_says_why():
    """The reason lies in the task alone (the judge's model and inputs), so the check is skipped, not failed: a
    float32-only reference would otherwise fail every candidate.  A truncation still passes here, as it would
    under the task's own tolerance: the skip is the task's, and the facts say so."""
    import pytest

    model, x = Float32Only(), _inputs()
    ref = model(*x)
    with pytest.raises(child._ReferenceCannot, match="in float64: TypeError"):
        child._tail_facts(model, x, ref, ref.clone(), _tol(ref).atol)
    facts = child._tail_skipped(child._ReferenceCannot("the reference cannot run in float64: TypeError: x"))
    assert facts["mismatches"] == 0 and facts["checked"] == 0 and "float64" in facts["skipped"]


def test_a_candidate_output_of_another_structure_is_an_error_not_a_skip():
    model, x = CumProd(), _inputs()
    ref = model(*x)
    import pytest

    with pytest.raises(RuntimeError, match="outputs"):
        child._tail_facts(model, x, ref, (ref, ref), _tol(ref).atol)


def test_device_and_library_faults_are_errors_not_skips():
    """Only the task's own refusal skips the check: a library's allocation failure, a CUDA error or out of memory may
    follow from what else holds the GPU (the candidate's memory among it), so they stay errors (fail closed)."""
    import pytest

    for text in ("CUDA error: an illegal memory access was encountered", "CUBLAS_STATUS_ALLOC_FAILED when calling",
                 "cuDNN error: CUDNN_STATUS_NOT_INITIALIZED", "CUDA out of memory. Tried to allocate 2 GiB"):
        with pytest.raises(RuntimeError, match=text.split(":")[0].split(" ")[0]):
            with child._reference_runs("in float64"):
                raise RuntimeError(text)
    with pytest.raises(child._ReferenceCannot):
        with child._reference_runs("in float64"):
            raise RuntimeError('"cumprod_cuda" not implemented for \'Double\'')


# -- the timed calls' sample (child._sample_agrees with tail=True; compare.sample_tail_agrees) -------------------

def _cumprod_case(seed=0):
    x = _inputs(seed)
    ref = CumProd()(*x)
    return x, ref, _tol(ref)


def _truncated(ref, below=1e-9):
    return torch.where(ref.abs() >= below, ref, torch.zeros_like(ref))


def test_sample_tail_agrees_holds_tiny_elements_to_the_bound():
    _x, ref, tol = _cumprod_case()
    r, at = ref.reshape(-1), tol.atol
    assert compare.sample_tail_agrees([r], [r.clone()], at)
    # an honest rounding (relative 2^-10 everywhere) passes; a cut at 1e-9, a bf16 tail, a NaN there fail
    assert compare.sample_tail_agrees([r], [r * (1 + 2.0 ** -10)], at)
    assert not compare.sample_tail_agrees([r], [_truncated(ref).reshape(-1)], at)
    assert not compare.sample_tail_agrees([r], [r.bfloat16().float() * (1 + 2.0 ** -5)], at)
    nan = r.clone()
    tiny = ((r.abs() < at) & (r.abs() >= compare.TAIL_LEAST)).nonzero()[0, 0]
    nan[tiny] = float("nan")
    assert not compare.sample_tail_agrees([r], [nan], at)
    # elements at or above atol are sample_agrees's, and below TAIL_LEAST nobody's; other dtypes are not checked
    big = r.clone()
    big[r.abs() >= at] = 0.0
    assert compare.sample_tail_agrees([r], [big], at)
    assert compare.sample_tail_agrees([r.double()], [_truncated(ref).reshape(-1).double()], at)
    least = torch.tensor([compare.TAIL_LEAST / 2, 1e-3], dtype=torch.float32)
    assert compare.sample_tail_agrees([least], [torch.tensor([0.0, 1e-3])], 1.0)


def test_sample_tail_bound_never_trips_what_the_full_rule_passes():
    """For every element the full rule checks (|r - e| <= TAIL_CONDITIONED |e|) and passes (|c - e| <= TAIL_BOUND
    |e|), the sample's bound holds: worst cases on both sides, in float64, then rounded to float32 as outputs are."""
    g = torch.Generator().manual_seed(5)
    e = torch.rand(100_000, generator=g, dtype=torch.float64) * 1e-6 + 1e-30
    for rs in (-1.0, 1.0):
        for cs in (-1.0, 1.0):
            r = (e * (1 + rs * compare.TAIL_CONDITIONED)).float()
            c = (e * (1 + cs * compare.TAIL_BOUND)).float()
            # float32 rounding moves each by at most 2^-24 of itself: the bound keeps room for it
            assert compare.sample_tail_agrees([r], [c], 1.0), (rs, cs)


class _Remote:
    """The runner's side of a sample (child.Remote.sample): values of the last output at the sampled positions."""

    def __init__(self, out):
        self.out = out

    def sample(self, seed, numels, itemsize=8):
        from kgym_harness.shared import timing as tm

        idx = tm.sample_positions(numels, seed, self.out.device)
        flat = self.out.reshape(-1)
        return [flat if idx[0] is None else flat[idx[0]]], [0]


def test_the_timed_sample_sends_cut_small_elements_to_the_full_rule():
    _x, ref, tol = _cumprod_case()
    cut = _truncated(ref)
    # by atol alone the cut output agrees: the hole the timed calls had (open before: rows 26 and 27)
    assert child._sample_agrees(_Remote(cut), ref, tol, seed=7) is True
    assert child._sample_agrees(_Remote(cut), ref, tol, seed=7, tail=True) == child.SAMPLE_TAIL
    assert child._sample_agrees(_Remote(ref.clone()), ref, tol, seed=7, tail=True) is True
    # a wrong output is still False, not SAMPLE_TAIL
    assert child._sample_agrees(_Remote(ref + 1.0), ref, tol, seed=7, tail=True) is False


def test_a_host_allocation_failure_is_out_of_memory_not_the_reference_refusing():
    """child._reference_runs turns the reference's own failures into _ReferenceCannot (the check skipped: a fact of
    the task); an allocation failure is none of those: on the CPU it was read as one, the check skipped and a cut
    cumprod passed while the host's memory was short (seen once, twenty-first session).  It now passes as out of
    memory, which fails closed (or re-runs alone on a GPU)."""
    import pytest

    from kgym_harness.shared.report import is_out_of_memory

    host = RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
                        "you tried to allocate 8796093022208 bytes. Error code 12 (Cannot allocate memory)")
    for exc in (host, MemoryError()):
        assert is_out_of_memory(exc)
        with pytest.raises(type(exc)):
            with child._reference_runs("in float64"):
                raise exc
    with pytest.raises(child._ReferenceCannot):
        with child._reference_runs("in float64"):
            raise RuntimeError('"cumprod" not implemented for \'Double\'')
