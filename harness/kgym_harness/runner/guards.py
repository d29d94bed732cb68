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
- Every Triton launch of a forward the harness calls on a GPU must run on the stream the harness's events are
  recorded on (``side_stream``): work queued elsewhere does not delay the end event, so the timer would not
  wait for it (the candidate language refuses streams; this is the runtime witness, ``Guards.watching``).
- Outputs must be plain ``torch.Tensor``s that share no storage with an input or a parameter.
- Inputs and the model's state are compared bit for bit before and after each call: their storages, each once, in
  chunks, with each tensor's place in its storage (``StateWatch``; a keyed fingerprint a chunk above 256 MiB).
- Global state (TF32 and determinism flags, default dtype, thread counts, live threads) is snapshotted before the
  import and compared after each stage.
- The functions the harness relies on (comparison, timers, events, the channel, the harness's own functions and
  their code objects) are captured by identity before the import and re-checked after each stage.

Each problem becomes a finding ``{"type", "stage", "variant", "message", "evidence"}``; kgym (C) decides, from
the policy, which findings make the verdict ``hacked``.
"""

import contextlib
import inspect
import os
import sys
import threading

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from ..shared import report, transport

# Captured at import of this module (in the zygote, long before any candidate exists).
_is = id
_type = type
_isinstance = isinstance
_Tensor = torch.Tensor
_equal = torch.equal
_ne = torch.ne
_any = torch.any
_stack = torch.stack
_cat = torch.cat
_empty = torch.empty
_fingerprint_sum = transport.fingerprint_sum
_read_all = transport.read_all  # its own torch functions captured too
_PACKAGE = __name__.split(".")[0]  # kgym_harness


class LaunchLog:
    """Counts Triton launches while ``active``; ``depth`` > 0 while a launch runs.  While ``stream`` is set (the
    raw handle of the stream a harness call records its events on: Guards.watching), a launch on any other
    stream is added to ``off_stream`` (the kernel's name and the stream), whether or not ``active``."""

    def __init__(self):
        self.active = False
        self.depth = 0
        self.kernels = []
        self.stream = None
        self.off_stream = []

    def reset(self):
        self.kernels = []


def _raw_stream():
    """The raw handle of the current CUDA stream on the current device: the stream Triton's launcher queues a
    kernel on (its driver asks torch for the same handle), and the one torch.cuda.Event.record uses."""
    return torch._C._cuda_getCurrentRawStream(torch._C._cuda_getDevice())


def _watch_launch(name_of, self):
    """A launch seen while LOG.stream is set: recorded in LOG.off_stream when it is queued on another stream."""
    stream = _raw_stream()
    if stream != LOG.stream and len(LOG.off_stream) < 20:
        try:
            name = str(name_of(self))
        except Exception:  # noqa: BLE001 — a nameless kernel still counts
            name = "?"
        LOG.off_stream.append({"kernel": name, "stream": int(stream), "timed_stream": int(LOG.stream)})


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
    cached = getattr(self, "cache", None)
    for config in list(getattr(self, "configs", None) or []) + (list(cached.values()) if isinstance(cached, dict)
                                                                 else []) + [getattr(self, "best_config", None)]:
        _config_hooks_outside(config)
    for hook in ("pre_hook", "post_hook"):
        if getattr(self, f"user_defined_{hook}", True) and callable(getattr(self, hook, None)):
            setattr(self, hook, _outside(getattr(self, hook)))
    if callable(getattr(self, "early_config_prune", None)):
        self.early_config_prune = _pruned_hooks_outside(_outside(self.early_config_prune))
    if callable(getattr(self, "perf_model", None)):
        self.perf_model = _outside(self.perf_model)
    _grid_argument(self, kwargs)


def _config_hooks_outside(config):
    for hook in ("pre_hook", "post_hook"):
        if callable(getattr(config, hook, None)):
            setattr(config, hook, _outside(getattr(config, hook)))


def _pruned_hooks_outside(prune):
    """early_config_prune returns the configs Triton launches with, new objects of the candidate's making: their
    hooks run as if outside the launch too (a red team's pre_hook computed the output with torch there, unseen).
    The cached and best configs are wrapped again before every run (_autotune_hooks_and_grid)."""
    if getattr(prune, "__kgym_pruned__", False):
        return prune

    def pruned(*args, **kwargs):
        configs = prune(*args, **kwargs)
        for config in configs if isinstance(configs, (list, tuple)) else []:
            _config_hooks_outside(config)
        return configs

    pruned.__kgym_pruned__ = True
    pruned.__kgym_outside__ = True
    return pruned


def _heuristics_and_grid(self, kwargs):
    """Heuristics.run: its values, which it calls before the launch it wraps, and the grid it passes on."""
    for k, f in list(self.values.items()):
        self.values[k] = _outside(f)
    _grid_argument(self, kwargs)


def _executor_grid(self, _kwargs):
    """The interpreter's GridExecutor holds the grid it will call."""
    self.grid = _outside(self.grid)


class LaunchArgumentError(TypeError):
    """A kernel argument Triton's GPU launcher would not take (_refuse): raised at the launch, before Triton reads
    the argument and before the kernel body runs."""


class ConstexprValueError(LaunchArgumentError):
    """A tl.constexpr argument that is not a compile-time constant."""


# What a kernel argument may be, keyed by the id of its exact class (an int: looking it up runs no __hash__ or
# __eq__ of a metaclass the candidate wrote).  _capture_kinds fills it from torch and Triton when the launch hooks
# are installed, before the candidate is imported: a subclass the candidate defines later, or a name it rebinds
# in a Triton module, is not in it.  Empty: every argument is refused (fail closed).
_KINDS = {}
_KINDS_HELD = []  # the classes themselves, so that their ids stay theirs
# The Guards of this process (Guards.install): a refused argument that could carry code is its finding.
_SINK = []
# Tuples nested deeper than this are refused (a kernel's tuples are a level or two deep).
_DEPTH = 8
_WRAPPER_FIELDS = frozenset()  # a TensorWrapper's own attributes (_capture_kinds)
_DESCRIPTOR_FIELDS = frozenset()  # a TensorDescriptor's fields (_capture_kinds)
# A class's name and method resolution order as the type object holds them, whatever its metaclass says.
_qualname = type.__dict__["__qualname__"].__get__
_mro = type.__dict__["__mro__"].__get__
_Size = torch.Size
_EMPTY = inspect.Parameter.empty


def _capture_kinds():
    """Fills _KINDS.  A kernel argument is what Triton's GPU launcher takes (native_specialize_impl, the launcher
    and its binder, Triton 3.6): a plain tensor (or nn.Parameter), a bool, int or float, None, a tuple of those
    (torch.Size is one), a TensorDescriptor, triton.reinterpret's TensorWrapper, a @triton.jit function or a
    tl.constexpr; a tl.constexpr parameter also takes a string or a dtype (the compiler makes them constants).
    Exact classes only: a subclass's methods, and an object's own attributes, are the candidate's code, which
    the interpreter would call (``__index__``, ``data_ptr``, ``__add__`` in the body) inside the launch."""
    global _WRAPPER_FIELDS, _DESCRIPTOR_FIELDS
    if _KINDS:
        return
    import triton.language as tl

    kinds = [(bool, "scalar"), (int, "scalar"), (float, "scalar"), (type(None), "scalar"),
             (_Tensor, "tensor"), (torch.nn.Parameter, "tensor"), (tuple, "tuple"), (_Size, "tuple"),
             (str, "constant"), (torch.dtype, "constant"), (tl.constexpr, "constexpr")]
    todo = [tl.dtype]
    while todo:  # Triton's own dtype classes (pointer_type, block_type, ...): none of the candidate's exists yet
        cls = todo.pop()
        kinds.append((cls, "constant"))
        todo.extend(cls.__subclasses__())
    try:
        from triton.runtime.jit import JITFunction, TensorWrapper

        kinds += [(JITFunction, "jit"), (TensorWrapper, "wrapper")]
        _WRAPPER_FIELDS = frozenset(vars(TensorWrapper(torch.empty(0), tl.float32)))
    except Exception:  # noqa: BLE001 — another Triton: such arguments are refused
        pass
    try:
        from triton.runtime.interpreter import InterpretedFunction

        kinds.append((InterpretedFunction, "jit"))
    except Exception:  # noqa: BLE001 — no interpreter in this build
        pass
    try:
        import dataclasses

        from triton.tools.tensor_descriptor import TensorDescriptor

        kinds.append((TensorDescriptor, "descriptor"))
        _DESCRIPTOR_FIELDS = frozenset(f.name for f in dataclasses.fields(TensorDescriptor))
    except Exception:  # noqa: BLE001 — no tensor descriptors in this Triton
        pass
    _KINDS_HELD.extend(cls for cls, _ in kinds)
    _KINDS.update((_is(cls), kind) for cls, kind in kinds)


def _own_fields(obj, allowed):
    """Whether the instance dictionary of ``obj`` (an exact Triton class) holds only the attributes Triton sets:
    one of the candidate's own (``data_ptr = ...``) would shadow the method Triton calls."""
    for k in obj.__dict__:  # iterating a dict hashes nothing
        if _type(k) is not str or k not in allowed:
            return False
    return True


def _plain_tensor(t):
    # An attribute of its own (t.data_ptr = ...) would shadow torch's method where Triton calls it.
    return _KINDS.get(_is(_type(t))) == "tensor" and not t.__dict__


def _ints(seq):
    t = _type(seq)
    if not (t is list or t is tuple or t is _Size):
        return False
    for x in seq:
        if _type(x) is not int:
            return False
    return True


def _argument_ok(v, constexpr, depth=0):
    """Whether ``v`` is a kernel argument Triton's GPU launcher takes (_capture_kinds), for a tl.constexpr
    parameter when ``constexpr``.  Reads exact classes by identity and instance dictionaries only: nothing of the
    candidate's runs here."""
    kind = _KINDS.get(_is(_type(v)))
    if kind == "scalar" or kind == "jit":
        return True
    if kind == "tensor":
        return not constexpr and not v.__dict__
    if kind == "constant":
        return constexpr
    if kind == "tuple":
        if depth >= _DEPTH:
            return False
        for x in v:
            if not _argument_ok(x, constexpr, depth + 1):
                return False
        return True
    if kind == "constexpr":  # tl.constexpr(value): a constant wherever it is passed
        return depth < _DEPTH and _argument_ok(v.value, True, depth + 1)
    if kind == "wrapper":  # triton.reinterpret(t, dtype): a pointer of another element type
        return (not constexpr and _own_fields(v, _WRAPPER_FIELDS) and _plain_tensor(v.base)
                and _KINDS.get(_is(_type(v.dtype))) == "constant" and _type(v.dtype) is not str)
    if kind == "descriptor":
        return (not constexpr and _own_fields(v, _DESCRIPTOR_FIELDS) and _plain_tensor(v.base)
                and _ints(v.shape) and _ints(v.strides) and _ints(v.block_shape) and _type(v.padding) is str)
    return False


def _inert(v, depth=0):
    """A refused value with no code of its own: a string, a dtype, a complex number, or a plain list, tuple,
    set or dict of those and numbers.  Passing one where Triton takes none is a mistake Triton's GPU launcher
    reports as an error.  Anything else (a tensor where a constant belongs, a function, a module, a layer, a
    subclass, an object, a container holding one) would reach the interpreter's kernel body as an object whose
    methods run there, where no recorder looks."""
    t = _type(v)
    kind = _KINDS.get(_is(t))
    if kind == "scalar" or kind == "constant" or t is complex:
        return True
    if depth >= _DEPTH:
        return False
    if kind == "constexpr":
        return _inert(v.value, depth + 1)
    if t is list or t is tuple or t is set or t is frozenset or t is _Size:
        return all(_inert(x, depth + 1) for x in v)
    if t is dict:
        return all(_inert(k, depth + 1) and _inert(x, depth + 1) for k, x in v.items())
    return False


def _advice(v, constexpr):
    """What to pass instead of ``v`` (refused), for the message."""
    t = _type(v)
    kind = _KINDS.get(_is(t))
    if t is list or t is dict or t is set or t is frozenset:
        return ("a Python container is not a kernel argument (the GPU launcher refuses it too): pass its tensors "
                "and numbers as separate arguments, or a tuple of them")
    if kind == "constant":
        return "a string or a dtype is a compile-time constant: declare the parameter `: tl.constexpr`"
    if kind == "tensor" and constexpr:
        return "a tensor is never a compile-time constant: drop `: tl.constexpr` and load its values in the kernel"
    if kind in ("tensor", "wrapper", "descriptor"):
        return "it carries attributes of its own: pass the tensor itself, with nothing set on it"
    mro = _mro(t)
    if any(c is int or c is float for c in mro):
        return "a subclass of a number (its methods are code): pass a plain int or float"
    if any(c is _Tensor for c in mro):
        return "a tensor subclass (its methods are code): pass a plain torch.Tensor"
    if kind == "tuple" or t is complex:
        return "it holds a value that is not a kernel argument"
    return "pass tensors and numbers as separate arguments"


def _refuse(kernel, name, v, constexpr):
    """Raises LaunchArgumentError (ConstexprValueError for a tl.constexpr parameter) naming the parameter, the
    class it was given and what to pass; a value that could carry code (not _inert) is also a
    ``launch_argument`` finding of this process's Guards, so that a candidate that catches the error is still
    seen."""
    what = _qualname(_type(v))
    message = (f"{kernel}: the {'tl.constexpr ' if constexpr else ''}parameter {name} was given {what}: "
               f"{_advice(v, constexpr)} (a kernel takes tensors, Python numbers (bool, int, float), None, tuples "
               "of these and TensorDescriptors; a tl.constexpr parameter takes numbers, strings, dtypes, None and "
               "@triton.jit functions; the GPU launcher refuses anything else)")
    if not _inert(v):
        for g in list(_SINK):
            g.refused_launch(message, {"kernel": kernel, "parameter": name, "class": what,
                                       "constexpr": bool(constexpr)})
    raise (ConstexprValueError if constexpr else LaunchArgumentError)(message)


def _interpreter_arguments(self, args, kwargs):
    """The interpreter's GridExecutor.__call__: every value the kernel body will be called with (positional,
    keyword, and the defaults the interpreter fills in: the same inspect.getcallargs it makes) is a kernel
    argument (_argument_ok), or the launch is refused (_refuse) before the interpreter reads any of it.  The
    interpreter passes anything that is not an int, a tensor, a tuple or a TensorDescriptor to the body as the
    object itself, and the body runs inside the launch, where the recorders leave Triton's work alone.  The
    candidate language refuses such launches statically; this is the runtime's own witness, which does not
    depend on the checker typing every value right, nor on LOG or anything else the candidate's code could set
    before the launch."""
    kernel = getattr(self.fn, "__name__", "?")
    constexprs = set(getattr(self, "constexprs", ()) or ())
    try:
        names = inspect.getfullargspec(self.fn).args
        bound = inspect.getcallargs(self.fn, *args, **{k: v for k, v in kwargs.items() if k in names})
    except TypeError:
        # A call the interpreter refuses itself (too many arguments, a missing one): what it reads before it
        # does is checked all the same.
        names = list(getattr(self, "arg_names", ()) or ())
        bound = {(names[i] if i < len(names) else f"#{i}"): a for i, a in enumerate(args)}
        bound.update((k, v) for k, v in kwargs.items() if k in names)
    for name, v in bound.items():
        if not _argument_ok(v, name in constexprs):
            _refuse(kernel, name, v, name in constexprs)


def _jit_arguments(self, args, kwargs):
    """JITFunction.run (a GPU launch): the rule of _interpreter_arguments, on the values Triton's binder will
    bind to the kernel's parameters (positional, keyword, defaults), before it reads them.  Triton's launcher
    refuses most of what this refuses, but reads an argument first (``data_ptr`` of anything that has one, a
    subclass's dunders); here nothing of the candidate's runs.  O(parameters) exact-class lookups: it runs on
    every timed launch (bench/launch_args_overhead.py)."""
    n = len(args)
    for i, p in enumerate(self.params):
        if i < n:
            v = args[i]
        elif p.name in kwargs:
            v = kwargs[p.name]
        else:
            v = p.default  # (KernelParam.has_default compares it with !=: the default's own __ne__)
            if v is _EMPTY:
                continue  # Triton's binder refuses the call itself
        # Inline, the two kinds nearly every argument is (a number; a tensor where no constant belongs).
        kind = _KINDS.get(_is(_type(v)))
        if kind == "scalar":
            continue
        constexpr = p.is_constexpr
        if kind == "tensor" and not constexpr and not v.__dict__:
            continue
        if not _argument_ok(v, constexpr):
            _refuse(getattr(self.fn, "__name__", "?"), p.name, v, constexpr)


def _device_call_defaults(self, args, kwargs):
    """The interpreter's InterpretedFunction.__call__ (a @triton.jit function called from a kernel body): every
    default value the call fills in must be a kernel argument, as for a launch (_argument_ok; a constant, since
    Triton's compiler makes a device function's Python values constants).  The launch's check (_interpreter_arguments)
    sees the launched kernel's own defaults only, and a helper's default is handed to its body as the object
    itself: a plain function given so ran inside the launch, untyped (red team, 2026-11-26).  The arguments the
    body passes are the checked kernel's own values; only what the call does not pass is read here."""
    fn = self.fn
    code = fn.__code__
    names = code.co_varnames[:code.co_argcount]  # the positional parameters (keyword-only ones follow them)
    given = set(names[:len(args)]) | set(kwargs)
    defaults = fn.__defaults__ or ()
    params = names[len(names) - len(defaults):] if defaults else ()
    filled = [(n, v) for n, v in zip(params, defaults) if n not in given]
    filled += [(n, v) for n, v in (fn.__kwdefaults__ or {}).items() if n not in given]
    for name, v in filled:
        if not _argument_ok(v, True):
            _refuse(getattr(fn, "__name__", "?"), name, v, True)


def _check_only(cls, attr, check):
    """Wraps cls.attr with ``check(self, args, kwargs)`` before it (an exception refuses the call); nothing else:
    a device function's call is part of its launch, not a launch of its own."""
    original = cls.__dict__[attr]

    def call(self, *args, **kwargs):
        check(self, args, kwargs)
        return original(self, *args, **kwargs)

    setattr(cls, attr, call)
    _INSTALLED.append((cls, attr, call))


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
        if LOG.stream is not None and LOG.depth == 0:
            _watch_launch(name_of, self)
        LOG.depth += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            LOG.depth -= 1

    setattr(cls, attr, launch)
    _INSTALLED.append((cls, attr, launch))


def install_launch_hooks():
    """Wraps every Triton launch path once per process (the zygote's import of the harness is too early:
    the wrappers are installed in the child, before the candidate is imported)."""
    if _INSTALLED:
        return
    from triton.runtime import jit

    _capture_kinds()
    # A warmup compiles (MockTensors for tensors) and runs nothing.
    _wrap(jit.JITFunction, "run", lambda self: getattr(self.fn, "__name__", "?"),
          skip=lambda kw: kw.get("warmup", False), check=_jit_arguments)
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
              prepare=_executor_grid, check=_interpreter_arguments)
        _check_only(interpreter.InterpretedFunction, "__call__", _device_call_defaults)
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


def model_state(model):
    """A model's parameters, buffers (register_buffer) and the tensors its modules hold as plain attributes (in
    lists, tuples and dicts too): its state, which forward may read and never write, and no output may share.
    Red teams kept a call counter in a buffer a kernel wrote, unseen while only the parameters were snapshot, and
    then (2026-11-26) a counter and a copy of the first output in tensors made in __init__ as plain attributes,
    unseen while only parameters and buffers were."""
    seen, out = set(), []
    held = list(model.parameters()) + list(model.buffers())
    for m in model.modules():
        for name, value in vars(m).items():
            if name not in ("_parameters", "_buffers", "_modules"):
                held += _tensors(value)
    for t in held:
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


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


# The state check around a harness call (Guards.call): what forward may not change, the model's state and the
# inputs the runner checks itself.  What is watched is the tensors' storages, each once however many tensors view
# it, as raw bytes packed in order into flat chunks of at most STATE_CHUNK bytes (a larger storage spans several),
# and each tensor's place in its storage (shape, strides, offset, dtype, which storage).  A check is then a few
# kernels a chunk and one read for all, not a copy and two kernels a tensor: red team 39b's trim_init_many held
# 8,192 parameters (~25,000 launches a call), and views cost nothing (red team 41: 64 views of one parameter, an
# expanded 4-byte one).  The chunks are copied while the storages hold at most STATE_COPY_MAX bytes in all; above it
# each chunk's keyed fingerprint (transport.fingerprint_sum, a secret key a call) stands for its copy, so the
# check's memory is a chunk and not the model's size again (the same candidate doubled 8 GiB a call, outside its
# evaluation's reservation).  With copies a storage of STATE_OWN bytes or more has chunks of its own, compared
# where it lies after the call (not copied again); with fingerprints everything is packed (a fingerprint is several
# kernels: 8,192 storages of 1 MiB must not each cost them).
STATE_CHUNK = 1 << 26
STATE_COPY_MAX = 1 << 28
STATE_OWN = 1 << 20


def _storage_bytes(t):
    """The whole storage under ``t`` as a contiguous uint8 vector (a view of it: nothing is copied).  A tensor that
    is its whole storage, as a model's parameters are, by views alone (no operator a tensor)."""
    d = t.detach()
    nbytes, size = d.untyped_storage().nbytes(), d.element_size()
    if not d.is_conj() and not d.is_neg() and nbytes % size == 0:
        if d.is_contiguous() and d.storage_offset() == 0 and d.numel() * size == nbytes:
            return d.reshape(-1).view(torch.uint8)
        return d.as_strided((nbytes // size,), (1,), 0).view(torch.uint8)  # a view still: the whole storage
    return _empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _place(t):
    """Where ``t`` lies in its storage and what it reads it as: a change of any of these in place (``set_``,
    ``.data =``, ``resize_``, ``t_()``, ``as_strided_``) is a change of the state, whatever the bytes."""
    st = t.untyped_storage()
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype, t.device, st.data_ptr(), st.nbytes())


def _bytes_differ(a, b):
    """A 0-dim bool tensor (not read): whether two uint8 vectors of one length differ, compared as 8-byte words
    where both are aligned (bytes one at a time are ~5x slower on a CPU, and more elements on a GPU)."""
    n = a.numel()
    k = n // 8 * 8 if not (a.storage_offset() % 8 or b.storage_offset() % 8) else 0
    parts = []
    if k:
        parts.append(_any(_ne(a[:k].view(torch.int64), b[:k].view(torch.int64))))
    if n > k:
        parts.append(_any(_ne(a[k:], b[k:])))
    return parts[0] if len(parts) == 1 else _any(_stack(parts))


def _packable(t):
    """Whether StateWatch takes ``t`` by its storage (a plain strided tensor with bytes); the others, rare, keep
    the per-tensor copy and comparison (_snapshot, _all_same_bits)."""
    try:
        return (t.layout == torch.strided and not t.is_meta and not t.is_quantized and not t.is_nested
                and t.numel() > 0 and t.untyped_storage().nbytes() > 0)
    except Exception:  # noqa: BLE001
        return False


def _sharing(watch, i, first, end, what):
    """For a finding's message: where a fingerprint stood for a copy (StateWatch: a large state), the tensors of
    [first, end) (inputs, or the model's state) whose bytes it shared a chunk with ``i`` (the change is in one of
    them at least), numbered from ``first``."""
    if watch.copy or i not in watch.chunk_of:
        return ""
    chunks = set(watch.chunk_of[i])
    near = sorted(k - first for k, cs in watch.chunk_of.items() if first <= k < end and k != i and chunks & set(cs))
    if not near:
        return ""
    return (f" (or one of {what} {', '.join(map(str, near[:6]))}{', ...' if len(near) > 6 else ''}, checked "
            "together with it: the model's state is too large for a copy a call)")


class StateWatch:
    """Whether a call changed any of ``tensors``: made before the call (the copies or fingerprints are queued on
    the current stream, nothing is read), asked after it (``changed``: one read a device for all chunks).

    A tensor has changed where its place in its storage changed (_place) or its storage's bytes did.  With copies
    each storage's own bytes are compared where its chunk differs; with fingerprints a differing chunk marks every
    tensor on a storage in it (``chunk_of`` says which share one), a fingerprint missing a change with probability about
    2^-32 (transport.fingerprint)."""

    def __init__(self, tensors, chunk=None, copy_max=None):
        chunk = STATE_CHUNK if chunk is None else chunk
        chunk = max(8, chunk // 8 * 8)  # pieces start on 8-byte boundaries: compared as words, fingerprinted as is
        copy_max = STATE_COPY_MAX if copy_max is None else copy_max
        self.tensors = list(tensors)
        self.loose = [i for i, t in enumerate(self.tensors) if not _packable(t)]
        loose = set(self.loose)
        self.loose_before = _snapshot([self.tensors[i] for i in self.loose])
        self.places = {}
        self.storages = []  # uint8 views of each storage watched, in order of first sight
        self.storage_of = {}  # tensor index -> storage index
        seen = {}
        for i, t in enumerate(self.tensors):
            if i in loose:
                continue
            self.places[i] = _place(t)
            key = (t.device, self.places[i][5], self.places[i][6])
            if key not in seen:
                seen[key] = len(self.storages)
                self.storages.append(_storage_bytes(t))
            self.storage_of[i] = seen[key]
        self.copy = sum(b.numel() for b in self.storages) <= copy_max
        self.key = None if self.copy else os.urandom(16).hex()
        self.tables = {}
        # Chunks: [(device, [(storage index, first byte, end byte), ...])], a device's storages in order.
        self.chunks = []
        open_chunk = {}
        for s, b in enumerate(self.storages):
            n = b.numel()
            alone = self.copy and n >= STATE_OWN
            lo = 0
            while lo < n:
                cur = None if alone else open_chunk.get(b.device)
                if cur is None or chunk - cur[1] < 8:
                    cur = [(b.device, []), 0]
                    if not alone:
                        open_chunk[b.device] = cur
                    self.chunks.append(cur[0])
                room = chunk - cur[1]
                hi = n if n - lo <= room else lo + room // 8 * 8
                cur[0][1].append((s, lo, hi))
                cur[1] += hi - lo
                lo = hi
        chunks_of = {}  # storage index -> the chunks it lies in
        for c, (_dev, parts) in enumerate(self.chunks):
            for s, _lo, _hi in parts:
                chunks_of.setdefault(s, []).append(c)
        self.chunk_of = {i: chunks_of[s] for i, s in self.storage_of.items()}  # tensor index -> chunks
        self.before = [self._summary(c, self._pack(parts, own=self.copy)) for c, (_d, parts) in enumerate(self.chunks)]

    def _pack(self, parts, own=False):
        """One chunk's bytes now: its storages' slices in order.  ``own``: a buffer of its own, never a view of a
        storage (a storage split over chunks is split on 8-byte boundaries: its pieces are aligned views)."""
        if len(parts) == 1:
            s, lo, hi = parts[0]
            piece = self.storages[s][lo:hi]
            return piece.clone() if own else piece
        return _cat([self.storages[s][lo:hi] for s, lo, hi in parts])

    def _summary(self, c, data):
        if self.copy:
            return data
        dev = data.device
        if dev not in self.tables:
            # One table of multipliers a device for the whole watch, both passes (it is the key's: chunks differ
            # by their own multiplier, transport.fingerprint_sum): not 128 MiB of random numbers drawn a chunk.
            words = max(sum(hi - lo for _s, lo, hi in parts) for d, parts in self.chunks if d == dev) // 4
            self.tables[dev] = transport.multipliers(min(transport.FP_CHUNK, max(1, words)),
                                                      int.from_bytes(bytes.fromhex(self.key)[:8], "little") >> 1,
                                                      dev)
        return _fingerprint_sum(data, (self.key, c), table=self.tables[dev])

    def changed(self):
        """A list of bools, one a tensor in the order given: True where the call changed it."""
        changed = [False] * len(self.tensors)
        for i, place in self.places.items():
            try:
                changed[i] = _place(self.tensors[i]) != place
            except Exception:  # noqa: BLE001 — a tensor the call left without a storage of its own
                changed[i] = True
        flags = []
        for c, (_dev, parts) in enumerate(self.chunks):
            now = self._pack(parts)
            flags.append(_bytes_differ(now, self.before[c]) if self.copy
                         else _ne(self._summary(c, now), self.before[c]))
            del now  # a chunk at a time: the state is not held a second time (red team 41)
        touched = set()
        slices, which = [], []
        for c, d in enumerate(_read_all(flags) if flags else []):
            if not d:
                continue
            parts = self.chunks[c][1]
            if not self.copy:
                touched.update(s for s, _lo, _hi in parts)
                continue
            # Rare (something changed): which of the chunk's storages, each slice on its own, read once for all.
            now, at = self._pack(parts), 0
            for s, lo, hi in parts:
                slices.append(_bytes_differ(now[at:at + hi - lo], self.before[c][at:at + hi - lo]))
                which.append(s)
                at += hi - lo
        touched.update(s for s, d in zip(which, _read_all(slices) if slices else []) if d)
        for i, s in self.storage_of.items():
            changed[i] = changed[i] or s in touched
        same = _all_same_bits([(self.tensors[i], b) for i, b in zip(self.loose, self.loose_before)])
        for i, ok in zip(self.loose, same):
            changed[i] = changed[i] or not ok
        return changed


def _same_bits(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        # NaN-aware bitwise equality: compare the raw bytes.
        if not a.numel():
            return True
        return _equal(a.reshape(-1).contiguous().view(torch.uint8), b.reshape(-1).contiguous().view(torch.uint8))
    return _equal(a, b)


def _all_same_bits(pairs):
    """``_same_bits(a, b)`` for every pair, as a list, read back from the device once for all of them: a
    ``torch.equal`` a tensor was a device synchronisation a tensor, 0.34 s an evaluation on an H100 with the
    inputs and every parameter of the model checked after each call (fifteenth session's sampling profile)."""
    out = [None] * len(pairs)
    pending = []
    for i, (a, b) in enumerate(pairs):
        if a.shape != b.shape or a.dtype != b.dtype:
            out[i] = False
        elif not a.numel():
            out[i] = True
        elif a.device != b.device:
            out[i] = _same_bits(a, b)
        else:
            x, y = a.reshape(-1).contiguous(), b.reshape(-1).contiguous()
            if a.is_floating_point() or a.is_complex():
                x, y = x.view(torch.uint8), y.view(torch.uint8)  # NaN-aware: the raw bytes
            pending.append((i, _any(_ne(x, y))))
    by_device = {}
    for i, flag in pending:
        by_device.setdefault(flag.device, []).append((i, flag))
    for group in by_device.values():
        differ = _stack([flag for _, flag in group]).tolist()
        for (i, _), d in zip(group, differ):
            out[i] = not d
    return out


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
    import socket
    import time

    from ..shared import cudashare, models, profile, timing

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
        # What the state check (StateWatch) and the fingerprint it may use (transport.fingerprint_sum) call by name.
        "torch.stack": torch.stack, "torch.cat": torch.cat, "torch.ne": torch.ne, "torch.any": torch.any,
        "torch.mul": torch.mul, "torch.zeros": torch.zeros, "torch.empty": torch.empty,
        "torch.randint": torch.randint, "torch.Generator": torch.Generator,
        "torch.Tensor.view": torch.Tensor.view, "torch.Tensor.reshape": torch.Tensor.reshape,
        "torch.Tensor.as_strided": torch.Tensor.as_strided, "torch.Tensor.set_": torch.Tensor.set_,
        "torch.Tensor.contiguous": torch.Tensor.contiguous, "torch.Tensor.to": torch.Tensor.to,
        "torch.Tensor.add_": torch.Tensor.add_, "torch.Tensor.mul_": torch.Tensor.mul_,
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
    # The runner's own module and what it times and profiles with: the figures the judge reads from the runner
    # (times, the profile's side-stream time) come from these (red team 33: cudashare.stream_id replaced at import
    # made the side-stream figure unknown).  torch's stream getter is what _raw_stream and Triton's launcher read.
    runner = sys.modules.get(f"{_PACKAGE}.runner.runner")
    getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if getter is not None:
        objs["torch._C._cuda_getCurrentRawStream"] = getter
    for mod in (report, transport, models, cudashare, profile, timing, *([runner] if runner else []), *judge,
                sys.modules[__name__]):
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

    def __init__(self, policy, cuda=False):
        self.policy = policy or {}
        self.cuda = bool(cuda)  # the candidate runs on a GPU: its launches are watched for side streams
        rt = self.policy.get("runtime") or {}
        self.aten_allowed = set(rt.get("aten_allowed") or [])
        self.check_aten = bool(rt.get("check_aten", True)) and bool(self.aten_allowed)
        self.launch_required = bool(rt.get("launch_required", True))
        self.check_host = (self.policy.get("findings") or {}).get("host_values") != "off"
        self.findings = []
        self._seen = set()
        # The stage and variant of the candidate call under way (call, and the runner's timed commands): where
        # a refused launch (refused_launch) was seen.
        self.where = (None, None)

    def install(self):
        install_launch_hooks()
        _SINK[:] = [self]
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

    @contextlib.contextmanager
    def watching(self):
        """Around a harness call of the candidate's forward on a GPU: the stream current now is the one the call's
        events go on, and every Triton launch inside on another stream is recorded (LOG.off_stream; the finding
        comes from off_stream, after the call).  Read here, before the call, and outside any timed events."""
        if not self.cuda:
            yield
            return
        LOG.stream = _raw_stream()
        try:
            yield
        finally:
            LOG.stream = None

    def off_stream(self, stage, variant):
        """The finding side_stream for the launches LOG.off_stream recorded since the last look, which it clears."""
        seen, LOG.off_stream = LOG.off_stream, []
        if seen:
            self.add("side_stream", stage, variant,
                     f"forward queued kernel {seen[0]['kernel']} on a CUDA stream other than the one it was called "
                     "on: the timer's events wait for that stream only", {"launches": seen[:20]})

    def refused_launch(self, message, evidence):
        """A launch refused for an argument that could carry code into the kernel body (_refuse)."""
        self.add("launch_argument", self.where[0], self.where[1], message, evidence)

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
        params = model_state(model)
        watched = [] if inputs_checked else inputs
        try:
            watch = StateWatch(watched + params)
        except Exception as exc:  # noqa: BLE001 — a check that breaks is kgym's bug, never the candidate's
            if report.is_out_of_memory(exc):
                raise  # no memory for the check: the variant is re-run alone
            watch = None  # the call runs, unwatched, and the guard_error fails the evaluation closed (result.c)
            self.add("guard_error", stage, variant, f"the state check could not be made: {type(exc).__name__}: "
                     f"{exc}"[:500])
        threads_before = threading.active_count()
        LOG.reset()
        LOG.active = True
        rec = AtenRecorder() if self.check_aten else None
        host = HostValueRecorder() if self.check_host else None
        self.where = (stage, variant)
        try:
            with contextlib.ExitStack() as stack:
                for mode in (rec, host):
                    if mode is not None:
                        stack.enter_context(mode)
                stack.enter_context(self.watching())
                out = model(*args)
        finally:
            LOG.active = False
            self.where = (None, None)
        self.off_stream(stage, variant)
        # Right after the call, before deferred work could finish: a thread started by forward is still alive.
        threads_after = threading.active_count()
        if threads_after > threads_before:
            self.add("thread_spawned", stage, variant,
                     f"forward returned with {threads_after - threads_before} new thread(s) running",
                     {"before": threads_before, "after": threads_after})
        try:
            self.check_call(out, inputs, params, watched, watch, list(LOG.kernels),
                            rec.ops if rec else None, stage, variant, host.calls if host else None)
        except Exception as exc:  # noqa: BLE001 — a check that breaks is kgym's bug, never the candidate's
            if report.is_out_of_memory(exc):
                raise  # no memory for the check (other evaluations share the GPU): the variant is re-run alone
            self.add("guard_error", stage, variant, f"a runtime check failed: {type(exc).__name__}: {exc}"[:500])
        return out

    def check_call(self, out, inputs, params, watched_in, watch, kernels, ops, stage, variant, host=None):
        """The findings of one call: ``watched_in`` the inputs ``watch`` (a StateWatch made before the call, over
        them and then ``params``; None where it could not be made) holds, empty where the judge checks the inputs
        itself."""
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
        if watch is None:
            return  # not made (Guards.call said so: guard_error)
        ins = watched_in
        changed = watch.changed()
        for j, t in enumerate(ins):
            if changed[j]:
                self.add("input_mutation", stage, variant, f"input {j} was modified by forward"
                         + _sharing(watch, j, 0, len(ins), "inputs"), {"input": j, "shape": list(t.shape)})
        for j, t in enumerate(params):
            if changed[len(ins) + j]:
                self.add("parameter_mutation", stage, variant, f"parameter or buffer {j} was modified by forward"
                         + _sharing(watch, len(ins) + j, len(ins), len(changed), "parameters or buffers")
                         + " (a model's state is "
                         "its weights: nothing carries over from one call to the next; a BatchNorm's running_mean "
                         "and running_var too: the output uses the batch's statistics, so leave the running ones "
                         "unchanged)", {"parameter": j, "shape": list(t.shape)})

    def _check_outputs(self, outs, inputs, params, stage, variant):
        """Every output a plain tensor sharing no memory with an input or a parameter or buffer."""
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
            self.off_stream(stage, variant)
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
