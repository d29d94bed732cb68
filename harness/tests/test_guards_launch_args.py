"""The runner's own witness at every Triton launch (guards._interpreter_arguments on the interpreter's
GridExecutor.__call__, guards._jit_arguments on JITFunction.run): each argument, constexpr or not, given or filled
from a default, is what Triton's GPU launcher takes (a plain tensor, a bool/int/float, None, a tuple of those, a
TensorDescriptor, a @triton.jit function; a tl.constexpr also a string or a dtype), or the launch is refused
before the kernel body runs.  Triton's interpreter hands anything else to the body as the object itself, where
Python runs inside the launch, out of the recorders' sight (tests/fixtures/attacks/t_a01_popitem_constexpr.py,
u_a01..u_a05)."""
import os
import sys
import types

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from kgym_harness.judge import policy  # noqa: E402
from kgym_harness.runner import guards  # noqa: E402

guards.install_launch_hooks()


@triton.jit
def _copy(x_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * SCALE, mask=m)


# Kernels whose body shows whether it ran: in the interpreter, a list that reaches the body is appended to.
@triton.jit
def _body_appends(L, n):
    L.append(n)


@triton.jit
def _body_marks(flag_ptr, V):
    tl.store(flag_ptr, 1)


SMUGGLED = []


@triton.jit
def _default_smuggles(x_ptr, n, L=SMUGGLED):
    L.append(n)


class _Int(int):
    def __add__(self, other):
        return 0


class _Float(float):
    pass


class _Indexable:
    def __index__(self):
        return 3

    def __float__(self):
        return 3.0


class _SubTensor(torch.Tensor):
    pass


def _own_attribute_tensor():
    t = torch.ones(4)
    t.data_ptr = lambda: 0
    return t


def _helper(x):
    return x


ALLOWED = [torch.ones(2), torch.nn.Parameter(torch.ones(2)), True, 3, 2**40, 2.5, None, (1, 2), (torch.ones(1), 3),
           ((1, 2), (3, None)), torch.Size([2, 3]), tl.constexpr(3), _copy,
           TensorDescriptor.from_tensor(torch.ones(16, 16), [16, 16]), triton.reinterpret(torch.ones(2), tl.float16)]
CONSTEXPR_ALLOWED = [2, 2.0, True, "x", None, torch.float32, tl.float16, tl.pointer_type(tl.float32), (1, 2), _copy,
                     tl.constexpr(3), tl.constexpr("relu")]
# (value, class name in the message, whether it is only a mistake: the error, no finding)
REFUSED = [([1, 2], "list", True), ([torch.ones(1), torch.ones(1)], "list", False), ({"a": torch.ones(1)}, "dict", False),
           (torch, "module", False), (_helper, "function", False), (getattr, "builtin_function_or_method", False),
           (torch.ones(2).copy_, "builtin_function_or_method", False), (torch.nn.Linear(2, 2), "Linear", False),
           (_Indexable(), "_Indexable", False), (np.ones(2), "ndarray", False), (np.int64(3), "int64", False),
           (_Int(3), "_Int", False), (_Float(1.0), "_Float", False), (torch.ones(2).as_subclass(_SubTensor), "_SubTensor", False),
           (_own_attribute_tensor(), "Tensor", False), ((1, [2]), "tuple", True), ((1, [torch.ones(1)]), "tuple", False),
           ("relu", "str", True), (torch.float32, "dtype", True), (tl.float16, "dtype", True), (1j, "complex", True),
           ((i for i in range(2)), "generator", False), (types.SimpleNamespace(x=1), "SimpleNamespace", False),
           (tl.constexpr(torch.ones(1)), "constexpr", False)]
CONSTEXPR_REFUSED = [(torch.ones(2), "Tensor"), (getattr, "builtin_function_or_method"), (torch, "module"),
                     (torch.ones(2).copy_, "builtin_function_or_method"), ([1, 2], "list"),
                     ((1, torch.ones(1)), "tuple"), (_Int(3), "_Int"), (np.float32(2.0), "float32")]


@pytest.mark.parametrize("value", ALLOWED, ids=lambda v: type(v).__name__)
def test_allowed_arguments(value):
    assert guards._argument_ok(value, False)


@pytest.mark.parametrize("value", CONSTEXPR_ALLOWED, ids=lambda v: type(v).__name__)
def test_allowed_constexpr_values(value):
    assert guards._argument_ok(value, True)


@pytest.mark.parametrize("value,name,inert", REFUSED, ids=lambda v: type(v).__name__ if not isinstance(v, str) else v)
def test_refused_arguments(value, name, inert):
    assert not guards._argument_ok(value, False)
    assert guards._inert(value) == inert


@pytest.mark.parametrize("value,name", CONSTEXPR_REFUSED, ids=lambda v: type(v).__name__ if not isinstance(v, str) else v)
def test_refused_constexpr_values(value, name):
    assert not guards._argument_ok(value, True)


def test_nesting_is_bounded():
    deep = 1
    for _ in range(guards._DEPTH + 1):
        deep = (deep,)
    assert not guards._argument_ok(deep, False)


def test_interpreter_launch_refuses_a_tensor_constexpr():
    x = torch.arange(8, dtype=torch.float32)
    out = torch.empty_like(x)
    _copy[(1,)](x, out, 8, 2.0, BLOCK=8)
    assert torch.equal(out, x * 2)
    with pytest.raises(guards.ConstexprValueError, match="tl.constexpr parameter SCALE was given Tensor"):
        _copy[(1,)](x, out, 8, torch.ones(1), BLOCK=8)


@pytest.mark.parametrize("value,name,inert", REFUSED, ids=lambda v: type(v).__name__ if not isinstance(v, str) else v)
def test_interpreter_launch_refuses_before_the_body_runs(value, name, inert):
    flag = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(guards.LaunchArgumentError, match=f"_body_marks: the parameter V was given {name}: "):
        _body_marks[(1,)](flag, value)
    assert flag.item() == 0
    _body_marks[(1,)](flag, 7)  # the same launch with a number runs its body
    assert flag.item() == 1


def test_a_list_by_keyword_says_what_to_pass():
    box = []
    with pytest.raises(guards.LaunchArgumentError, match="pass its tensors and numbers as separate arguments"):
        _body_appends[(1,)](n=1, L=box)
    assert box == []


def test_a_default_is_checked_too():
    with pytest.raises(guards.LaunchArgumentError, match="_default_smuggles: the parameter L was given list"):
        _default_smuggles[(1,)](torch.ones(1), 1)
    assert SMUGGLED == []


CALLED = []


def _untyped(x):
    CALLED.append(x)
    return x


@triton.jit
def _helper_smuggles(x, F=_untyped):
    return F(x)


@triton.jit
def _helper_smuggles_kw(x, *, F=_untyped):
    return F(x)


@triton.jit
def _calls_helper(x_ptr, n):
    v = _helper_smuggles(n)
    tl.store(x_ptr, v)


@triton.jit
def _calls_helper_kw(x_ptr, n):
    v = _helper_smuggles_kw(n)
    tl.store(x_ptr, v)


@triton.jit
def _helper_honest(x, SCALE: tl.constexpr = 2.0, ACT: tl.constexpr = "relu", DT: tl.constexpr = tl.float32,
                   OFF=1, NOTHING=None):
    y = x * SCALE + OFF
    if ACT == "relu":
        y = tl.maximum(y, 0.0)
    return y.to(DT)


@triton.jit
def _calls_honest(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, _helper_honest(tl.load(x_ptr + offs)))


def test_a_device_function_s_default_is_checked():
    """A helper called from a kernel body fills in its defaults there, out of the launch check's sight: a
    function given so would run inside the launch (red team, 2026-11-26: tests/fixtures/attacks/v_helper_default_*).
    Refused before the helper's body runs, and a finding; the defaults of an honest helper (numbers, a string,
    a dtype, None) pass, and what the body passes explicitly is not read."""
    g = guards.Guards(policy.load_default())
    g.install()

    class M(torch.nn.Module):
        def forward(self, x):
            _calls_helper[(1,)](x, 1)
            return x

    with pytest.raises(Exception, match="_helper_smuggles: the tl.constexpr parameter F was given function"):
        g.call(M(), [torch.zeros(1)], "correctness", "base")

    class K(torch.nn.Module):  # a keyword-only default
        def forward(self, x):
            _calls_helper_kw[(1,)](x, 1)
            return x

    with pytest.raises(Exception, match="_helper_smuggles_kw: the tl.constexpr parameter F was given function"):
        g.call(K(), [torch.zeros(1)], "correctness", "base")
    assert CALLED == []
    assert [f["evidence"]["parameter"] for f in g.findings if f["type"] == "launch_argument"] == ["F", "F"]
    x = torch.tensor([-1.0, 0.5, 2.0, -3.0])
    out = torch.empty_like(x)
    _calls_honest[(1,)](x, out, BLOCK=4)
    assert torch.equal(out, torch.clamp(x * 2 + 1, min=0))


def test_not_gated_on_the_launch_log():
    """The candidate can reach LOG (a red team set LOG.depth through exec to switch the recorders off): the check
    does not read it."""
    box = []
    depth, active = guards.LOG.depth, guards.LOG.active
    guards.LOG.depth, guards.LOG.active = 1 << 30, False
    try:
        with pytest.raises(guards.LaunchArgumentError):
            _body_appends[(1,)](box, 1)
    finally:
        guards.LOG.depth, guards.LOG.active = depth, active
    assert box == []


class _Smuggles(torch.nn.Module):
    """Launches _body_appends with ``value`` as L (a list reaching the body is appended to), then an honest
    kernel; ``catch``: a refused launch is caught, as a candidate outside the language could."""

    def __init__(self, value, catch=False):
        super().__init__()
        self.value, self.catch = value, catch

    def forward(self, x):
        out = torch.empty_like(x)
        try:
            _body_appends[(1,)](self.value, 1)
        except guards.LaunchArgumentError:
            if not self.catch:
                raise
        _copy[(1,)](x, out, x.numel(), 1.0, BLOCK=8)
        return out


@pytest.mark.parametrize("catch", [False, True], ids=["raised", "caught"])
def test_a_refused_launch_is_a_finding(catch):
    g = guards.Guards(policy.load_default())
    g.install()
    box = [torch.ones(1)]
    model = _Smuggles(box, catch=catch)
    if catch:
        g.call(model, [torch.ones(8)], "correctness", "base")
    else:
        with pytest.raises(guards.LaunchArgumentError):
            g.call(model, [torch.ones(8)], "correctness", "base")
    found = [f for f in g.findings if f["type"] == "launch_argument"]
    assert len(found) == 1, g.findings
    assert (found[0]["stage"], found[0]["variant"]) == ("correctness", "base")
    assert found[0]["evidence"] == {"kernel": "_body_appends", "parameter": "L", "class": "list", "constexpr": False}
    assert len(box) == 1  # the body never ran


def test_a_mistake_is_only_the_error():
    g = guards.Guards(policy.load_default())
    g.install()
    with pytest.raises(guards.LaunchArgumentError, match="declare the parameter `: tl.constexpr`"):
        g.call(_Smuggles("relu"), [torch.ones(8)], "correctness", "base")
    assert [f for f in g.findings if f["type"] == "launch_argument"] == []


def test_honest_launches_pass():
    x = torch.arange(16, dtype=torch.float32)
    out = torch.empty_like(x)
    _copy[(2,)](x, out, x.numel(), 3.0, BLOCK=8)
    assert torch.equal(out, x * 3)
    flag = torch.zeros(1, dtype=torch.int32)
    for value in ALLOWED:
        if type(value) is not bool:  # Triton 3.6's interpreter cannot convert a bool argument (int1 from int32)
            _body_marks[(1,)](flag, value)
    assert flag.item() == 1


# The GPU path: JITFunction.run's check runs before Triton binds anything, so it can be exercised without a GPU
# (an allowed launch would go on to need a driver; these are refused first).
def _gpu_kernel(x_ptr, L, n, BLOCK: tl.constexpr, D=None, E=SMUGGLED):
    pass


GPU_KERNEL = JITFunction(_gpu_kernel)


def test_jit_arguments_accept_what_the_launcher_takes():
    guards._jit_arguments(GPU_KERNEL, (torch.ones(4), (torch.ones(1), 2), 4), {"BLOCK": 128, "D": None, "E": 1})


@pytest.mark.parametrize("args,kwargs,message", [
    ((torch.ones(4), [torch.ones(1)], 4), {"BLOCK": 128, "E": 1}, "parameter L was given list"),
    ((torch.ones(4), 1, 4), {"BLOCK": torch.ones(1), "E": 1}, "tl.constexpr parameter BLOCK was given Tensor"),
    ((torch.ones(4), 1, 4), {"BLOCK": 128, "D": torch, "E": 1}, "parameter D was given module"),
    ((torch.ones(4), 1, 4), {"BLOCK": 128}, "parameter E was given list"),  # its default
    ((_own_attribute_tensor(), 1, 4), {"BLOCK": 128, "E": 1}, "parameter x_ptr was given Tensor"),
], ids=["list", "tensor_constexpr", "module_keyword", "default", "own_attribute"])
def test_jit_launch_refuses_before_triton_reads_it(args, kwargs, message):
    with pytest.raises(guards.LaunchArgumentError, match=message):
        GPU_KERNEL[(1,)](*args, **kwargs)


class _Noisy:
    """A default whose comparison is code (KernelParam.has_default compares with !=)."""
    ran = []

    def __ne__(self, other):
        _Noisy.ran.append("ne")
        return True

    def __eq__(self, other):
        _Noisy.ran.append("eq")
        return False

    __hash__ = object.__hash__


def _gpu_noisy_default(x_ptr, D=_Noisy()):
    pass


def test_jit_check_runs_nothing_of_the_candidates():
    kernel = JITFunction(_gpu_noisy_default)
    _Noisy.ran.clear()
    with pytest.raises(guards.LaunchArgumentError, match="parameter D was given _Noisy"):
        kernel[(1,)](torch.ones(1))
    assert _Noisy.ran == []

