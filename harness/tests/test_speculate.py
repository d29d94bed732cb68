"""The runner's speculative compile of a kernel's odd-size specialisation (kgym_harness.runner.speculate, an experiment
of issue 36 behind KGYM_SPECULATE=1): the source it speculates is exactly the one Triton builds for an odd-size call
(Triton's own binder decides, for an sm_90 target: no GPU is needed to compile), that call then loads it from the
cache instead of compiling, and nothing of the speculation can fail a call."""

import threading

import pytest
import torch

from kgym_harness.runner import speculate

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs * stride, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
'''


def test_odd_attrs_drops_integer_divisibility_only():
    sig = {"x": "*fp32", "n": "i32", "m": "i64", "s": "fp32", "B": "constexpr"}
    attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]], (2,): [["tt.divisibility", 16]]}
    out = speculate.odd_attrs(sig, attrs)
    assert out == {(0,): [["tt.divisibility", 16]], (1,): [], (2,): []}
    assert list(out) == list(attrs)  # the order is part of the source's hash
    assert attrs[(1,)] == [["tt.divisibility", 16]]  # the caller's dict untouched
    assert speculate.odd_attrs(sig, {(0,): [["tt.divisibility", 16]], (1,): []}) is None  # nothing to speculate


class FakeSource:
    def __init__(self, fn, signature, constexprs=None, attrs=None):
        self.fn, self.signature, self.constants, self.attrs = fn, signature, constexprs or {}, attrs or {}

    def hash(self):
        return repr((self.fn, sorted(self.signature.items()), sorted(self.constants.items()), str(self.attrs)))


SIG = {"x": "*fp32", "n": "i32"}
EVEN = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
ODD = {(0,): [["tt.divisibility", 16]], (1,): []}


def test_a_compile_speculates_once_and_the_odd_call_waits_for_it():
    gate, calls = threading.Event(), []

    def compile_fn(src, target=None, options=None):
        calls.append((threading.current_thread().name.startswith("kgym-speculate"), str(src.attrs)))
        if src.attrs == ODD and calls[-1][0]:
            gate.wait(5)  # the background compile is still running when the odd call comes
        return ("kernel", str(src.attrs))

    spec = speculate.Speculator(compile_fn, FakeSource)
    assert spec(FakeSource("k", SIG, {}, EVEN), target="t", options={}) == ("kernel", str(EVEN))
    assert spec(FakeSource("k", SIG, {}, EVEN), target="t", options={})  # again: no second speculation
    assert len(spec.pending) == 1 and spec.started == 1
    done = []
    waiter = threading.Thread(target=lambda: done.append(spec(FakeSource("k", SIG, {}, ODD), target="t")))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive()  # waits for the background compile of the same source
    gate.set()
    waiter.join(5)
    assert done == [("kernel", str(ODD))]
    assert [c for c in calls if c[0]] == [(True, str(ODD))]  # one background compile, of the odd source only


def test_a_failed_speculation_is_not_the_calls_failure_and_speculations_are_bounded():
    def compile_fn(src, target=None, options=None):
        if threading.current_thread().name.startswith("kgym-speculate"):
            raise RuntimeError("ptxas failed")
        return "kernel"

    spec = speculate.Speculator(compile_fn, FakeSource, max_speculations=2)
    for name in ("a", "b", "c"):
        assert spec(FakeSource(name, SIG, {}, EVEN)) == "kernel"
    assert spec.started == 2 and len(spec.pending) == 2
    assert spec(FakeSource("a", SIG, {}, ODD)) == "kernel"  # its speculation raised: compiled here


def test_a_source_it_cannot_read_is_compiled_as_it_is():
    spec = speculate.Speculator(lambda src, *a, **k: "kernel", FakeSource)
    assert spec("a path to an IR file") == "kernel"  # not an AST source: nothing speculated
    assert spec.started == 0


def test_a_subclass_source_is_not_speculated_as_the_base_class():
    """Gluon's GluonASTSource is an ASTSource: remade as the base class it would be compiled as Triton (an MLIR error
    on the runner's stderr, or another program under the same cache key: the key holds no language)."""
    made = []

    class GluonLike(FakeSource):
        pass

    spec = speculate.Speculator(lambda src, *a, **k: made.append(type(src).__name__) or "kernel", FakeSource)
    assert spec(GluonLike("g", SIG, {}, EVEN)) == "kernel"
    assert spec.started == 0 and made == ["GluonLike"]


# The compile-path check runs in a process of its own, without the interpreter: a process that has run kernels in
# Triton's interpreter (the rest of this suite) has triton.language patched, and a real compile there fails.
CHECK = '''
import json, sys
import torch
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile, make_backend
from triton.runtime.jit import create_function_from_signature
from kgym_harness.runner import speculate
sys.path.insert(0, sys.argv[1])
from kgym_spec_kernel import add_kernel as fn

target = GPUTarget("cuda", 90, 32)
backend = make_backend(target)
binder = create_function_from_signature(fn.signature, fn.params, backend)
x = torch.zeros(4096)


def source(n, stride):
    # What JITFunction.run builds for a call with these sizes (its binder and _pack_args).
    bound, specialization, options = binder(x, x, x, n, stride, BLOCK=128)
    options, signature, constexprs, attrs = fn._pack_args(backend, {"BLOCK": 128}, bound, specialization, options)
    return ASTSource(fn, signature, constexprs, attrs), options


hits = []
knobs.compilation.listener = lambda src, cache_hit, **_: hits.append((str(src.attrs), cache_hit))
spec = speculate.Speculator(compile, ASTSource)
even, options = source(1024, 32)
spec(even, target=target, options=options.__dict__)
speculated = len(spec.pending)
for fut in spec.pending.values():
    fut.result(timeout=120)
odd, options = source(1023, 3)
matches = odd.hash() in spec.pending
spec(odd, target=target, options=options.__dict__)
print(json.dumps({"speculated": speculated, "matches": matches, "odd": str(odd.attrs), "hits": hits}))
'''


def test_the_odd_call_finds_the_speculated_binary(tmp_path):
    """Triton's own binder builds the sources (no GPU needed to compile for sm_90): the speculated one is the odd-size
    call's, and that call loads it from the cache."""
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "kgym_spec_kernel.py").write_text(KERNEL)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(speculate.__file__))))
    out = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["speculated"] == 1 and r["matches"]  # the speculated source is the one the odd call builds
    odd = [tuple(h) for h in r["hits"] if h[0] == r["odd"]]
    assert odd == [(r["odd"], False), (r["odd"], True)]  # compiled in the background, then loaded by the call


def test_install_stands_in_for_tritons_compile(monkeypatch):
    import triton.compiler as tc

    monkeypatch.setattr(tc, "compile", tc.compile)
    spec = speculate.install()
    try:
        assert isinstance(spec, speculate.Speculator) and tc.compile is spec
        assert spec.pool is not None  # its thread started at the set-up, not in the candidate's first call
        assert speculate.install() is None  # once
    finally:
        spec.pool.shutdown(wait=True)


def test_speculating_inside_a_call_is_not_a_thread_the_candidate_started(monkeypatch):
    """The runner's order: speculate.install() at the set-up, the guards' baseline at the load, then the candidate's
    first call compiles (and speculates) inside forward.  The speculation's thread must not be the candidate's
    thread_spawned (a "hack" in the default policy) after the call or after the stage."""
    import triton.compiler as tc

    from kgym_harness.judge import policy
    from kgym_harness.runner import guards

    monkeypatch.setattr(tc, "compile", lambda src, *a, **k: "kernel")
    monkeypatch.setattr(tc, "ASTSource", FakeSource)
    spec = speculate.install()
    assert spec is not None
    g = guards.Guards(policy.load_default())
    g.install()

    class Model(torch.nn.Module):
        def forward(self, x):
            tc.compile(FakeSource("k", SIG, {}, EVEN), target="t", options={})  # the first launch's compile
            return x + 1

    try:
        g.call(Model(), [torch.zeros(4)], "tiny", None)
        g.check_process("tiny")
        assert spec.started == 1
        for fut in spec.pending.values():
            fut.result(timeout=5)
        assert [f for f in g.findings if f["type"] == "thread_spawned"] == []
    finally:
        if spec.pool is not None:
            spec.pool.shutdown(wait=True)


def test_settle_drops_queued_speculations_and_waits_for_the_running_one():
    gate, started, finished = threading.Event(), [], []

    def compile_fn(src, target=None, options=None):
        if threading.current_thread().name.startswith("kgym-speculate"):
            started.append(src.fn)
            gate.wait(5)
            finished.append(src.fn)
        return "kernel"

    spec = speculate.Speculator(compile_fn, FakeSource)
    for name in ("a", "b", "c"):
        spec(FakeSource(name, SIG, {}, EVEN))
    for _ in range(100):
        if started:
            break
        threading.Event().wait(0.01)
    assert started == ["a"]  # "b" and "c" queued behind it
    threading.Timer(0.2, gate.set).start()
    spec.settle()
    assert finished == ["a"] and started == ["a"]  # waited for the running one, the queued ones never ran
    assert spec.pending == {}  # nothing for the next exclusive command's settle to wait on
    spec(FakeSource("d", SIG, {}, EVEN))
    assert spec.started == 3  # none after
    spec.pool.shutdown(wait=True)


def test_the_runner_settles_speculation_before_an_exclusive_command_only():
    """A speculation no call used would compile through the timing window (the GIL and a core taken from the
    measured calls)."""
    import socket

    from kgym_harness.runner import runner as rn
    from kgym_harness.shared import kinds
    from kgym_harness.shared import transport as tp

    class Fake:
        def __init__(self):
            self.seen = []

        def settle(self):
            self.seen.append(r.seq)

    a, b = socket.socketpair()
    try:
        r = rn.Runner(b, "cpu")
        r.speculator = Fake()
        for seq, cmd in enumerate((kinds.CMD_DROP, kinds.CMD_CLOCK_DESCRIBE, kinds.CMD_DROP, kinds.CMD_EXIT)):
            tp.send(a, {"cmd": cmd, "seq": seq})
        r.serve()
        assert r.speculator.seen == [1]
    finally:
        a.close()
        b.close()


def test_the_candidate_language_keeps_candidates_off_the_speculation_thread():
    """What keeps candidate code off the background thread (speculate.py, "Before this is on by default"): a
    candidate can neither set Triton's compilation listener (called inside each compile) nor reach the Speculator.
    If the language ever admits these names, this fails: the speculation needs another defence first."""
    import ast

    from kgym_harness.judge import language

    source = '''
import torch
import torch.nn as nn
import triton


def _listen(**kw):
    pass


triton.knobs.compilation.listener = _listen
_pool = triton.compiler.compile
'''
    found = language.check(ast.parse(source), language.load())
    said = " ".join(str(f.get("message")) for f in found)
    assert "`triton.knobs.compilation` is not part of the language" in said
    assert "`triton.compiler.compile` is not part of the language" in said
