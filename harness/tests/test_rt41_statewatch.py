"""Red team 41: the runner's per-call state check (guards.StateWatch), against the per-tensor check it replaced
(guards._snapshot then guards._all_same_bits).  Each test failed on StateWatch's first form (d91df5f) because of
one weakness, which its docstring describes as it was then; StateWatch now watches storages (each once, as raw
bytes, with each tensor's place in its storage), reads back with guards' own captured functions, is made inside
the check's error handling, and keeps one chunk at a time and one table of multipliers a watch."""

import os
import sys

os.environ["TRITON_INTERPRET"] = "1"  # before the kernels of test_guards are decorated

import pytest  # noqa: E402
import torch  # noqa: E402
from torch.multiprocessing.reductions import StorageWeakRef  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from test_guards import Honest, MutateParam, launch  # noqa: E402

from kgym_harness.judge import policy  # noqa: E402
from kgym_harness.runner import guards  # noqa: E402
from kgym_harness.shared import transport  # noqa: E402

_VIEWS = {"view", "_unsafe_view", "slice", "detach", "alias", "_reshape_alias", "as_strided", "reshape", "t",
          "transpose", "expand"}


class Cost(TorchDispatchMode):
    """ATen operators other than views (``n``, ``ops`` by name), and the peak of the bytes held by the storages
    those operators made (``peak``), while the mode is on."""

    def __init__(self):
        super().__init__()
        self.n, self.ops, self.live, self.peak = 0, {}, {}, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name not in _VIEWS:
            self.n += 1
            self.ops[name] = self.ops.get(name, 0) + 1
            for o in (out if isinstance(out, (tuple, list)) else [out]):
                if isinstance(o, torch.Tensor) and not o._is_view():
                    st = o.untyped_storage()
                    self.live[st.data_ptr()] = (StorageWeakRef(st), st.nbytes())
            self.live = {k: v for k, v in self.live.items() if not v[0].expired()}
            self.peak = max(self.peak, sum(v[1] for v in self.live.values()))
        return out


def _watch_cost(ts, **kw):
    with Cost() as c:
        watch = guards.StateWatch(ts, **kw)
        changed = watch.changed()
    assert not any(changed)
    return c, watch


def _old_cost(ts):
    with Cost() as c:
        before = guards._snapshot(ts)
        assert all(guards._all_same_bits(list(zip(ts, before))))
    return c


# -- goal 1: changes the per-tensor check found and StateWatch does not ----------------------------------------------

def _call_and_check(model_cls):
    g = guards.Guards(policy.load_default())
    g.install()
    with torch.no_grad():
        g.call(model_cls(), [torch.rand(2, 8)], "correctness", "v1")
    g.check_process("correctness")
    return {f["type"] for f in g.findings}


def test_state_check_does_not_take_transport_read_all_at_call_time(monkeypatch):
    """StateWatch looks up ``transport.read_all`` (and ``transport.fingerprint_sum``) when each call's watch is
    made, and the transport module is not among the functions check_process holds by identity
    (_functions_to_guard).  A candidate that replaces ``read_all`` in its __init__ (here: every chunk reads back
    'same') makes every later state check say nothing changed, in copy mode too, and no harness_tampering is
    found.  The per-tensor check used only guards' own functions and torch functions captured at import."""
    monkeypatch.setattr(transport, "read_all", transport.read_all)  # restored after the test

    class Sneaky(MutateParam):
        def __init__(self):
            super().__init__()
            sys.modules["kgym_harness.shared.transport"].read_all = lambda values: [False] * len(values)

    kinds = _call_and_check(Sneaky)
    assert kinds & {"parameter_mutation", "harness_tampering"}, kinds


def test_state_check_does_not_use_torch_stack_as_the_candidate_left_it(monkeypatch):
    """transport.read_all stacks the chunks' flags with ``torch.stack`` looked up at call time; the per-tensor
    check stacked with ``guards._stack``, captured at import in the zygote.  torch.stack is not among the guarded
    functions, so a candidate that wraps it (bool vectors come back all False) hides every change of its state."""
    real = torch.stack
    monkeypatch.setattr(torch, "stack", real)  # restored after the test

    class Sneaky(MutateParam):
        def __init__(self):
            super().__init__()

            def stack(tensors, *a, **k):
                out = real(tensors, *a, **k)
                return torch.zeros_like(out) if out.dtype == torch.bool and out.dim() == 1 else out

            torch.stack = stack

    kinds = _call_and_check(Sneaky)
    assert kinds & {"parameter_mutation", "harness_tampering"}, kinds


class ConjState(Honest):
    """A complex constant kept as a conjugate view (x.conj() is lazy: a conj bit, the same bytes)."""

    def __init__(self):
        super().__init__()
        self.c = torch.randn(4, dtype=torch.complex64).conj()


def test_a_state_check_that_breaks_before_the_call_is_a_guard_error_not_the_candidate_s_exception():
    """StateWatch is built in Guards.call before the forward and outside the try that turns a broken check into
    guard_error: a state tensor whose bytes it cannot view (a conjugate view: view(uint8) raises) makes
    Guards.call raise the RuntimeError as if forward had raised it (the runner answers an error for the call: the
    candidate's fault), and forward never runs.  The per-tensor check's snapshot (a clone) took the same state,
    and its comparison's failure came out as guard_error ('a check that breaks is kgym's bug, never the
    candidate's')."""
    g = guards.Guards(policy.load_default())
    g.install()
    with torch.no_grad():
        out = g.call(ConjState(), [torch.rand(2, 8)], "correctness", "v1")  # raises RuntimeError today
    assert out.shape == (2, 8)
    assert {f["type"] for f in g.findings} <= {"guard_error"}


# -- goal 2: states for which the check costs far more than it should ------------------------------------------------

@pytest.mark.parametrize("copy_max", [None, 0])
def test_non_contiguous_state_makes_the_check_per_tensor_again(copy_max):
    """A model of many small non-contiguous tensors (each a transposed 16x16, 1 KiB; 1,024 of them: one chunk of
    16) costs a copy a tensor in each pass (_flat_bytes: .contiguous()), 2,048 copies a call where the same state
    stored contiguously costs ~65 (copies) or ~370 (fingerprints) operators in all: trim_init_many with
    transposed parameters is ~16,000 launches a call again."""
    g = torch.Generator().manual_seed(0)
    cont = [torch.randn(16, 16, generator=g) for _ in range(1024)]
    trans = [t.t() for t in cont]
    c_cont, w = _watch_cost(cont, chunk=1 << 16, copy_max=copy_max)
    c_trans, _ = _watch_cost(trans, chunk=1 << 16, copy_max=copy_max)
    assert len(w.chunks) == 16
    assert c_trans.n <= 2 * c_cont.n, (c_cont.n, c_trans.n, c_trans.ops)


def test_fingerprints_keep_a_whole_copy_of_a_non_contiguous_state():
    """Above STATE_COPY_MAX the fingerprints stand for copies so that 'the check's memory is a chunk and not the
    model's size again'.  But _pack keeps every tensor's contiguous bytes in ``flat`` for the whole pass: with
    non-contiguous tensors that is a copy of the whole state, held until the last chunk (a transposed 8 GiB
    trim_init_many: 8 GiB more a pass, what fingerprints were for).  Here 1 MiB of state in 64 KiB chunks: the
    contiguous state peaks at ~0.33 MB of the check's storages, the transposed one at ~1.38 MB."""
    g = torch.Generator().manual_seed(0)
    cont = [torch.randn(16, 16, generator=g) for _ in range(1024)]
    trans = [t.t() for t in cont]
    state = sum(t.numel() * t.element_size() for t in cont)
    c_cont, _ = _watch_cost(cont, chunk=1 << 16, copy_max=0)
    c_trans, _ = _watch_cost(trans, chunk=1 << 16, copy_max=0)
    assert c_cont.peak < state // 2
    assert c_trans.peak < state // 2, (c_cont.peak, c_trans.peak, state)


def test_copies_hold_the_state_twice_where_the_per_tensor_check_held_it_once():
    """In copy mode changed() keeps every chunk's packed bytes after the call (``nows``, for the attribution of
    a rare change) beside the copies made before it: a state of small tensors costs twice its size in memory
    (up to 2 x STATE_COPY_MAX = 512 MiB on the device a call), where the per-tensor check held one copy (its
    comparison reads contiguous tensors where they lie).  Here 1 MiB of 1 KiB tensors: ~2.1 MB against ~1.05 MB;
    3.15 MB for the same tensors transposed (``flat`` too)."""
    g = torch.Generator().manual_seed(0)
    cont = [torch.randn(16, 16, generator=g) for _ in range(1024)]
    old = _old_cost(cont)
    new, watch = _watch_cost(cont, chunk=1 << 16)
    assert watch.copy
    assert new.peak <= 1.25 * old.peak, (old.peak, new.peak)


def test_aliased_state_is_checked_once_per_alias_and_by_its_logical_size():
    """The check sizes and reads each watched tensor by its logical bytes, and watches each alias on its own:
    64 views of one 256 KiB parameter held as plain attributes cost 64 times the check of the parameter (in
    fingerprint mode, 256 chunks' fingerprints instead of 4), and a 4-byte storage expanded to 4M elements is
    materialised (16 MiB) and fingerprinted as 16 MiB.  A candidate's __init__ can thus make every call's check
    cost gigabytes of copies (or an out-of-memory re-run) for a few bytes of real state.  (The per-tensor check
    had the same cost; the chunked one was meant to bound it by the state's size.)"""
    w = torch.randn(1 << 16)
    one, _ = _watch_cost([w], chunk=1 << 16, copy_max=0)
    views, _ = _watch_cost([w.view(-1) for _ in range(64)], chunk=1 << 16, copy_max=0)
    expanded, _ = _watch_cost([torch.zeros(1).expand(1 << 22)], chunk=1 << 16, copy_max=0)
    assert views.n <= 4 * one.n and expanded.peak <= 1 << 20, (one.n, views.n, expanded.n, expanded.peak)


def test_fingerprints_do_not_copy_every_chunk_of_a_tensor_behind_an_odd_sized_one():
    """With fingerprints a chunk's bytes are copied first when they start at a byte not a multiple of 4
    (_summary).  One int8 tensor of 1 element before a large parameter shifts every chunk boundary of the
    parameter off by one byte: each of its chunks (single pieces, views where they lie when aligned) is then
    cloned, in both passes: a copy of the whole parameter a pass (here 32 clones of 64 KiB; 3 int8 elements more
    and there are none)."""
    big = torch.randn(1 << 18)
    aligned, _ = _watch_cost([torch.zeros(4, dtype=torch.int8), big], chunk=1 << 16, copy_max=0)
    odd, _ = _watch_cost([torch.zeros(1, dtype=torch.int8), big], chunk=1 << 16, copy_max=0)
    assert aligned.ops.get("clone", 0) == 0
    assert odd.ops.get("clone", 0) <= 2, odd.ops
