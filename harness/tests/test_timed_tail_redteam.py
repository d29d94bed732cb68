"""Red team of the timed calls' small-elements sample (commit dce59e7: child._sample_agrees(tail=True),
compare.sample_tail_agrees, the full rule on SAMPLE_TAIL).  The timing stage runs on a GPU only, so each case calls
the judge's functions the timing method (Evaluation.timing's on_pair) calls, with a stand-in for the runner's
CMD_SAMPLE (runner.Runner.sample: the last output's values at timing.sample_positions(seed))."""
import importlib.util
import os
import pathlib

import pytest
import torch

from kgym_harness.judge import child, compare, tasks

CUMPROD = pathlib.Path(__file__).resolve().parents[2] / "tests" / "kernelbench" / "level1" / "90_cumprod"
BASE = tasks.Variant("base", {}, 0, "none", None, "the task's own inputs")


class CumProd(torch.nn.Module):
    def forward(self, x):
        return torch.cumprod(x, dim=1)


class Pair(torch.nn.Module):
    """Two outputs, the heavy-tailed float32 one second (a tuple's first tensor sets atol: child._first_dtype)."""

    def forward(self, x):
        return x.sum(1, keepdim=True).expand(-1, 4).contiguous(), torch.cumprod(x, dim=1)


class _Remote:
    """The runner's side of CMD_SAMPLE, as runner.Runner.sample computes it from the output it kept."""

    def __init__(self, out, counts=None):
        self.out = out
        self.counts = counts

    def sample(self, seed, numels, itemsize=8):
        from kgym_harness.shared import timing as tm

        outs = list(self.out) if isinstance(self.out, (tuple, list)) else [self.out]
        idx = tm.sample_positions([o.numel() for o in outs], seed, outs[0].device)
        picked = [o.reshape(-1) if i is None else o.reshape(-1)[i] for o, i in zip(outs, idx)]
        return picked, (self.counts if self.counts is not None else [0] * len(outs))


def _evaluation():
    return child.Evaluation(None, {"device": "cpu"})


def _cut(out, below=1e-9):
    return torch.where(out.abs() >= below, out, torch.zeros_like(out))


# -- finding: the sample holds the base's announcement, the full rule only its own call's ---------------------------

def _mixed_call(rows, seed=3):
    """A timed call's fresh inputs whose output has fewer tiny elements than the base's: most rows near 1, ``rows``
    of them uniform (heavy-tailed products).  The same task, the same distribution family; only the share moves."""
    g = torch.Generator().manual_seed(seed)
    x = 0.999 + 0.001 * torch.rand(64, 128, generator=g)
    x[:rows] = torch.rand(rows, 128, generator=g)
    return [x]


def test_a_timed_call_below_the_share_is_held_to_the_check_its_base_announced():
    """The base inputs' output announces the check (tail_announced), so the timed sample holds the tiny elements and
    a cut trips it (SAMPLE_TAIL).  The full rule then asked this call's own output whether to hold the check, and an
    output with 9% tiny elements (below TAIL_SHARE) said no: the cut output passed the full rule, and the trip even
    spent one of the TIMED_TAIL_FULL always-full checks.  Now the full rule holds it wherever the base announced it."""
    ev, model = _evaluation(), CumProd()
    base_out = model(torch.rand(64, 128, generator=torch.Generator().manual_seed(0)))
    assert ev.tolerances(base_out, BASE).tail is not None  # what timing's set-up decides (tail_announced)
    x = _mixed_call(8)
    out = model(*x)
    own = ev.tolerances(out, BASE)
    tiny, nonzero = compare.tiny_elements(out, own.atol)
    assert 0 < tiny <= compare.TAIL_SHARE * nonzero and own.tail is None  # this call alone does not announce it
    cut = _cut(out)
    sample_tol = ev.tolerances(out, BASE, tail=False)
    assert child._sample_agrees(_Remote(cut), out, sample_tol, 11, tail=True) == child.SAMPLE_TAIL
    assert ev.output_passes(own, model, x, out, cut)  # the gap: by this call's own announcement the cut passes
    held = ev.tolerances(out, BASE, announced=True)  # on_pair's full rule now
    assert held.tail is not None and held.tail["tiny"] == tiny
    assert not ev.output_passes(held, model, x, out, cut)
    # honest outputs still pass it: exact, and another association order
    chunked = torch.cat([torch.cumprod(p, 1) for p in x[0].split(32, 1)], 1)
    carry = torch.ones(64, 1)
    for j, p in enumerate(x[0].split(32, 1)):
        chunked[:, 32 * j:32 * (j + 1)] = torch.cumprod(p, 1) * carry
        carry = chunked[:, 32 * (j + 1) - 1:32 * (j + 1)]
    for honest in (out.clone(), chunked):
        assert ev.output_passes(ev.tolerances(out, BASE, announced=True), model, x, out, honest)


def test_announced_adds_the_check_only_where_it_may_hold():
    """``announced`` never announces the check where tail_tolerance would not look at all (kernelbench profile,
    value ranges, an exact tolerance) nor on an output with no tiny element; and it changes nothing where the output
    announces it on its own."""
    out = CumProd()(torch.rand(32, 64, generator=torch.Generator().manual_seed(1)))
    for profile, value_range in (("kernelbench", False), ("strict", True)):
        atol, rtol = compare.tolerances(out.dtype, profile)
        tol = compare.variant_tolerance(out, atol, rtol, value_range=value_range, profile=profile)
        assert compare.tail_tolerance(out, tol, value_range=value_range, announced=True).tail is None
    flat = torch.full((32, 64), 0.5)
    atol, rtol = compare.tolerances(flat.dtype, "strict")
    tol = compare.variant_tolerance(flat, atol, rtol)
    assert compare.tail_tolerance(flat, tol, announced=True).tail is None
    atol, rtol = compare.tolerances(out.dtype, "strict")
    a = compare.tail_tolerance(out, compare.variant_tolerance(out, atol, rtol)).tail
    b = compare.tail_tolerance(out, compare.variant_tolerance(out, atol, rtol), announced=True).tail
    assert a is not None and a == b


# -- checked and sound: regressions for what the change must keep ---------------------------------------------------

def _fixture(name):
    spec = importlib.util.spec_from_file_location(f"kgym_red_{name}", CUMPROD / name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ModelNew(1)


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available(),
                    reason="the fixtures' Triton kernels need a GPU or the interpreter")
def test_honest_cumprod_kernels_never_trip_the_timed_sample():
    """False positives: level1/90's honest fixtures (running product, float64 accumulator, log space, log2 block scan,
    two passes over chunks) on fresh inputs, 65,536-position samples of every one of several seeds: the sample never
    says SAMPLE_TAIL (no full check spent on them, let alone a verdict), and the full rule passes each."""
    ev, model = _evaluation(), CumProd()
    names = ["honest.py", "honest_float64_accumulator.py", "honest_log_space.py", "honest_log2_block_scan.py",
             "honest_two_pass_chunks.py"]
    for seed in range(3):
        x = [torch.rand(48, 384, generator=torch.Generator().manual_seed(100 + seed))]
        out = model(*x)
        tol = ev.tolerances(out, BASE, tail=False)
        assert ev.tolerances(out, BASE).tail is not None
        for name in names:
            cand = _fixture(name)(x[0].clone())
            for s in range(4):
                assert child._sample_agrees(_Remote(cand), out, tol, 1000 * seed + s, tail=True) is True, (name, seed)
            assert ev.output_passes(ev.tolerances(out, BASE, announced=True), model, x, out, cand), name


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available(),
                    reason="the fixture's Triton kernel needs a GPU or the interpreter")
def test_the_timed_truncation_fixture_trips_on_its_fourth_call_and_fails_the_full_rule():
    """wrong_timed_truncate_after_third_call (GPU-only in the suite): exact for three calls, then the sample trips on
    every call and the first trip's full rule fails it; nothing before the trip spent the budget."""
    ev, model = _evaluation(), CumProd()
    cand = _fixture("wrong_timed_truncate_after_third_call.py")
    for call in range(6):
        x = [torch.rand(48, 384, generator=torch.Generator().manual_seed(200 + call))]
        out = model(*x)
        got = cand(x[0].clone())
        agrees = child._sample_agrees(_Remote(got), out, ev.tolerances(out, BASE, tail=False), call, tail=True)
        if call < 3:
            assert agrees is True
        else:
            assert agrees == child.SAMPLE_TAIL
            assert not ev.output_passes(ev.tolerances(out, BASE, announced=True), model, x, out, got)


def test_a_cumprod_leaves_nothing_to_spend_the_always_full_checks_on():
    """The budget (TIMED_TAIL_FULL always-full, then 1/4) could be spent by a cheater only on elements the sample
    holds and the full rule leaves out (|e| below TAIL_LEAST, or ill-conditioned).  A cumprod has none: every
    element the sample holds (TAIL_LEAST <= |r| < atol) is checked by the full rule, so the first trip of a cut meets
    the full rule and fails there."""
    ev, model = _evaluation(), CumProd()
    for seed in range(4):
        x = [torch.rand(64, 256, generator=torch.Generator().manual_seed(300 + seed))]
        out = model(*x)
        tol = ev.tolerances(out, BASE)
        facts = child._tail_facts(model, x, out, out.clone(), tol.atol)
        a = out.abs()
        held = int(((a >= compare.TAIL_LEAST) & (a < tol.atol)).sum())
        assert facts["ill_conditioned"] == 0 and facts["checked"] == held > 0, facts


def test_tuple_outputs_with_the_heavy_tail_second_are_held():
    """The float32 cumprod second in a tuple: sampled by its own positions and held to the bound like a lone output."""
    ev, model = _evaluation(), Pair()
    x = [torch.rand(64, 128, generator=torch.Generator().manual_seed(4))]
    out = model(*x)
    assert ev.tolerances(out, BASE).tail is not None
    tol = ev.tolerances(out, BASE, tail=False)
    assert child._sample_agrees(_Remote(tuple(o.clone() for o in out)), out, tol, 5, tail=True) is True
    cut = (out[0].clone(), _cut(out[1]))
    assert child._sample_agrees(_Remote(cut), out, tol, 5, tail=True) == child.SAMPLE_TAIL
    assert not ev.output_passes(ev.tolerances(out, BASE, announced=True), model, x, out, cut)


def test_half_precision_outputs_are_neither_announced_nor_held():
    """float16 / bfloat16 outputs: tiny_elements counts float32 only, so the task never announces the check and the
    sample never holds them (no false trips from half-precision rounding)."""
    ev = _evaluation()
    out = torch.cumprod(torch.rand(64, 128, generator=torch.Generator().manual_seed(6)), 1)
    for dtype in (torch.float16, torch.bfloat16):
        h = out.to(dtype)
        assert ev.tolerances(h, BASE).tail is None
        assert compare.sample_tail_agrees([h.reshape(-1)], [torch.zeros_like(h).reshape(-1)], 1.0)


def test_what_the_runner_can_make_of_its_sample_never_passes_a_cut():
    """The sample is the runner's word, but the positions are the judge's (drawn from a seed after the call, the
    reference picked at them here): values from other positions, another dtype or shape, a count of non-finite
    values, NaN or inf in the tiny elements give a full comparison or a disagreement, never True."""
    ev = _evaluation()
    out = CumProd()(torch.rand(64, 128, generator=torch.Generator().manual_seed(7)))
    tol = ev.tolerances(out, BASE, tail=False)
    tiny = ((out.abs() < tol.atol) & (out.abs() >= compare.TAIL_LEAST)).nonzero()[0]
    for bad in (float("nan"), float("inf"), 0.0):
        c = out.clone()
        c[tuple(tiny)] = bad
        assert child._sample_agrees(_Remote(c), out, tol, 9, tail=True) is not True, bad
    assert child._sample_agrees(_Remote(out.clone(), counts=[1]), out, tol, 9, tail=True) is None
    assert child._sample_agrees(_Remote(out.double()), out, tol, 9, tail=True) is None
    assert child._sample_agrees(_Remote(out[:, :64].contiguous()), out, tol, 9, tail=True) is not True

    class Raises(_Remote):
        def sample(self, seed, numels, itemsize=8):
            raise child.RemoteError({"type": "RuntimeError", "message": "the runner went away"})

    with pytest.raises(child.RemoteError):  # an error is raised, never a pass
        child._sample_agrees(Raises(out), out, tol, 9, tail=True)


# -- finding: a reference that writes into its inputs leaves the timed full rule nothing to check -------------------

class HalvesItsInput(torch.nn.Module):
    """A task whose reference scales its input in place before the product (legal task code: the correctness calls
    give the reference a copy; the timed calls do not, CrossTimer runs it on the judge's own set)."""

    def forward(self, x):
        x.mul_(0.5)
        return torch.cumprod(x, dim=1)


def test_a_reference_that_writes_its_inputs_is_found_and_the_full_rule_gets_the_set_again():
    """The timed reference runs on the call's set itself (no copy inside the window), so on_pair's full rule got
    x/2 where the call got x: the float64 re-run then computed the product of x/4, no tiny element was
    well-conditioned against r, and a cut passed the small-elements check (and the untimed re-run ran the candidate
    on other inputs than the timed call's).  Timing's set-up now finds such a reference
    (_reference_writes_inputs) and on_pair draws the call's set again from its seed (_Inputs) before the full rule."""
    ev, model = _evaluation(), HalvesItsInput()
    g = torch.Generator().manual_seed(8)
    x = torch.rand(64, 128, generator=g)
    out, writes = child._reference_writes_inputs(model, [x])
    assert writes and torch.equal(out, torch.cumprod(x * 0.5, 1))
    assert child._reference_writes_inputs(CumProd(), [x])[1] is False
    args = child._Inputs([x.clone()], seed=1234)
    assert isinstance(args, list) and args.seed == 1234 and torch.equal(args[0], x)
    ref_out = model(*args)  # CrossTimer: the timed reference call, on the set itself
    cut = _cut(ref_out)
    tol = ev.tolerances(ref_out, BASE, announced=True)
    assert tol.tail is not None
    assert ev.output_passes(tol, model, args, ref_out, cut)  # the gap: judged on the written set, nothing checked
    again = [x.clone()]  # the set drawn again from its seed (make_inputs is deterministic in it)
    assert not ev.output_passes(ev.tolerances(ref_out, BASE, announced=True), model, again, ref_out, cut)
    assert ev.output_passes(ev.tolerances(ref_out, BASE, announced=True), model, [x.clone()], ref_out, ref_out.clone())
