"""Runtime checks (kgym_harness.runner.guards) on CPU, in the Triton interpreter: each check fires on the exploit it is
for, and an honest call (allocation, views, one or more launches) yields no finding."""

import os
import threading

os.environ["TRITON_INTERPRET"] = "1"  # chosen when @triton.jit decorates: must precede the kernels below

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kgym_harness.judge import policy  # noqa: E402
from kgym_harness.runner import guards  # noqa: E402


@triton.jit
def affine(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 3.0 + 1.0, mask=m)


def launch(x, out):
    affine[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)


class Honest(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        x = x.contiguous().view(-1)
        out = torch.empty_like(x)
        launch(x, out)
        tmp = torch.empty_like(x)
        launch(out, tmp)
        return out.reshape(2, -1)


class Decoy(Honest):
    def forward(self, x):
        return torch.empty_like(x)


class Torchy(Honest):
    def forward(self, x):
        out = torch.empty_like(x)
        launch(x, out)
        return x * 3.0 + 1.0


class Alias(Honest):
    def forward(self, x):
        launch(x, x)
        return x


class ParamAlias(Honest):
    def forward(self, x):
        launch(x, torch.empty_like(x))
        return self.w.view(2, 2)


class MutateParam(Honest):
    def forward(self, x):
        out = torch.empty_like(x)
        launch(x, out)
        with torch.no_grad():
            launch(self.w, self.w)
        return out


class BufferState(Honest):
    """A call counter a kernel keeps in a registered buffer (red team 5): state across calls."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(4))

    def forward(self, x):
        out = torch.empty_like(x)
        launch(x, out)
        launch(self.calls, self.calls)
        return out


class BufferAlias(Honest):
    """The output is a buffer made once and returned every call."""

    def __init__(self):
        super().__init__()
        self.register_buffer("out", torch.zeros(2, 8))

    def forward(self, x):
        launch(x, self.out)
        return self.out


class Sub(torch.Tensor):
    pass


class Subclass(Honest):
    def forward(self, x):
        out = torch.empty_like(x)
        launch(x, out)
        return out.as_subclass(Sub)


def run(model_cls, x=None):
    g = guards.Guards(policy.load_default())
    g.install()
    x = torch.rand(2, 8) if x is None else x
    with torch.no_grad():
        g.call(model_cls(), [x], "tiny_run", "tiny")
    return g, {f["type"] for f in g.findings}


def test_honest_call_has_no_findings():
    g, kinds = run(Honest)
    assert kinds == set(), g.findings
    g.check_process("tiny_run")
    assert g.findings == []


@pytest.mark.parametrize("cls,kind", [
    (Decoy, "no_triton_launch"),
    (Torchy, "torch_compute"),
    (Alias, "output_alias"),
    (Alias, "input_mutation"),
    (ParamAlias, "output_alias"),
    (MutateParam, "parameter_mutation"),
    (BufferState, "parameter_mutation"),
    (BufferAlias, "output_alias"),
    (Subclass, "output_subclass"),
])
def test_check_fires(cls, kind):
    g, kinds = run(cls)
    assert kind in kinds, g.findings


@triton.jit
def noop(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.heuristics({"BLOCK": lambda a: (a["out_ptr"].copy_(a["x_ptr"] * 3.0 + 1.0), 256)[1]})
@triton.jit
def noop_heuristic(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pass


class GridComputes(Honest):
    """The answer computed with tensor operators in a grid function, which Triton calls inside the launch."""

    def forward(self, x):
        out = torch.empty_like(x)

        def grid(meta):
            out.copy_(x * 3.0 + 1.0)
            return (1,)

        noop[grid](x, out, x.numel(), BLOCK=256)
        return out


class HeuristicComputes(Honest):
    def forward(self, x):
        out = torch.empty_like(x)
        noop_heuristic[(1,)](x, out, x.numel())
        return out


class HonestGrid(Honest):
    """Grid functions and heuristics that compute launch geometry only (shape queries, meta-parameters)."""

    def forward(self, x):
        x = x.contiguous().view(-1)
        out = torch.empty_like(x)

        def grid(meta):
            return (triton.cdiv(x.numel(), meta["BLOCK"]),)

        affine[grid](x, out, x.numel(), BLOCK=256)
        affine[lambda meta: (triton.cdiv(out.shape[0], meta["BLOCK"]),)](out, out, out.numel(), BLOCK=128)
        return out.reshape(2, -1)


@pytest.mark.parametrize("cls", [GridComputes, HeuristicComputes])
def test_compute_in_a_grid_function_or_heuristic_is_recorded(cls):
    # Triton calls them inside the launch, where the recorder leaves Triton's own work alone; they are the
    # candidate's code and recorded like forward's (guards._outside).  Without that: no finding, and the
    # output is right.
    g, kinds = run(cls)
    assert "torch_compute" in kinds, g.findings


def test_honest_grid_functions_have_no_findings():
    g, kinds = run(HonestGrid)
    assert kinds == set(), g.findings


# -- host values: tensor data turned into Python values in forward --------------------------------------------
# .tolist(), str(t), t.numpy() run no ATen operator: computing the answer on the host from them and handing it back
# through torch.tensor (the allowed lift_fresh) left no trace before HostValueRecorder.

def _host_answer(rows):
    return torch.tensor([[v * 3.0 + 1.0 for v in r] for r in rows])


CONVERSIONS = {
    "tolist": lambda x: _host_answer(x.tolist()),
    "str": lambda x: (str(x), torch.empty_like(x))[1],
    "repr": lambda x: (repr(x), torch.empty_like(x))[1],
    "format": lambda x: (f"{x}", torch.empty_like(x))[1],
    "percent": lambda x: ("%s" % (x,), torch.empty_like(x))[1],
    "item": lambda x: torch.full_like(x, x[0, 0].item()),
    "float": lambda x: torch.full_like(x, float(x[0, 0])),
    "int": lambda x: torch.full_like(x, int(x[0, 0])),
    "bool": lambda x: torch.full_like(x, 1.0 if x[0, 0] else 0.0),
    "index": lambda x: torch.full_like(x, [0.0, 1.0][x[0, 0].to(torch.int64)]),
    "complex": lambda x: torch.full_like(x, complex(x[0, 0]).real),
    "numpy": lambda x: _host_answer(x.numpy()),
    "array": lambda x: _host_answer(__import__("numpy").asarray(x)),
    "contains": lambda x: torch.full_like(x, 0.5 in x.view(-1)[:1]),
    "storage": lambda x: torch.full_like(x, x.untyped_storage()[0]),
    "apply_": lambda x: x.clone().apply_(lambda v: v * 3.0 + 1.0),
}


@pytest.mark.parametrize("how", sorted(CONVERSIONS))
def test_host_values_in_forward_are_recorded(how):
    convert = CONVERSIONS[how]

    class HostCompute(Honest):
        def forward(self, x):
            launch(x, torch.empty_like(x))
            return convert(x)

    g, kinds = run(HostCompute)
    assert "host_values" in kinds, g.findings
    f = [f for f in g.findings if f["type"] == "host_values"][0]
    assert f["stage"] == "tiny_run" and f["evidence"]["conversions"] and f["evidence"]["kernels"] == ["affine"]


def test_tolist_host_compute_is_right_and_only_host_values_sees_it():
    # The red team's exploit: a right answer, no ATen operator but the allowed lift_fresh; host_values alone.
    class ToList(Honest):
        def forward(self, x):
            launch(x, torch.empty_like(x))
            return _host_answer(x.tolist())

    x = torch.rand(2, 8)
    g = guards.Guards(policy.load_default())
    g.install()
    with torch.no_grad():
        out = g.call(ToList(), [x], "correctness", "base")
    assert torch.allclose(out, x * 3.0 + 1.0)
    assert [f["type"] for f in g.findings] == ["host_values"], g.findings
    assert g.findings[0]["evidence"]["conversions"] == {"tolist": 1}


class ShapeQueries(Honest):
    """Everything an honest forward asks of a tensor that is not its data: shapes, strides, sizes, types, devices,
    pointers, contiguity, lengths; and Python containers of tensors iterated."""

    def forward(self, x):
        n = len(x) * x.size(1) + x.numel() - x.numel()
        assert x.dim() == 2 and x.shape[0] == n // x.size(1) and x.stride(1) == 1 and x.is_contiguous()
        assert x.dtype == torch.float32 and x.device.type == "cpu" and x.data_ptr() % 4 == 0
        assert x.element_size() == 4 and x.ndim == 2 and not x.is_cuda and x.requires_grad is False
        a, b = x.shape
        outs = []
        for t in (x.contiguous().view(-1), x.reshape(-1)):
            out = torch.empty_like(t)
            launch(t, out)
            outs.append(out)
        print("launched", len(outs), "kernels for", tuple(x.shape), x.dtype)
        return outs[0].view(a, b)


def test_shape_queries_and_printing_shapes_are_not_host_values():
    g, kinds = run(ShapeQueries)
    assert kinds == set(), g.findings


def test_host_values_off_in_the_policy_records_nothing():
    p = policy.load_default()
    p.setdefault("findings", {})["host_values"] = "off"
    g = guards.Guards(p)
    g.install()

    class ToList(Honest):
        def forward(self, x):
            launch(x, torch.empty_like(x))
            return _host_answer(x.tolist())

    with torch.no_grad():
        g.call(ToList(), [torch.rand(2, 8)], "tiny_run", "tiny")
    assert g.findings == []


def test_conversions_inside_a_launch_are_triton_s_and_not_recorded():
    # The interpreter turns the launch's tensors into NumPy arrays; that is Triton's work, not forward's.
    g, kinds = run(Honest)
    assert "host_values" not in kinds
    assert guards._HOST_VALUES  # the list is not empty in this torch


# -- autotune hooks: the candidate's code Triton runs inside Autotuner.run --------------------------------------

@pytest.fixture
def cpu_autotune(monkeypatch):
    """The runner's CPU autotune (runner._autotune_without_benchmark), for this test only: the interpreter has
    no driver to benchmark with."""
    from triton.runtime import autotuner

    monkeypatch.setattr(autotuner.Autotuner, "do_bench",
                        property(lambda self: (lambda fn, quantiles=None: [1.0, 1.0, 1.0])))


def _computes(a):
    a["out_ptr"].copy_(a["x_ptr"] * 3.0 + 1.0)


def _host(a):
    a["out_ptr"].copy_(_host_answer(a["x_ptr"].tolist()))


def _autotuned(**kw):
    configs = kw.pop("configs", None) or [triton.Config({"BLOCK": 256})]

    @triton.autotune(configs=configs, key=["n"], **kw)
    @triton.jit
    def tuned_noop(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pass

    class Tuned(Honest):
        def forward(self, x):
            out = torch.empty_like(x)
            tuned_noop[(1,)](x, out, x.numel())
            return out

    return Tuned


def _prune(compute):
    def early_config_prune(configs, nargs, **kwargs):
        compute(nargs)
        return configs
    return early_config_prune


def _perf(compute):
    def perf_model(**kwargs):
        compute(kwargs)
        return 1.0
    return perf_model


TWO = [triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 128})]
HOOKS = {
    "config_pre_hook": lambda f: dict(configs=[triton.Config({"BLOCK": 256}, pre_hook=f)]),
    "autotune_pre_hook": lambda f: dict(configs=TWO, pre_hook=lambda a, reset_only=False: f(a)),
    "early_config_prune": lambda f: dict(configs=TWO, prune_configs_by={"early_config_prune": _prune(f)}),
    "perf_model": lambda f: dict(configs=TWO, prune_configs_by={"perf_model": _perf(f), "top_k": 1}),
}


@pytest.mark.parametrize("hook", sorted(HOOKS))
@pytest.mark.parametrize("compute,kind", [(_computes, "torch_compute"), (_host, "host_values")])
def test_compute_in_autotune_hooks_is_recorded(cpu_autotune, hook, compute, kind):
    # Each hook gets the answer right; without guards._outside on it, nothing saw how.
    model = _autotuned(**HOOKS[hook](compute))
    x = torch.rand(2, 8)
    g = guards.Guards(policy.load_default())
    g.install()
    with torch.no_grad():
        out = g.call(model(), [x], "tiny_run", "tiny")
    assert torch.allclose(out, x * 3.0 + 1.0)
    assert kind in {f["type"] for f in g.findings}, g.findings


def _honest_hook(a, reset_only=False):
    a["out_ptr"].zero_()


def _honest_prune(configs, nargs, **kwargs):
    return [c for c in configs if c.kwargs["BLOCK"] <= nargs["n"] * 64]


@pytest.mark.parametrize("kw", [
    dict(configs=[triton.Config({"BLOCK": 256}, pre_hook=_honest_hook)]),
    dict(configs=TWO, pre_hook=_honest_hook, post_hook=lambda a, exception: None),
    dict(configs=TWO, prune_configs_by={"early_config_prune": _honest_prune,
                                        "perf_model": lambda **k: k["BLOCK"] / k["n"], "top_k": 1}),
    dict(configs=TWO, reset_to_zero=["out_ptr"]),
], ids=["config_pre_hook", "autotune_hooks", "prune_and_perf", "reset_to_zero"])
def test_honest_autotune_hooks_have_no_findings(cpu_autotune, kw):
    g, kinds = run(_autotuned(**kw))
    assert kinds == set(), g.findings


def test_launches_are_recorded_by_name():
    guards.install_launch_hooks()
    guards.LOG.reset()
    guards.LOG.active = True
    try:
        launch(torch.rand(4), torch.empty(4))
    finally:
        guards.LOG.active = False
    assert guards.LOG.kernels == ["affine"]
    assert guards.launch_hooks_intact()


def test_global_state_and_threads():
    g = guards.Guards(policy.load_default())
    g.install()
    old = torch.get_default_dtype()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    try:
        torch.set_default_dtype(torch.float64)
        t.start()
        g.check_process("correctness")
    finally:
        torch.set_default_dtype(old)
        stop.set()
        t.join()
    kinds = {f["type"] for f in g.findings}
    assert {"global_state", "thread_spawned"} <= kinds, g.findings


def test_harness_tampering():
    from kgym_harness.judge import compare

    g = guards.Guards(policy.load_default())
    g.install()
    saved_fn, saved_code = compare.compare, compare.tolerances.__code__
    try:
        compare.compare = lambda *a, **k: {}
        g.check_process("correctness")
        compare.compare = saved_fn
        compare.tolerances.__code__ = (lambda dtype: (1.0, 1.0)).__code__
        g.check_process("timing")
    finally:
        compare.compare = saved_fn
        compare.tolerances.__code__ = saved_code
    text = " ".join(f["message"] for f in g.findings)
    assert "kgym_harness.judge.compare.compare" in text and "kgym_harness.judge.compare.tolerances" in text
    g2 = guards.Guards(policy.load_default())
    g2.install()
    g2.check_process("correctness")
    assert g2.findings == []


def test_out_of_memory_in_a_check_propagates(monkeypatch):
    # A check that cannot allocate (other evaluations hold the GPU's memory) is neither a finding nor a
    # guard_error: the error reaches the variant, which is re-run with the GPU alone.
    g = guards.Guards(policy.load_default())
    g.install()

    def no_memory(*_args, **_kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(g, "check_call", no_memory)
    with torch.no_grad(), pytest.raises(torch.OutOfMemoryError):
        g.call(Honest(), [torch.rand(2, 8)], "correctness", "base")
    assert g.findings == []


def test_perturbed_host_allocator_hands_out_junk():
    # In a fresh interpreter (the setting stays for the process): after the runner's mallopt(M_PERTURB), an
    # unwritten torch.empty block reads glibc's junk byte, never recycled values that could be a right answer.
    import pathlib
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from kgym_harness.runner import runner\n"
        "runner._perturb_host_allocator()\n"
        "right = torch.arange(4000, dtype=torch.float32) * 0.5\n"
        "del right\n"
        "x = torch.empty(4000, dtype=torch.float32)\n"
        "same = torch.equal(x, torch.arange(4000, dtype=torch.float32) * 0.5)\n"
        "junk = bool((x.view(torch.int32) == 0x5A5A5A5A).all())\n"
        "print(same, junk)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=str(pathlib.Path(__file__).resolve().parents[1]))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"], out.stdout


def test_inputs_the_judge_checks_are_not_snapshotted_here(monkeypatch):
    """Inputs handed over in place (transport.InPlace) are checked by the judge: the runner takes no copy of
    them (gigabytes on the largest tasks) and reports no mutation of them; parameters are still checked."""
    g = guards.Guards(policy.load_default())
    g.install()
    copied = []
    real = guards.StateWatch
    monkeypatch.setattr(guards, "StateWatch", lambda ts: copied.append(len(ts)) or real(ts))
    with torch.no_grad():
        g.call(Alias(), [torch.rand(2, 8)], "correctness", "v1", inputs_checked=True)
        g.call(MutateParam(), [torch.rand(2, 8)], "correctness", "v1", inputs_checked=True)
        g.call(Honest(), [torch.rand(2, 8)], "correctness", "v1")
    kinds = {f["type"] for f in g.findings}
    assert "input_mutation" not in kinds and "parameter_mutation" in kinds
    # the parameters only (one parameter each), never the inputs' where the judge checks them; both otherwise
    assert copied == [1, 1, 2]


# -- the state check's chunks (StateWatch) -------------------------------------------------------------------------

def _state_zoo():
    """Tensors of every kind a model's state or an input may be: dtypes, layouts, NaNs, signed zeros, empty."""
    g = torch.Generator().manual_seed(5)
    a = torch.randn(64, 8, generator=g)
    return [a, a.t(), torch.randn(7, generator=g).half(), torch.randn(5, 3, generator=g).to(torch.bfloat16),
            torch.full((3,), float("nan")), torch.zeros(4), torch.arange(11), torch.arange(5, dtype=torch.int8),
            torch.ones(5, dtype=torch.bool), torch.empty(0, 3), torch.tensor(2.5), torch.randn(2, 3, generator=g,
            dtype=torch.complex64), torch.randn(300, generator=g)[::3], torch.randn(1000, generator=g).double()]


_MUTATIONS = [
    lambda ts: ts[0].index_fill_(0, torch.tensor([5]), 1.0),
    lambda ts: ts[1][3, 7].add_(1.0),                       # through the transposed view: ts[0] changes too
    lambda ts: ts[4].fill_(float("nan")),                   # NaN to NaN: the same bytes
    lambda ts: ts[5].neg_(),                                # +0 to -0: other bytes
    lambda ts: ts[6].__setitem__(10, 0),
    lambda ts: ts[8].__setitem__(2, False),
    lambda ts: ts[10].fill_(2.5),                           # the same value
    lambda ts: ts[12].__setitem__(99, 7.0),
    lambda ts: ts[13].__setitem__(999, -1.0),
    lambda ts: ts[11].imag.fill_(0.0),
    lambda ts: ts[7].resize_(3),                            # a shape changed in place
]


@pytest.mark.parametrize("own", [1 << 20, 64])
@pytest.mark.parametrize("chunk", [16, 100, 1 << 26])
@pytest.mark.parametrize("which", range(len(_MUTATIONS)))
def test_state_watch_with_copies_says_what_the_pairwise_comparison_says(chunk, which, own, monkeypatch):
    """Chunked copies (the state at most STATE_COPY_MAX bytes) mark exactly the tensors a copy of each and a
    bitwise comparison (_all_same_bits) says changed, whatever the chunk size cuts through, with the larger
    tensors (STATE_OWN bytes or more) in chunks of their own or packed with the others."""
    monkeypatch.setattr(guards, "STATE_OWN", own)
    ts = _state_zoo()
    before = guards._snapshot(ts)
    watch = guards.StateWatch(ts, chunk=chunk)
    assert watch.copy
    _MUTATIONS[which](ts)
    expected = [not same for same in guards._all_same_bits(list(zip(ts, before)))]
    assert watch.changed() == expected
    assert any(expected) or which in (2, 6)


@pytest.mark.parametrize("chunk", [16, 100, 1 << 26])
@pytest.mark.parametrize("which", range(len(_MUTATIONS)))
def test_state_watch_with_fingerprints_marks_every_change_and_only_its_chunks(chunk, which):
    """Above STATE_COPY_MAX a fingerprint a chunk stands for the copy: every changed tensor is marked, and a
    tensor marked without a change of its own shares a chunk with one that changed; no copy is held."""
    ts = _state_zoo()
    before = guards._snapshot(ts)
    watch = guards.StateWatch(ts, chunk=chunk, copy_max=0)
    assert not watch.copy and all(b.dim() == 0 for b in watch.before)  # one number a chunk, no bytes kept
    _MUTATIONS[which](ts)
    expected = [not same for same in guards._all_same_bits(list(zip(ts, before)))]
    got = watch.changed()
    assert all(g or not e for g, e in zip(got, expected))
    hit = {c for i, e in enumerate(expected) if e for c in watch.chunk_of.get(i, ())}
    for i, (g, e) in enumerate(zip(got, expected)):
        if g and not e:
            assert set(watch.chunk_of.get(i, ())) & hit, (i, watch.chunk_of)
    if not any(expected):
        assert not any(got)


def test_state_watch_launches_a_few_kernels_a_chunk_not_a_tensor():
    """Red team 39b's trim_init_many held 8,192 parameters: a copy and a comparison each were ~25,000 kernels a
    call.  Packed into chunks, the check of 4,000 small tensors runs a few kernels a chunk (views and slices, a
    few a tensor, compute nothing), and of a state larger than STATE_COPY_MAX keeps no copy."""
    from torch.utils._python_dispatch import TorchDispatchMode

    views = {"view", "_unsafe_view", "slice", "detach", "alias", "_reshape_alias", "as_strided", "reshape"}

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ not in views:
                Count.n += 1
            return func(*args, **(kwargs or {}))

    ts = [torch.randn(16) for _ in range(4000)]  # 64 bytes each: 256 a chunk of 16 KiB
    for copy_max in (None, 0):
        Count.n = 0
        with Count():
            watch = guards.StateWatch(ts, chunk=1 << 14, copy_max=copy_max)
            changed = watch.changed()
        assert not any(changed) and len(watch.chunks) == 16
        assert Count.n <= (6 if copy_max is None else 26) * len(watch.chunks) + 2, (copy_max, Count.n)  # both passes
        watch = guards.StateWatch(ts, chunk=1 << 14, copy_max=copy_max)
        ts[1234][3] += 1.0
        changed = watch.changed()
        ts[1234][3] -= 1.0
        assert changed[1234] and sum(changed) == (1 if copy_max is None else 256), sum(changed)
    # trim_init_many's shape, shrunk: tensors of exactly STATE_OWN bytes, more than STATE_COPY_MAX in all
    big = [torch.randn(256) for _ in range(64)]  # 1 KiB each
    Count.n = 0
    with Count():
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(guards, "STATE_OWN", 1024)
            mp.setattr(guards, "STATE_COPY_MAX", 32 * 1024)
            mp.setattr(guards, "STATE_CHUNK", 16 * 1024)
            watch = guards.StateWatch(big)
            assert not any(watch.changed())
    assert not watch.copy and len(watch.chunks) == 4 and Count.n <= 26 * 4 + 2, (len(watch.chunks), Count.n)
    Count.n = 0
    with Count():
        before = guards._snapshot(ts)
        guards._all_same_bits(list(zip(ts, before)))
    assert Count.n >= 3 * 4000  # what it replaced


def test_state_watch_gives_large_tensors_chunks_of_their_own_and_copies_them_once(monkeypatch):
    """A tensor of STATE_OWN bytes or more is compared where it lies after the call: its chunks hold nothing else,
    and the check copies it once (before the call), as the per-tensor check did; the small ones are packed."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Copies(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ in ("cat", "clone", "copy_"):
                Copies.n += 1
            return func(*args, **(kwargs or {}))

    monkeypatch.setattr(guards, "STATE_OWN", 4096)
    ts = [torch.randn(10), torch.randn(4096), torch.randn(5), torch.randn(2048)]
    watch = guards.StateWatch(ts)
    assert [[i for i, _lo, _hi in parts] for _d, parts in watch.chunks] == [[0, 2], [1], [3]]
    with Copies():
        assert watch.changed() == [False] * 4
    assert Copies.n == 1  # the small ones' pack; the two large ones are compared in place
    ts[3][2047] += 1.0
    assert watch.changed() == [False, False, False, True]
    # With fingerprints (a state above STATE_COPY_MAX) everything is packed: trim_init_many's 8,192 tensors of
    # exactly 1 MiB must not each cost a fingerprint's kernels.
    monkeypatch.setattr(guards, "STATE_COPY_MAX", 1024)
    watch = guards.StateWatch(ts)
    assert [[i for i, _lo, _hi in parts] for _d, parts in watch.chunks] == [[0, 1, 2, 3]]


def test_a_mutation_in_a_large_state_is_still_found(monkeypatch):
    """Through Guards.call, with the fingerprints standing for copies (STATE_COPY_MAX 0) and small chunks: the
    parameter a kernel wrote is found, and the message says which tensors it was checked together with."""
    monkeypatch.setattr(guards, "STATE_COPY_MAX", 0)
    monkeypatch.setattr(guards, "STATE_CHUNK", 1024)  # the weight and the counter in one chunk
    g = guards.Guards(policy.load_default())
    g.install()
    with torch.no_grad():
        g.call(Honest(), [torch.rand(2, 8)], "correctness", "v1")
        assert g.findings == []
        g.call(BufferState(), [torch.rand(2, 8)], "correctness", "v1")
    found = [f for f in g.findings if f["type"] == "parameter_mutation"]
    assert {f["evidence"]["parameter"] for f in found} == {0, 1}, g.findings  # the counter, and the weight beside it
    assert all("(or one of parameters or buffers" in f["message"] for f in found), found


def timed(model, x):
    """A timed call as the runner makes it: the forward alone (no recorders), then check_timed."""
    g = guards.Guards(policy.load_default())
    g.install()
    m = model()
    with torch.no_grad():
        out = m(x)
    meta = g.check_timed(out, [x], list(m.parameters()), "timing", "v1")
    return g, {f["type"] for f in g.findings}, meta


def test_timed_outputs_get_the_output_checks_of_a_correctness_call():
    """Returning the input (after buffers repeat, the values may even be right) or a parameter, or a subclass,
    is the same finding in a timed call as in a correctness call."""
    x = torch.rand(2, 8)
    g, kinds, meta = timed(Honest, x)
    assert kinds == set() and meta == [{"type": "torch.Tensor", "shape": [2, 8], "dtype": "float32",
                                        "stride": [8, 1], "nonfinite": 0}]
    for cls, kind in ((Alias, "output_alias"), (ParamAlias, "output_alias"), (Subclass, "output_subclass")):
        g, kinds, meta = timed(cls, torch.rand(2, 8))
        assert kind in kinds and all(f["stage"] == "timing" for f in g.findings), (cls, g.findings)
    assert meta[0]["type"] == "Sub" and meta[0]["nonfinite"] is None  # a subclass is not computed on


def test_timed_output_descriptions_count_non_finite_values(monkeypatch):
    class NaNs(Honest):
        def forward(self, x):
            out = torch.empty_like(x)
            launch(x, out)
            return out, torch.full((3, 2), float("nan")).t(), torch.arange(3)

    monkeypatch.setattr(guards, "NONFINITE_CHUNK", 4)  # counted a chunk at a time
    x = torch.rand(2, 8)
    x[0, 3] = float("inf")
    _g, kinds, meta = timed(NaNs, x)
    assert kinds == set()
    assert [m["nonfinite"] for m in meta] == [1, 6, 0]
    assert meta[1]["shape"] == [2, 3] and meta[1]["stride"] == [1, 2] and meta[2]["dtype"] == "int64"
    assert guards.describe_outputs(None) == [{"type": "NoneType"}]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.complex64])
@pytest.mark.parametrize("value, count", [(None, 0), (float("nan"), 1), (float("inf"), 1), (float("-inf"), 1)])
def test_nonfinite_counts_every_kind_of_non_finite_value(dtype, value, count):
    # The count's quick test (the least and greatest value, which NaN propagates to) must not miss one of them.
    x = torch.randn(1000).to(dtype)
    if value is not None:
        x[517] = value
    assert guards.nonfinite(x) == count
    assert guards.nonfinite(x.reshape(10, 100).t()) == count  # any layout


def test_all_same_bits_answers_as_same_bits_does_pair_by_pair():
    """The batched check (one read back for every input and parameter) says what _same_bits says of each pair:
    shapes, dtypes, NaNs and signed zeros by their bytes, integers and bools by value, empty tensors."""
    from kgym_harness.runner import guards as g

    a = torch.randn(64, 8)
    nan = torch.full((3,), float("nan"))
    pairs = [
        (a, a.clone()),
        (a, a.clone().index_fill_(0, torch.tensor([5]), 1.0)),
        (a, a.t().contiguous().t()),                      # same values, other strides
        (a, a.reshape(8, 64)),                            # other shape
        (a, a.double()),                                  # other dtype
        (nan, nan.clone()),                               # NaN == NaN by bytes
        (torch.zeros(4), -torch.zeros(4)),                # +0 and -0 differ in bytes
        (torch.arange(10), torch.arange(10)),
        (torch.arange(10), torch.arange(10).flip(0)),
        (torch.ones(5, dtype=torch.bool), torch.ones(5, dtype=torch.bool)),
        (torch.empty(0, 3), torch.empty(0, 3)),
        (torch.randn(2, 3, dtype=torch.complex64).clone(), torch.zeros(2, 3, dtype=torch.complex64)),
        (a.half(), a.half().clone()),
    ]
    assert g._all_same_bits(pairs) == [g._same_bits(x, y) for x, y in pairs]
    assert g._all_same_bits(pairs) == [True, False, True, False, False, True, False, True, False, True, True, False,
                                       True]
    assert g._all_same_bits([]) == []


# -- side streams (red team 33) ------------------------------------------------------------------------------------
# On the CPU there are no streams: the current stream is faked (guards._raw_stream, which a GPU reads from torch), and
# a forward "switches stream" by changing what it returns, as torch.cuda.stream(s) changes the current stream.
_CURRENT = [7]


class SideStreamOnce(Honest):
    """Its second launch on another stream, as `with torch.cuda.stream(side): launch(...)` queues it."""

    def forward(self, x):
        x = x.contiguous().view(-1)
        out = torch.empty_like(x)
        launch(x, out)
        tmp = torch.empty_like(x)
        _CURRENT[0] = 13
        try:
            launch(out, tmp)
        finally:
            _CURRENT[0] = 7
        return out.reshape(2, -1)


@pytest.fixture
def fake_streams(monkeypatch):
    _CURRENT[0] = 7
    monkeypatch.setattr(guards, "_raw_stream", lambda: _CURRENT[0])
    yield
    assert guards.LOG.stream is None  # every watch ends with its call


def test_a_launch_on_another_stream_is_side_stream_in_every_harness_call(fake_streams):
    g = guards.Guards(policy.load_default(), cuda=False)  # CPU evaluations have no streams to watch
    g.install()
    with torch.no_grad():
        g.call(SideStreamOnce(), [torch.rand(2, 8)], "correctness", "base")
    assert g.findings == []
    g = guards.Guards(policy.load_default(), cuda=True)
    g.install()
    with torch.no_grad():
        g.call(SideStreamOnce(), [torch.rand(2, 8)], "correctness", "base")
    assert [f["type"] for f in g.findings] == ["side_stream"], g.findings
    f = g.findings[0]
    assert f["stage"] == "correctness" and f["variant"] == "base"
    assert f["evidence"]["launches"] == [{"kernel": "affine", "stream": 13, "timed_stream": 7}]
    # A timed call: the runner's watch around the forward alone (no recorders), the finding from check_timed.
    g = guards.Guards(policy.load_default(), cuda=True)
    g.install()
    m, x = SideStreamOnce(), torch.rand(2, 8)
    with torch.no_grad(), g.watching():
        out = m(x)
    g.check_timed(out, [x], list(m.parameters()), "timing", "base")
    assert [f["type"] for f in g.findings] == ["side_stream"] and g.findings[0]["stage"] == "timing"
    # Honest launches, all on the current stream (whatever stream that is: one the candidate made current before
    # the harness's call is the one its events go on): nothing.
    _CURRENT[0] = 21
    g = guards.Guards(policy.load_default(), cuda=True)
    g.install()
    with torch.no_grad(), g.watching():
        out = Honest()(x)
    g.check_timed(out, [x], [], "timing", "base")
    assert g.findings == []


def test_launches_outside_a_harness_call_are_not_watched(fake_streams):
    g = guards.Guards(policy.load_default(), cuda=True)
    g.install()
    with torch.no_grad():
        SideStreamOnce()(torch.rand(2, 8))  # __init__-time or import-time work: no call of the harness's under way
    g.check_timed(torch.rand(2, 8), [], [], "timing", "base")
    assert g.findings == [] and guards.LOG.off_stream == []


@pytest.mark.parametrize("module,name", [("kgym_harness.shared.cudashare", "stream_id"),
                                         ("kgym_harness.shared.profile", "summarize"),
                                         ("kgym_harness.shared.timing", "event_timed"),
                                         ("kgym_harness.runner.runner", "Runner")])
def test_the_runner_s_timing_and_profile_code_is_guarded(module, name):
    """Red team 33: replacing cudashare.stream_id at import made the profile's side-stream figure unknown, unseen."""
    import importlib

    mod = importlib.import_module(module)
    g = guards.Guards(policy.load_default())
    g.install()
    saved = getattr(mod, name)
    try:
        setattr(mod, name, lambda *a, **k: None)
        g.check_process("compile")
    finally:
        setattr(mod, name, saved)
    assert [f["type"] for f in g.findings] == ["harness_tampering"], g.findings
    assert f"{module}.{name}" in g.findings[0]["message"]


def test_a_state_check_that_cannot_be_made_is_a_guard_error_and_the_call_still_runs(monkeypatch):
    """StateWatch raising before the call (kgym's bug, never the candidate's) is a guard_error finding, which fails
    the evaluation closed (result.c fact_checks); the candidate's forward still runs and its output comes back."""
    g = guards.Guards(policy.load_default())
    g.install()

    def broken(_tensors):
        raise RuntimeError("no view of these bytes")

    monkeypatch.setattr(guards, "StateWatch", broken)
    with torch.no_grad():
        out = g.call(MutateParam(), [torch.rand(2, 8)], "correctness", "v1")
    assert out.shape == (2, 8)
    assert [f["type"] for f in g.findings] == ["guard_error"]
    assert "the state check could not be made" in g.findings[0]["message"]


def test_state_watch_keeps_the_per_tensor_check_for_tensors_it_cannot_take_by_storage():
    """Empty, sparse, meta, quantized and nested tensors take the per-tensor copy and comparison (read back at once
    for all): an empty one whose shape changes is found.  A sparse one fails that comparison as it always did (no
    reshape for sparse tensors): an error in the check, which Guards.call makes a guard_error (fail closed)."""
    ts = [torch.randn(8), torch.empty(0), torch.empty(0, 3)]
    watch = guards.StateWatch(ts)
    assert watch.loose == [1, 2]
    ts[2].resize_(0, 4)
    assert watch.changed() == [False, False, True]
    idx = torch.tensor([[0, 1], [1, 0]])
    sparse = torch.sparse_coo_tensor(idx, torch.tensor([1.0, 2.0]), (2, 2)).coalesce()
    with pytest.raises(RuntimeError):
        guards._all_same_bits([(sparse, sparse.clone())])  # the per-tensor check, before StateWatch too
    with pytest.raises(RuntimeError):
        guards.StateWatch([sparse]).changed()

    class SparseState(Honest):
        def __init__(self):
            super().__init__()
            self.s = torch.sparse_coo_tensor(idx, torch.tensor([1.0, 2.0]), (2, 2)).coalesce()

    g = guards.Guards(policy.load_default())
    g.install()
    with torch.no_grad():
        g.call(SparseState(), [torch.rand(2, 8)], "correctness", "v1")
    assert [f["type"] for f in g.findings] == ["guard_error"]
