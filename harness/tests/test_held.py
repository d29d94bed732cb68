"""Held reference outputs (judge/child.py _Held): what a kept judge keeps of a variant for its task's next jobs, and
that nothing done to what it hands out reaches what it keeps."""
import torch

from kgym_harness.judge import child


def _keep(key, inputs, out, init=(3,), tol="tol"):
    before = child._Held.snapshot(key, list(init), inputs)
    child._Held.keep(key, list(init), before, inputs, out, tol)
    return child._HELD.get(key)


def setup_function(_fn):
    child._HELD.clear()
    child._HELD.nbytes = 0


def test_held_copies_are_the_judges_own():
    x, out = torch.arange(6.0), (torch.ones(2), [torch.zeros(3)])
    held = _keep("k", [x, 5], out)
    assert held is not None and held.init == (3,) and held.tol == "tol"
    x.fill_(-1.0)  # the block the copy came from, written later (by a runner)
    out[0].fill_(9.0)
    assert torch.equal(held.inputs[0], torch.arange(6.0)) and held.inputs[1] == 5
    assert torch.equal(held.ref_out[0], torch.ones(2))
    given, given_out = child._Held.fresh_inputs(held.inputs, "cpu"), child._Held.fresh(held.ref_out, "cpu")
    given[0].zero_()  # what the judge hands out is a copy, whatever happens to it
    given_out[1][0].fill_(7.0)
    assert torch.equal(held.inputs[0], torch.arange(6.0)) and torch.equal(held.ref_out[1][0], torch.zeros(3))
    assert isinstance(given_out, tuple) and isinstance(given_out[1], list)


def test_not_held_where_it_would_not_be_the_same():
    assert _keep(None, [torch.ones(2)], torch.ones(2)) is None  # no key: not a judge that may be kept
    assert _keep("init", [torch.ones(2)], torch.ones(2), init=(torch.ones(1),)) is None  # a tensor init argument
    assert _keep("arg", [torch.ones(2), [1, 2]], torch.ones(2)) is None  # a mutable argument
    assert _keep("out", [torch.ones(2)], {"y": torch.ones(2)}) is None  # an output that is not tensors
    x = torch.ones(4)
    before = child._Held.snapshot("mut", [3], [x])
    x.add_(1.0)  # the reference changed its inputs: the candidate would get other inputs than the reference had
    child._Held.keep("mut", [3], before, [x], torch.ones(4), "tol")
    assert child._HELD.get("mut") is None


def test_budgets_and_least_recently_used_out_first(monkeypatch):
    monkeypatch.setattr(child, "_HELD_ENTRY_MAX", 1000)
    monkeypatch.setattr(child, "_HELD_TOTAL_MAX", 2000)
    assert _keep("big", [torch.ones(200)], torch.ones(100)) is None  # 1,200 bytes: over one entry's budget
    assert child._HELD.nbytes == 0
    for k in ("a", "b", "c"):  # 800 bytes each
        assert _keep(k, [torch.ones(100)], torch.ones(100)) is not None
    assert list(child._HELD) == ["b", "c"] and child._HELD.nbytes == 1600  # a went to make room for c
    child._HELD.get("b")  # used: now the most recent
    assert _keep("d", [torch.ones(100)], torch.ones(100)) is not None
    assert list(child._HELD) == ["b", "d"] and child._HELD.nbytes == 1600


def test_unchanged_means_bit_for_bit():
    """A reference that changed its inputs only in ways torch.equal does not see (the sign of a zero) is not held;
    one whose inputs hold NaN and were left alone is."""
    x = torch.tensor([0.0, 1.0])
    before = child._Held.snapshot("zero", [3], [x])
    x[0] = -0.0
    child._Held.keep("zero", [3], before, [x], torch.ones(2), "tol")
    assert child._HELD.get("zero") is None
    y = torch.tensor([float("nan"), 1.0])
    before = child._Held.snapshot("nan", [3], [y])
    child._Held.keep("nan", [3], before, [y], torch.ones(2), "tol")
    assert child._HELD.get("nan") is not None


def test_the_budget_follows_the_address_space_limit(monkeypatch):
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda which: (8 << 20, resource.RLIM_INFINITY))
    assert child._held_total_max() == 1 << 20  # an eighth of an 8 MiB limit
    assert _keep("over", [torch.ones(200_000)], torch.ones(200_000)) is None  # 1.6 MB: more than that
    assert _keep("under", [torch.ones(1000)], torch.ones(1000)) is not None
