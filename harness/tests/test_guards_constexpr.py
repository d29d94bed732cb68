"""The runner's own witness at the interpreter's launch (guards._interpreter_constexprs): a tl.constexpr argument
must be a compile-time constant, as the GPU compiler requires; anything else reached the kernel body as the
object itself (tests/fixtures/attacks/t_a01_popitem_constexpr.py)."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kgym_harness.runner import guards  # noqa: E402


@triton.jit
def _copy(x_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * SCALE, mask=m)


@pytest.mark.parametrize("value,ok", [(2, True), (2.0, True), (True, True), ("x", True), (None, True),
                                      (torch.float32, True), (tl.float16, True), ((1, 2), True), (_copy, True),
                                      (tl.constexpr(3), True),
                                      (torch.ones(2), False), (getattr, False), (torch, False),
                                      (torch.ones(2).copy_, False), ([1, 2], False), ((1, torch.ones(1)), False)])
def test_constexpr_values(value, ok):
    assert guards._constexpr_value_ok(value) == ok


def test_interpreter_launch_refuses_a_tensor_constexpr():
    guards.install_launch_hooks()
    x = torch.arange(8, dtype=torch.float32)
    out = torch.empty_like(x)
    _copy[(1,)](x, out, 8, 2.0, BLOCK=8)
    assert torch.equal(out, x * 2)
    with pytest.raises(guards.ConstexprValueError, match="SCALE was given torch.Tensor"):
        _copy[(1,)](x, out, 8, torch.ones(1), BLOCK=8)
