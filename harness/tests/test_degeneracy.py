"""Tests of kgym_harness.judge.degeneracy: which variants showed the reference non-zero, input-dependent, not an input."""

import json

import torch

from kgym_harness.judge import degeneracy


def test_zero_by_algebra_stays_degenerate():
    t = degeneracy.Tracker()
    for name in ("base", "seed_1", "large_values"):
        t.add(name, torch.zeros(8, 1), [torch.rand(8, 16) * 100], 1e-4, 1e-4)
    f = t.facts()
    json.dumps(f)
    assert f["zero_everywhere"] and f["constant_everywhere"] and f["compared"] == 2
    assert f["nonzero_on"] == [] and f["input_dependent_on"] == [] and f["checked"] == ["base", "seed_1",
                                                                                          "large_values"]


def test_a_variant_that_breaks_the_degeneracy_is_named():
    t = degeneracy.Tracker()
    x = torch.rand(64, 32)
    t.add("base", torch.full((64,), 2e-6), [x], 1e-4, 1e-4)        # below atol: zero at this tolerance
    t.add("seed_1", torch.full((64,), 3e-6), [x + 1], 1e-4, 1e-4)  # the same, at this tolerance
    t.add("large_values", torch.rand(64), [x * 100], 1e-6, 1e-4)
    f = t.facts()
    assert not f["zero_everywhere"] and not f["constant_everywhere"]
    assert f["nonzero_on"] == ["large_values"] and f["varies_on"] == ["large_values"]
    assert f["input_dependent_on"] == []  # no model given: nothing known about the weights


def test_layouts_are_compared_only_with_their_own_kind():
    """A size variant has another output shape: not compared with base, so not evidence of input dependence;
    an output equal to an input is recorded per variant; a variant re-run alone counts once."""
    t = degeneracy.Tracker()
    x = torch.rand(10, 10)
    t.add("base", x.clone(), [x], 1e-4, 1e-4)
    t.add("size_small", torch.rand(5, 10), [torch.rand(5, 10)], 1e-4, 1e-4)
    t.add("size_small", torch.rand(5, 10), [torch.rand(5, 10)], 1e-4, 1e-4)
    f = t.facts()
    assert f["compared"] == 0 and not f["constant_everywhere"]  # nothing comparable: no claim
    assert f["not_an_input_on"] == ["size_small"] and f["checked"] == ["base", "size_small"]
    signed = torch.randn(10, 10)
    t.add("signed", signed.relu(), [signed], 1e-4, 1e-4)  # ReLU of signed inputs is not its input
    assert t.facts()["not_an_input_on"] == ["size_small", "signed"]
    assert t.facts()["varies_on"] == ["signed"]


def test_large_outputs_are_fingerprinted_not_copied():
    t = degeneracy.Tracker()
    a = torch.rand(300, 300)
    t.add("base", a, [], 1e-4, 1e-4)
    fp = t.first[((tuple(a.shape), str(a.dtype)),)][1][0]
    assert fp.numel() == degeneracy.SAMPLES and fp.dtype == torch.float64
    b = a.clone()
    b.view(-1)[t.positions[((tuple(a.shape), str(a.dtype)),)][0][0]] += 1.0  # a difference where it samples
    t.add("seed_1", b, [], 1e-4, 1e-4)
    assert t.facts()["varies_on"] == ["seed_1"]


def test_checks_read_large_outputs_chunk_by_chunk(monkeypatch):
    """Multi-GB outputs are looked at CHUNK elements at a time (no whole float64 copies): a value beyond
    atol, or a difference from an input, in the last chunk only is still seen."""
    monkeypatch.setattr(degeneracy, "CHUNK", 7)
    t = degeneracy.Tracker()
    zero_but_last = torch.zeros(5, 9)
    zero_but_last[-1, -1] = 1.0
    x = torch.rand(5, 9)
    almost_x = x.clone()
    almost_x[-1, -1] += 1.0
    t.add("base", zero_but_last, [torch.zeros(5, 9)], 1e-4, 1e-4)
    t.add("seed_1", almost_x, [x], 1e-4, 1e-4)
    t.add("seed_2", x.clone(), [x], 1e-4, 1e-4)
    f = t.facts()
    assert f["nonzero_on"] == ["base", "seed_1", "seed_2"]
    assert f["not_an_input_on"] == ["base", "seed_1"]


class _V:
    def __init__(self, name, seed=42, sizes=None, dtype=None):
        self.name, self.seed, self.sizes, self.dtype = name, seed, sizes or {"N": 8}, dtype


def test_an_output_of_the_weights_alone_is_degenerate():
    """The fifteenth session's red team (level3/28): a reference that other weights or other sizes change but no input value does.
    Only variants with one model (seed, sizes, dtype) are compared for input dependence; the base variant's
    second call (new inputs, the same model) counts; one of them that differs repairs it."""
    t = degeneracy.Tracker()
    w42, w43 = torch.rand(8), torch.rand(8)
    for v, out in ((_V("base"), w42), (_V("scaled_x2"), w42), (_V("seed_1", seed=43), w43),
                   (_V("size_odd", sizes={"N": 7}), w42 * 3), (_V("signed"), w42)):
        t.add(v.name, out.clone(), [torch.rand(8)], 1e-4, 1e-4, model=t.model_key(v))
    t.again("base_again", w42.clone(), False, t.model_key(_V("base")))
    f = t.facts()
    json.dumps(f)
    assert f["input_independent_everywhere"] and not f["constant_everywhere"]
    assert f["varies_on"] == ["seed_1", "size_odd"] and f["input_dependent_on"] == []
    assert f["compared_same_model"] == 3  # scaled_x2, signed, base_again against base
    t.again("base_again", w42 + 1.0, True, t.model_key(_V("base")))  # new inputs that change it repair it
    assert t.facts()["compared_same_model"] == 4
    assert not t.facts()["input_independent_everywhere"] and t.facts()["input_dependent_on"] == ["base_again"]


def test_no_same_model_pair_makes_no_claim():
    t = degeneracy.Tracker()
    t.add("base", torch.rand(8), [torch.rand(8)], 1e-4, 1e-4, model=t.model_key(_V("base")))
    t.add("seed_1", torch.rand(8), [torch.rand(8)], 1e-4, 1e-4, model=t.model_key(_V("seed_1", seed=43)))
    t.again("base_again", torch.rand(8), False, t.model_key(_V("other", seed=9)))  # no first output of its model
    f = t.facts()
    assert f["compared_same_model"] == 0 and not f["input_independent_everywhere"]


def test_no_elements_is_a_zero_size_output_only():
    """child._no_elements: the tiny run refuses a task whose reference output holds nothing (DegenerateTask)."""
    import torch

    from kgym_harness.judge import child

    empty = torch.empty(0, 256)
    assert child._no_elements(empty) and child._no_elements((empty, [empty])) and child._no_elements(())
    assert not child._no_elements(torch.zeros(1))
    assert not child._no_elements((empty, torch.zeros(2)))
    assert not child._no_elements(3.0) and not child._no_elements((empty, 3.0))


def test_a_variant_is_read_back_once(monkeypatch):
    """Adding a variant reads its facts (non-zero, the sampled values, whether it is one of its inputs) back in one
    transfer (Tracker._read), whatever the chunks and inputs: each read waits for the GPU, on a shared one a turn
    between contexts.  Nothing outside that one call reads a value; the facts are those of reading one by one."""
    monkeypatch.setattr(degeneracy, "CHUNK", 7)
    monkeypatch.setattr(degeneracy, "SAMPLES", 5)
    x = torch.rand(6, 5)
    state = {"inside": 0, "reads": 0, "outside": 0}
    originals = {name: getattr(torch.Tensor, name) for name in ("item", "tolist", "__bool__", "to")}

    def counted(name):
        fn = originals[name]

        def read(self, *a, **k):
            moves_home = name != "to" or (((a and str(a[0]) == "cpu") or str(k.get("device", "")) == "cpu")
                                          and self.dtype != torch.int64)  # sample positions go the other way
            if moves_home and not state["inside"]:
                state["outside"] += 1
            return fn(self, *a, **k)
        return read

    real_read = degeneracy.Tracker._read

    def one_read(*a):
        state["inside"] += 1
        state["reads"] += 1
        try:
            return real_read(*a)
        finally:
            state["inside"] -= 1

    real_close = degeneracy._close

    def host_close(*a):  # compares the host copies _read made: no read of the GPU's
        state["inside"] += 1
        try:
            return real_close(*a)
        finally:
            state["inside"] -= 1

    t = degeneracy.Tracker()
    t.add("base", x * 2, [x, torch.rand(3)], 1e-4, 1e-4)
    monkeypatch.setattr(degeneracy.Tracker, "_read", staticmethod(one_read))
    monkeypatch.setattr(degeneracy, "_close", host_close)
    for name in originals:
        monkeypatch.setattr(torch.Tensor, name, counted(name))
    t.add("seed_1", x.clone(), [x + 1, x], 1e-4, 1e-4)        # equal to its second input
    t.add("large_values", torch.zeros(6, 5), [x * 100], 1e-4, 1e-4)
    for name, fn in originals.items():
        monkeypatch.setattr(torch.Tensor, name, fn)
    assert state["reads"] == 2 and state["outside"] == 0, state
    f = t.facts()
    assert f["nonzero_on"] == ["base", "seed_1"] and f["varies_on"] == ["seed_1", "large_values"]
    assert f["not_an_input_on"] == ["base", "large_values"]
