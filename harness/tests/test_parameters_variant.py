"""The parameters variant (tasks.PARAMETERS, shared/models.py spread): a model's parameters built with one value
everywhere are refilled with other values, the same in the reference and in any candidate that holds them, by
whatever route it holds them; a kernel that ignores them fails."""

import os

import pytest
import torch
import torch.nn as nn

from kgym_harness.judge import tasks
from kgym_harness.shared import models


class Ref(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3)
        self.gn = nn.GroupNorm(2, c)

    def forward(self, x):
        return self.gn(self.conv(x))


class OwnParameters(nn.Module):
    """An honest rewrite that makes its own norm parameters (torch.ones / torch.zeros), in another order."""

    def __init__(self, c):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(c))
        self.conv = nn.Conv2d(c, c, 3)
        self.weight = nn.Parameter(torch.ones(c))

    def forward(self, x):
        y = self.conv(x)
        return nn.functional.group_norm(y, 2, self.weight, self.bias)


class PlainAttributes(nn.Module):
    """Parameters as plain tensor attributes and a buffer, and a view of one (left alone: it shares storage)."""

    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3)
        self.w = torch.ones(c)
        self.register_buffer("b", torch.zeros(c))
        self.w4 = self.w.view(1, c, 1, 1)

    def forward(self, x):
        return nn.functional.group_norm(self.conv(x), 2, self.w, self.b)


class IgnoresAffine(nn.Module):
    """The wrong probe's w02 in PyTorch: holds the norm, never applies its weight and bias."""

    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3)
        self.gn = nn.GroupNorm(2, c)

    def forward(self, x):
        return nn.functional.group_norm(self.conv(x), 2)


def _out(cls, keys, x):
    m = models.construct(cls, [4], 42, "cpu", spread_keys=keys)
    with torch.no_grad():
        return m(x)


def test_constant_keys_are_the_reference_parameters_of_one_value():
    ref = models.construct(Ref, [4], 42, "cpu")
    assert models.constant_keys(ref) == [(4, 0.0), (4, 1.0)]  # the conv's random weight and bias are not


def test_spread_gives_every_holder_the_same_values_and_a_kernel_must_use_them():
    ref = models.construct(Ref, [4], 42, "cpu")
    keys = models.constant_keys(ref)
    x = torch.randn(2, 4, 8, 8)
    want = _out(Ref, keys, x)
    assert not torch.allclose(want, _out(Ref, None, x))  # the refill changes the reference's output
    for honest in (Ref, OwnParameters, PlainAttributes):
        torch.testing.assert_close(_out(honest, keys, x), want, msg=honest.__name__)
    assert not torch.allclose(_out(IgnoresAffine, keys, x), want, atol=1e-3)


def test_spread_values_follow_from_the_pair_and_keep_a_nonzero_sign():
    a, b = models.spread_values(6, 1.0), models.spread_values(6, 1.0)
    assert torch.equal(a, b) and bool((a >= 0.5).all()) and bool((a < 1.5).all())
    z = models.spread_values(6, 0.0)
    assert bool((z.abs() <= 0.5).all()) and len(set(z.tolist())) == 6
    assert bool((models.spread_values(5, -2.0) < 0).all())


def test_spread_leaves_views_other_sizes_and_one_element_parameters_alone():
    m = PlainAttributes(4)
    m.extra = torch.ones(5)  # another size: not a key
    m.scalar = nn.Parameter(torch.ones(1))
    assert models.constant_keys(m) == []  # one element, and the plain tensors are not parameters
    count = models.spread(m, [(4, 1.0), (4, 0.0)])
    assert count == 2  # w and b; w4 is a view of w
    assert torch.equal(m.w4.reshape(-1), m.w) and torch.equal(m.extra, torch.ones(5))
    assert float(m.scalar.detach()) == 1.0


class PackedAffine(nn.Module):
    """An honest rewrite that packs the norm's weight and bias into one (2, C) parameter and reads its rows
    (tests/fixtures/redteam22/level1_35_packed_views.py)."""

    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3)
        self.affine = nn.Parameter(torch.stack([torch.ones(c), torch.zeros(c)]))
        self.w = self.affine[0]
        self.b = self.affine[1]

    def forward(self, x):
        return nn.functional.group_norm(self.conv(x), 2, self.w, self.b)


def test_disjoint_rows_of_one_storage_are_each_refilled():
    ref = models.construct(Ref, [4], 42, "cpu")
    keys = models.constant_keys(ref)
    x = torch.randn(2, 4, 8, 8)
    assert torch.allclose(_out(PackedAffine, keys, x), _out(Ref, keys, x), atol=1e-5)


def test_an_expanded_view_is_left_as_built():
    m = nn.Module()
    m.e = torch.ones(1).expand(8)
    assert models.spread(m, [(8, 1.0)]) == 0


def test_the_variant_builds_the_same_inputs_as_its_sizes_and_is_not_a_twin():
    v = tasks.parameters_variant({"n": 16}, 42)
    assert (v.name, v.transform, v.dtype, v.weights) == ("parameters", "none", None, "spread")
    plain = tasks.Variant("x", {"n": 16}, 42, "none", None, "")
    assert not tasks._same_inputs(v, plain)


def test_the_runner_checks_the_field():
    from kgym_harness.runner.runner import _spread_keys

    assert _spread_keys(None) is None
    assert _spread_keys([[4, 1], [4, 0.0]]) == [(4, 1.0), (4, 0.0)]
    for bad in ({"a": 1}, [[4]], [["4", 1.0]], [[4, "x"]]):
        with pytest.raises(ValueError):
            _spread_keys(bad)


KB = os.environ.get("KGYM_KERNELBENCH") or os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                                          "kernelbench")


@pytest.mark.skipif(not os.path.isdir(KB), reason="KernelBench not found")
def test_kernelbench_norms_have_keys_and_a_plain_gemm_has_none():
    for tid, has in (("level1/35_GroupNorm_.py", True), ("level2/33_Gemm_Scale_BatchNorm.py", True),
                     ("level1/1_Square_matrix_multiplication_.py", False)):
        m = tasks.load_task(os.path.join(KB, tid), "kgym_test_params_" + tid.replace("/", "_")[:-3])
        plan = tasks.plan_sizes(m, 4096)
        init, _ = tasks.build(m, tasks.Variant("t", dict(plan), 42, "none", None, ""), "cpu")
        assert bool(models.constant_keys(models.construct(m.Model, init, 42, "cpu"))) == has, tid
