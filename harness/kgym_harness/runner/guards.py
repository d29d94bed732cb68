"""Runtime checks in the evaluation child: facts about what the candidate did while it ran.

Installed before the candidate is imported (``Guards.install``), so the candidate cannot run first:

- Triton launches are recorded by wrapping ``JITFunction.run`` (GPU) and the interpreter's
  ``GridExecutor.__call__`` (CPU).  A forward without a launch is a decoy (``no_triton_launch``).
- ATen operators the forward runs *outside* its Triton launches are recorded with a TorchDispatchMode; one that
  is not on the policy's ``runtime.aten_allowed`` list (allocation, views, copies) means PyTorch did part of the
  work (``torch_compute``).  Launches are excluded because the interpreter itself copies tensors.
- Tensor data turned into Python values (or handed to another library) outside the launches is recorded with a
  TorchFunctionMode (``host_values``): ``.tolist()``, ``str(t)`` and ``t.numpy()`` run no ATen operator at all,
  so the host could compute the answer from them unseen by the ATen recorder.
- What Triton calls of the candidate's inside a launch (grid functions, heuristics, autotune and Config hooks,
  prune functions and performance models) is recorded like forward itself (``_outside``).
- Outputs must be plain ``torch.Tensor``s that share no storage with an input or a parameter.
- Inputs and parameters are compared bit for bit before and after each call.
- Global state (TF32 and determinism flags, default dtype, thread counts, live threads) is snapshotted before the
  import and compared after each stage.
- The functions the harness relies on (comparison, timers, events, the channel, the harness's own functions and
  their code objects) are captured by identity before the import and re-checked after each stage.

Each problem becomes a finding ``{"type", "stage", "variant", "message", "evidence"}``; kgym (C) decides, from
the policy, which findings make the verdict ``hacked``.
"""

import contextlib
import sys
import threading

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from ..shared import report

# Captured at import of this module (in the zygote, long before any candidate exists).
_is = id
_type = type
_isinstance = isinstance
_Tensor = torch.Tensor
_equal = torch.equal
_PACKAGE = __name__.split(".")[0]  # kgym_harness


class LaunchLog:
    """Counts Triton launches while ``active``; ``depth`` > 0 while a launch runs."""

    def __init__(self):
        self.active = False
        self.depth = 0
        self.kernels = []

    def reset(self):
        self.kernels = []


LOG = LaunchLog()
_INSTALLED = []


def _outside(fn):
    """``fn`` (the candidate's code that Triton calls inside a launch: a grid function, a heuristic, an autotune or
    Config hook, a prune function or performance model) run as if outside every launch: the ATen operators and the
    host values it runs are recorded like those of forward itself.  Work in a launch is Triton's (the
    interpreter's kernel bodies, the autotuner's benchmarking) and is not recorded; a hook that computes the answer
    with tensor operators would otherwise hide there (on a GPU the profile sees its kernels; on the CPU nothing
    else would)."""
    if getattr(fn, "__kgym_outside__", False) or not callable(fn):
        return fn

    def outside(*args, **kwargs):
        depth = LOG.depth
        LOG.depth = 0
        try:
            return fn(*args, **kwargs)
        finally:
            LOG.depth = depth

    outside.__kgym_outside__ = True
    return outside


def _grid_argument(_self, kwargs):
    """A launch through ``run(..., grid=...)`` (JITFunction, Autotuner): its grid function (_outside)."""
    if callable(kwargs.get("grid")):
        kwargs["grid"] = _outside(kwargs["grid"])


def _autotune_hooks_and_grid(self, kwargs):
    """Autotuner.run calls, besides the grid it passes on: each config's pre_hook (before the launch of the chosen
    config, and around every benchmarked one), its own pre_hook and post_hook (around benchmarked launches, and the
    pre_hook after them with ``reset_only``), and prune_configs_by's early_config_prune and perf_model.  Its own
    default hooks (reset_to_zero, restore_value: Triton's work, allocation and copies) are left alone."""
    for config in getattr(self, "configs", None) or []:
        for hook in ("pre_hook", "post_hook"):
            if callable(getattr(config, hook, None)):
                setattr(config, hook, _outside(getattr(config, hook)))
    for hook in ("pre_hook", "post_hook"):
        if getattr(self, f"user_defined_{hook}", True) and callable(getattr(self, hook, None)):
            setattr(self, hook, _outside(getattr(self, hook)))
    for attr in ("early_config_prune", "perf_model"):
        if callable(getattr(self, attr, None)):
            setattr(self, attr, _outside(getattr(self, attr)))
    _grid_argument(self, kwargs)


def _heuristics_and_grid(self, kwargs):
    """Heuristics.run: its values, which it calls before the launch it wraps, and the grid it passes on."""
    for k, f in list(self.values.items()):
        self.values[k] = _outside(f)
    _grid_argument(self, kwargs)


def _executor_grid(self, _kwargs):
    """The interpreter's GridExecutor holds the grid it will call."""
    self.grid = _outside(self.grid)


class ConstexprValueError(TypeError):
    """A tl.constexpr argument that is not a compile-time constant (the interpreter's launch, _interpreter_constexprs)."""


def _constexpr_value_ok(v, depth=0):
    """Whether ``v`` is what a compiled kernel can take as a tl.constexpr: a number, a boolean, a string, None, a
    dtype, a @triton.jit function, or a tuple of those.  Anything else (a tensor, a module, a bound method, a
    builtin) reaches the interpreter's kernel body as the object itself, where Python runs it inside the launch,
    out of the recorders' sight; the GPU compiler refuses it."""
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    if isinstance(v, tl.constexpr):
        v = v.value
    if v is None or isinstance(v, (bool, int, float, str, torch.dtype, tl.dtype)):
        return True
    if isinstance(v, JITFunction) or type(v).__name__ == "InterpretedFunction":
        return True
    if isinstance(v, tuple) and depth < 4:
        return all(_constexpr_value_ok(x, depth + 1) for x in v)
    return False


def _interpreter_constexprs(self, args, kwargs):
    """The interpreter's GridExecutor.__call__: every tl.constexpr argument a compile-time constant
    (_constexpr_value_ok), or the launch raises ConstexprValueError before the kernel body runs, as the GPU
    compiler would refuse it.  The candidate language refuses such launches statically; this is the runtime's
    own witness, which does not depend on the checker typing every value right."""
    import inspect

    names = set(getattr(self, "constexprs", ()) or ())
    if not names:
        return
    try:
        bound = inspect.signature(self.fn).bind_partial(*args, **kwargs).arguments
    except TypeError:
        return  # the interpreter reports the bad call itself
    for name in sorted(names & set(bound)):
        if not _constexpr_value_ok(bound[name]):
            raise ConstexprValueError(
                f"{getattr(self.fn, '__name__', '?')}: the tl.constexpr parameter {name} was given "
                f"{type(bound[name]).__module__}.{type(bound[name]).__qualname__}: constexpr values are numbers, "
                "strings, booleans, None, dtypes or @triton.jit functions (the GPU compiler refuses anything else)")


def _wrap(cls, attr, name_of, skip=None, prepare=_grid_argument, check=None):
    """Wraps cls.attr, a launch: counted while LOG is active, and ``prepare(self, kwargs)`` hands what Triton will
    call of the candidate's inside it to _outside; ``check(self, args, kwargs)``, when given, may refuse the
    launch (an exception) before it runs."""
    original = cls.__dict__[attr]

    def launch(self, *args, **kwargs):
        if skip is not None and skip(kwargs):
            return original(self, *args, **kwargs)
        if check is not None:
            check(self, args, kwargs)
        if LOG.active:
            prepare(self, kwargs)
        if LOG.active and LOG.depth == 0:
            try:
                LOG.kernels.append(name_of(self))
            except Exception:  # noqa: BLE001 — a nameless kernel still counts
                LOG.kernels.append("?")
        LOG.depth += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            LOG.depth -= 1

    launch.__kgym_original__ = original
    setattr(cls, attr, launch)
    _INSTALLED.append((cls, attr, launch))


def install_launch_hooks():
    """Wraps every Triton launch path once per process (the zygote's import of the harness is too early:
    the wrappers are installed in the child, before the candidate is imported)."""
    if _INSTALLED:
        return
    from triton.runtime import jit

    _wrap(jit.JITFunction, "run", lambda self: getattr(self.fn, "__name__", "?"),
          skip=lambda kw: kw.get("warmup", False))
    # The autotuner benchmarks its configs with torch ops (do_bench: empty, zero_, quantile) outside the
    # JITFunction launches: counted as one launch so that its bookkeeping is not taken for the candidate's.
    try:
        from triton.runtime import autotuner

        for cls, prepare in ((autotuner.Autotuner, _autotune_hooks_and_grid),
                             (autotuner.Heuristics, _heuristics_and_grid)):
            if "run" in cls.__dict__:
                _wrap(cls, "run", lambda self: getattr(getattr(self, "fn", None), "__name__", "?"), prepare=prepare)
    except Exception:  # noqa: BLE001 — an older Triton without these classes
        pass
    try:
        from triton.runtime import interpreter

        _wrap(interpreter.GridExecutor, "__call__", lambda self: getattr(self.fn, "__name__", "?"),
              prepare=_executor_grid, check=_interpreter_constexprs)
    except Exception:  # noqa: BLE001 — no interpreter in this Triton build
        pass


def launch_hooks_intact():
    return all(cls.__dict__.get(attr) is fn for cls, attr, fn in _INSTALLED)


class AtenRecorder(TorchDispatchMode):
    """Names of the ATen operators run outside Triton launches."""

    def __init__(self):
        super().__init__()
        self.ops = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if LOG.depth == 0:
            name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
            self.ops[name] = self.ops.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def _host_value_functions():
    """The torch functions through which a tensor's data becomes a Python value, or memory another library can
    read: Python's conversion protocols (truth, int, float, index, complex, repr/str/format), PyTorch's exports
    (tolist, item, numpy, NumPy's __array__, DLPack, CUDA's array interface, the raw storage) and the methods that
    hand every element to a Python function (apply_, map_, map2_).  Shape queries (len, size, stride, numel,
    dim, dtype, device, data_ptr) hand over no data and are not here.  Iteration is not either: it unbinds the
    tensor into tensors (an ATen view, no data), and a Python value made of one of them passes through this list."""
    T = torch.Tensor
    names = ["tolist", "item", "numpy", "__array__", "__dlpack__", "__bool__", "__int__", "__float__", "__index__",
             "__complex__", "__repr__", "__str__", "__format__", "__contains__", "untyped_storage", "storage",
             "_typed_storage", "apply_", "map_", "map2_"]
    out = {}
    for name in names:
        f = getattr(T, name, None)
        if f is not None and f is not object.__dict__.get(name):
            out[f] = name
    cai = T.__dict__.get("__cuda_array_interface__")
    if isinstance(cai, property):
        # A property reaches __torch_function__ as its getter's method-wrapper (equal, not identical, each time).
        out[cai.__get__] = "__cuda_array_interface__"
    return out


_HOST_VALUES = _host_value_functions()


class HostValueRecorder(TorchFunctionMode):
    """Names (and counts) of the functions in _HOST_VALUES run outside Triton launches: tensor data that became
    Python values, which ``.tolist()``, ``str(t)`` and friends do without any ATen operator the AtenRecorder could
    see.  Every torch function and Tensor method passes through here while the mode is on; a lookup is all it
    costs (forward runs a few dozen of them; a launch's own, on the CPU the interpreter's copies, are not
    recorded, like the AtenRecorder's)."""

    def __init__(self):
        super().__init__()
        self.calls = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if LOG.depth == 0:
            try:
                name = _HOST_VALUES.get(func)
            except TypeError:  # an unhashable callable: none of ours
                name = None
            if name is not None:
                self.calls[name] = self.calls.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def _tensors(obj):
    if _isinstance(obj, _Tensor):
        return [obj]
    if _isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o)]
    if _isinstance(obj, dict):
        return [t for o in obj.values() for t in _tensors(o)]
    return []


def _span(t):
    """[start, end) bytes of a tensor's storage, or None when it has none (meta)."""
    try:
        st = t.untyped_storage()
        start = st.data_ptr()
        return (start, start + st.nbytes()) if st.nbytes() else None
    except Exception:  # noqa: BLE001
        return None


def _snapshot(tensors):
    return [t.detach().clone() for t in tensors]


def _same_bits(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        # NaN-aware bitwise equality: compare the raw bytes.
        if not a.numel():
            return True
        return _equal(a.reshape(-1).contiguous().view(torch.uint8), b.reshape(-1).contiguous().view(torch.uint8))
    return _equal(a, b)


def global_state():
    """Process-wide settings a candidate could change to speed itself up or to fool the comparison."""
    s = {
        "default_dtype": str(torch.get_default_dtype()),
        "num_threads": torch.get_num_threads(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "matmul_allow_fp16_reduced": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn_enabled": torch.backends.cudnn.enabled,
        "grad_enabled": torch.is_grad_enabled(),
        "threads": threading.active_count(),
    }
    try:
        s["default_device"] = str(torch.get_default_device())
    except Exception:  # noqa: BLE001 — older torch
        pass
    return s


def _functions_to_guard():
    """name -> object whose identity the harness relies on."""
    import json
    import os
    import socket
    import time

    from ..shared import models

    objs = {
        "torch.allclose": torch.allclose, "torch.equal": torch.equal, "torch.isclose": torch.isclose,
        "torch.isnan": torch.isnan, "torch.isfinite": torch.isfinite, "torch.abs": torch.abs,
        "torch.Tensor.clone": torch.Tensor.clone,
        "torch.Tensor.__eq__": torch.Tensor.__eq__, "torch.Tensor.abs": torch.Tensor.abs,
        "torch.Tensor.sub": torch.Tensor.sub, "torch.Tensor.__sub__": torch.Tensor.__sub__,
        "torch.Tensor.le": torch.Tensor.le, "torch.Tensor.sum": torch.Tensor.sum,
        "torch.Tensor.max": torch.Tensor.max, "torch.Tensor.item": torch.Tensor.item,
        "torch.Tensor.tolist": torch.Tensor.tolist, "torch.Tensor.float": torch.Tensor.float,
        "torch.Tensor.double": torch.Tensor.double, "torch.Tensor.cpu": torch.Tensor.cpu,
        "torch.Tensor.untyped_storage": torch.Tensor.untyped_storage,
        "torch.nn.Module.__call__": torch.nn.Module.__call__, "torch.nn.Module._call_impl": torch.nn.Module._call_impl,
        "torch.cuda.synchronize": torch.cuda.synchronize, "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.record": torch.cuda.Event.record, "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
        "time.perf_counter": time.perf_counter, "time.monotonic": time.monotonic, "json.dumps": json.dumps,
        "socket.socket.sendall": socket.socket.sendall, "os._exit": os._exit,
        "builtins.isinstance": isinstance, "builtins.type": type, "builtins.float": float, "builtins.len": len,
    }
    # The judge's modules are not imported here (the runner imports nothing of the judge: tests/test_boundary.py):
    # they are in this process because the zygote imported them before it forked the runner, and replacing their
    # functions is tampering all the same, so they are found by name.
    judge = [sys.modules[f"{_PACKAGE}.judge.{name}"] for name in ("compare", "tasks", "child")
             if f"{_PACKAGE}.judge.{name}" in sys.modules]
    for mod in (report, models, *judge, sys.modules[__name__]):
        for key, value in vars(mod).items():
            if callable(value) and getattr(value, "__module__", None) == mod.__name__:
                objs[f"{mod.__name__}.{key}"] = value
                if _isinstance(value, type):
                    for k2, v2 in vars(value).items():
                        if callable(v2):
                            objs[f"{mod.__name__}.{key}.{k2}"] = v2
    return objs


class Guards:
    """All runtime checks of one evaluation child; ``findings`` grows as problems are seen."""

    def __init__(self, policy):
        self.policy = policy or {}
        rt = self.policy.get("runtime") or {}
        self.aten_allowed = set(rt.get("aten_allowed") or [])
        self.check_aten = bool(rt.get("check_aten", True)) and bool(self.aten_allowed)
        self.launch_required = bool(rt.get("launch_required", True))
        self.check_host = (self.policy.get("findings") or {}).get("host_values") != "off"
        self.findings = []
        self._seen = set()

    def install(self):
        install_launch_hooks()
        self.state = global_state()
        self.functions = _functions_to_guard()
        self.codes = {k: getattr(v, "__code__", None) for k, v in self.functions.items()}

    def add(self, kind, stage, variant, message, evidence=None):
        key = (kind, message)
        if key in self._seen or ((self.policy.get("findings") or {}).get(kind) == "off"):
            return
        self._seen.add(key)
        self.findings.append({"type": kind, "stage": stage, "variant": variant, "message": message,
                              "evidence": evidence or {}})

    # -- after each stage ---------------------------------------------------------------------------------
    def check_process(self, stage):
        now = global_state()
        changed = {k: [self.state.get(k), v] for k, v in now.items() if self.state.get(k) != v}
        threads = changed.pop("threads", None)
        if threads and threads[1] > threads[0]:
            self.add("thread_spawned", stage, None,
                     f"{threads[1] - threads[0]} thread(s) started by the candidate are still running",
                     {"before": threads[0], "after": threads[1],
                      "names": [t.name for t in threading.enumerate()][:10]})
        if changed:
            self.add("global_state", stage, None,
                     "process-wide settings were changed: " + ", ".join(sorted(changed)), changed)
        current = _functions_to_guard()
        swapped = sorted(k for k, v in self.functions.items()
                         if current.get(k) is not v or getattr(v, "__code__", None) is not self.codes[k])
        swapped += [f"{cls.__name__}.{attr}" for cls, attr, fn in _INSTALLED if cls.__dict__.get(attr) is not fn]
        if swapped:
            self.add("harness_tampering", stage, None,
                     "functions kgym relies on were replaced: " + ", ".join(swapped[:8]), {"replaced": swapped[:40]})

    # -- around one candidate call ------------------------------------------------------------------------
    def call(self, model, args, stage, variant, inputs_checked=False):
        """Runs model(*args) under the launch and ATen recorders; returns its output.  Exceptions propagate.
        ``inputs_checked``: the inputs are the judge's own, handed over in place, and the judge checks them
        itself (transport.InPlace): no snapshot of them here."""
        inputs = _tensors(list(args))
        params = list(model.parameters())
        before_in = None if inputs_checked else _snapshot(inputs)
        before_p = _snapshot(params)
        threads_before = threading.active_count()
        LOG.reset()
        LOG.active = True
        rec = AtenRecorder() if self.check_aten else None
        host = HostValueRecorder() if self.check_host else None
        try:
            with contextlib.ExitStack() as stack:
                for mode in (rec, host):
                    if mode is not None:
                        stack.enter_context(mode)
                out = model(*args)
        finally:
            LOG.active = False
        # Right after the call, before deferred work could finish: a thread started by forward is still alive.
        threads_after = threading.active_count()
        if threads_after > threads_before:
            self.add("thread_spawned", stage, variant,
                     f"forward returned with {threads_after - threads_before} new thread(s) running",
                     {"before": threads_before, "after": threads_after})
        try:
            self.check_call(out, inputs, params, before_in, before_p, list(LOG.kernels),
                            rec.ops if rec else None, stage, variant, host.calls if host else None)
        except Exception as exc:  # noqa: BLE001 — a check that breaks is kgym's bug, never the candidate's
            if report.is_out_of_memory(exc):
                raise  # no memory for the check (other evaluations share the GPU): the variant is re-run alone
            self.add("guard_error", stage, variant, f"a runtime check failed: {type(exc).__name__}: {exc}"[:500])
        return out

    def check_call(self, out, inputs, params, before_in, before_p, kernels, ops, stage, variant, host=None):
        if self.launch_required and not kernels:
            self.add("no_triton_launch", stage, variant,
                     "ModelNew.forward launched no Triton kernel: the result was not computed by your kernels")
        if ops is not None:
            bad = {k: v for k, v in ops.items() if k not in self.aten_allowed}
            if bad:
                self.add("torch_compute", stage, variant,
                         "PyTorch operators ran inside forward outside any Triton launch: " + ", ".join(sorted(bad)),
                         {"aten_ops": bad, "kernels": sorted(set(kernels))})
        if host:
            self.add("host_values", stage, variant,
                     "tensor data became Python values inside forward outside any Triton launch ("
                     + ", ".join(sorted(host)) + "): the host computed with it",
                     {"conversions": dict(host), "kernels": sorted(set(kernels))})
        self._check_outputs(_tensors(out), inputs, params, stage, variant)
        for j, (t, b) in enumerate(zip(inputs, before_in or [])):
            if not _same_bits(t, b):
                self.add("input_mutation", stage, variant, f"input {j} was modified by forward",
                         {"input": j, "shape": list(t.shape)})
        for j, (t, b) in enumerate(zip(params, before_p)):
            if not _same_bits(t, b):
                self.add("parameter_mutation", stage, variant, f"parameter {j} was modified by forward",
                         {"parameter": j, "shape": list(t.shape)})

    def _check_outputs(self, outs, inputs, params, stage, variant):
        """Every output a plain tensor sharing no memory with an input or a parameter."""
        for i, t in enumerate(outs):
            if _type(t) is not _Tensor:
                self.add("output_subclass", stage, variant,
                         f"output {i} is a {_type(t).__name__}, not a plain torch.Tensor", {"output": i,
                                                                                            "class": _type(t).__name__})
                continue
            span = _span(t)
            if span is None:
                continue
            for kind, group in (("input", inputs), ("parameter", params)):
                for j, other in enumerate(group):
                    o = _span(other)
                    if o and span[0] < o[1] and o[0] < span[1]:
                        self.add("output_alias", stage, variant,
                                 f"output {i} shares memory with {kind} {j}: return a new tensor",
                                 {"output": i, kind: j})

    def check_timed(self, out, args, params, stage, variant, nonfinite=True):
        """A timed call's output, after the call and outside its events: the output checks of a correctness
        call (type, aliasing with the inputs and parameters; findings), and its description for the judge
        (describe_outputs), who holds it against the reference's shape and dtype and checks the call in full
        when they differ or values are not finite.  A check that breaks is a guard_error, and the description
        then says so (the judge checks that call)."""
        try:
            outs = _tensors(out)
            self._check_outputs(outs, _tensors(list(args)), params, stage, variant)
            return describe_outputs(out, nonfinite)
        except Exception as exc:  # noqa: BLE001 — kgym's bug, never the candidate's
            if report.is_out_of_memory(exc):
                raise
            self.add("guard_error", stage, variant, f"a timed output check failed: {type(exc).__name__}: {exc}"[:500])
            return [{"type": "?", "error": f"{type(exc).__name__}"}]


# Elements a step of nonfinite reads (its mask: 16 MiB), as the judge's comparison does (judge/compare.py CHUNK).
NONFINITE_CHUNK = 1 << 24


def nonfinite(t) -> int:
    """How many values of ``t`` are NaN or infinite, a chunk at a time (a multi-GB output gets no
    whole-output mask)."""
    if not (t.is_floating_point() or t.is_complex()) or not t.numel():
        return 0
    flat = t.detach().reshape(-1)
    if t.is_floating_point():
        # Nearly always none: one reduction with no temporaries says so (the least and the greatest value are
        # finite only when every value is: both propagate NaN), and only then is anything counted.  The count
        # below is a mask and a sum a 16M-element chunk: 33 ms on a 6.4 GB output on an H200.
        low, high = torch.aminmax(flat)
        if bool(torch.isfinite(torch.stack((low, high))).all()):
            return 0
    bad = torch.zeros((), dtype=torch.int64, device=flat.device)
    for start in range(0, flat.numel(), NONFINITE_CHUNK):
        bad += torch.isfinite(flat[start:start + NONFINITE_CHUNK]).logical_not_().sum()
    return int(bad)  # one wait for the device, not one a chunk


def describe_outputs(out, count_nonfinite=True) -> list:
    """What the judge learns of a timed output without fetching it: for each output item (tensors, in the
    order _tensors flattens them; a forward that returned no tensor is one item of its type), its type,
    shape, dtype, strides and count of non-finite values (None when not ``count_nonfinite``: a timed call's,
    whose count the judge asks for only if it checks that call)."""
    items = _tensors(out)
    if not items:
        return [{"type": _type(out).__name__}]
    desc = []
    for t in items:
        d = {"type": "torch.Tensor" if _type(t) is _Tensor else _type(t).__name__,
             "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "stride": list(t.stride())}
        # A subclass is not computed on here (its operators are the candidate's code): the judge checks that
        # call in full anyway (another type than the reference's).
        d["nonfinite"] = nonfinite(t) if count_nonfinite and _type(t) is _Tensor else None
        desc.append(d)
    return desc
