"""libdevice's math functions, and tl.range's loop variable, for Triton's CPU interpreter (runner side, CPU only).

Why: Triton 3.6's interpreter runs a kernel's body as Python, and ``triton.language.extra.libdevice`` (and its
``cuda`` module) are there stubs that return None or ask for a compiler's ``_semantic``: every honest kernel that
calls ``libdevice.tanh`` (Triton has no ``tl.tanh``: GELU's tanh form, Mish, Tanh), ``libdevice.pow`` or
``libdevice.expm1`` failed on the CPU with an error about None, while it compiles and runs on a GPU.  ``install()``
puts in their place, in this process only, numpy versions of the floating-point functions (computed in float64 and
rounded to the argument's dtype, as libdevice's single- and double-precision versions return); the integer and
bit-casting ones, which a CPU model would get wrong, raise an error that says so.

Only the runner's interpreter uses these: nothing here reaches a GPU, the judge, or a verdict but through the
outputs the judge compares, and the values are at least as exact as libdevice's.
"""

import math

import numpy as np

# name -> (arity, numpy function of float64 arrays)
_SQRT1_2 = 1.0 / math.sqrt(2.0)


def _v(fn):
    return np.vectorize(fn, otypes=[np.float64])


def _round_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


_FLOAT = {
    "abs": (1, np.abs), "acos": (1, np.arccos), "acosh": (1, np.arccosh), "asin": (1, np.arcsin),
    "asinh": (1, np.arcsinh), "atan": (1, np.arctan), "atanh": (1, np.arctanh), "cbrt": (1, np.cbrt),
    "ceil": (1, np.ceil), "cos": (1, np.cos), "cosh": (1, np.cosh), "cospi": (1, lambda x: np.cos(np.pi * x)),
    "erf": (1, _v(math.erf)), "erfc": (1, _v(math.erfc)), "exp": (1, np.exp), "exp10": (1, lambda x: 10.0 ** x),
    "exp2": (1, np.exp2), "expm1": (1, np.expm1), "fast_cosf": (1, np.cos), "fast_expf": (1, np.exp),
    "fast_exp10f": (1, lambda x: 10.0 ** x), "fast_log10f": (1, np.log10), "fast_log2f": (1, np.log2),
    "fast_logf": (1, np.log), "fast_sinf": (1, np.sin), "fast_tanf": (1, np.tan), "floor": (1, np.floor),
    "lgamma": (1, _v(math.lgamma)), "log": (1, np.log), "log10": (1, np.log10), "log1p": (1, np.log1p),
    "log2": (1, np.log2), "nearbyint": (1, np.rint), "rint": (1, np.rint), "round": (1, _round_away),
    "rsqrt": (1, lambda x: 1.0 / np.sqrt(x)), "rsqrt_rn": (1, lambda x: 1.0 / np.sqrt(x)),
    "rcbrt": (1, lambda x: 1.0 / np.cbrt(x)), "saturatef": (1, lambda x: np.clip(x, 0.0, 1.0)),
    "sin": (1, np.sin), "sinh": (1, np.sinh), "sinpi": (1, lambda x: np.sin(np.pi * x)), "sqrt": (1, np.sqrt),
    "tan": (1, np.tan), "tanh": (1, np.tanh), "tgamma": (1, _v(math.gamma)), "trunc": (1, np.trunc),
    "normcdf": (1, lambda x: 0.5 * _v(math.erfc)(-x * _SQRT1_2)),
    "atan2": (2, np.arctan2), "copysign": (2, np.copysign), "fdim": (2, lambda a, b: np.maximum(a - b, 0.0)),
    "fmod": (2, np.fmod), "hypot": (2, np.hypot), "rhypot": (2, lambda a, b: 1.0 / np.hypot(a, b)),
    "nextafter": (2, np.nextafter), "pow": (2, np.power), "fast_powf": (2, np.power),
    "fast_dividef": (2, lambda a, b: a / b), "remainder": (2, lambda a, b: a - b * np.rint(a / b)),
    "fma": (3, lambda a, b, c: a * b + c),
    "norm3d": (3, lambda a, b, c: np.sqrt(a * a + b * b + c * c)),
    "rnorm3d": (3, lambda a, b, c: 1.0 / np.sqrt(a * a + b * b + c * c)),
    "norm4d": (4, lambda a, b, c, d: np.sqrt(a * a + b * b + c * c + d * d)),
    "rnorm4d": (4, lambda a, b, c, d: 1.0 / np.sqrt(a * a + b * b + c * c + d * d)),
}
for _mode in ("rd", "rn", "ru", "rz"):  # directed rounding: float64 then rounded to nearest (within an ulp)
    _FLOAT[f"add_{_mode}"] = (2, lambda a, b: a + b)
    _FLOAT[f"sub_{_mode}"] = (2, lambda a, b: a - b)
    _FLOAT[f"mul_{_mode}"] = (2, lambda a, b: a * b)
    _FLOAT[f"div_{_mode}"] = (2, lambda a, b: a / b)
    _FLOAT[f"rcp_{_mode}"] = (1, lambda x: 1.0 / x)
    _FLOAT[f"sqrt_{_mode}"] = (1, np.sqrt)
    _FLOAT[f"fma_{_mode}"] = (3, lambda a, b, c: a * b + c)

# name -> numpy predicate; libdevice returns them as int32
_PREDICATES = {"isnan": np.isnan, "isinf": np.isinf, "finitef": np.isfinite, "isfinited": np.isfinite,
               "signbit": np.signbit}

_MODULES = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice")


def _operands(args):
    """The arguments' data as numpy arrays, and the first tensor's (scalar dtype, numpy dtype)."""
    import triton.language as tl

    first = next((a for a in args if isinstance(a, tl.tensor)), None)
    if first is None:
        raise TypeError("a libdevice function needs at least one tensor argument")
    datas = []
    for a in args:
        if isinstance(a, tl.constexpr):
            a = a.value
        if isinstance(a, tl.tensor):
            datas.append(np.asarray(a.handle.data))
        elif isinstance(a, (bool, int, float)):
            datas.append(np.asarray(a, dtype=first.handle.data.dtype))
        else:
            raise TypeError(f"a libdevice function takes tensors and numbers, not {type(a).__name__}")
    return datas, first.dtype.scalar, first.handle.data.dtype


def _result(data, scalar):
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    data = np.ascontiguousarray(data)
    ty = tl.block_type(scalar, list(data.shape)) if data.ndim else scalar
    return tl.tensor(TensorHandle(data, scalar), ty)


def _float_fn(name, arity, fn):
    def libdevice_fn(*args, _semantic=None):
        if len(args) != arity:
            raise TypeError(f"libdevice.{name} takes {arity} argument(s), got {len(args)}")
        datas, scalar, np_dtype = _operands(args)
        if not scalar.is_floating():
            raise TypeError(f"libdevice.{name}: kgym's CPU interpreter computes it on floating-point tensors only, "
                            f"not {scalar}")
        with np.errstate(all="ignore"):
            out = fn(*[d.astype(np.float64) for d in datas])
        return _result(np.asarray(out).astype(np_dtype), scalar)

    libdevice_fn.__name__ = name
    return libdevice_fn


def _predicate(name, fn):
    def libdevice_fn(*args, _semantic=None):
        import triton.language as tl

        if len(args) != 1:
            raise TypeError(f"libdevice.{name} takes 1 argument, got {len(args)}")
        datas, _scalar, _np = _operands(args)
        return _result(fn(datas[0]).astype(np.int32), tl.int32)

    libdevice_fn.__name__ = name
    return libdevice_fn


def _missing(name):
    def libdevice_fn(*_args, _semantic=None):
        raise NotImplementedError(f"libdevice.{name} has no version in Triton's CPU interpreter (kgym runs the "
                                  "floating-point math functions there, not the integer and bit-casting ones): use "
                                  "tl.math or Triton's operators, or run on a GPU")

    libdevice_fn.__name__ = name
    return libdevice_fn


def _tensor_range():
    """``tl.range`` for the interpreter, whose loop variable is a Python int (``_new_range``): on a GPU it is a
    tensor (int32, int64 where a bound needs it), so honest code that calls its methods (``row.to(tl.int64)`` in a
    persistent kernel: the third honest probe) failed only on the CPU.  The values are the same."""
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    def tl_range(arg1, arg2=None, step=None, **_kwargs):
        start, end = (0, arg1) if arg2 is None else (arg1, arg2)
        start, end, step = int(start), int(end), 1 if step is None else int(step)
        wide = any(not -2**31 <= v < 2**31 for v in (start, end, step))
        dtype, np_dtype = (tl.int64, np.int64) if wide else (tl.int32, np.int32)
        for i in range(start, end, step):
            yield tl.tensor(TensorHandle(np.array(i, dtype=np_dtype), dtype), dtype)

    return tl_range


def _install_range():
    """Every interpreted launch patches ``tl.range`` anew (``interpreter._patch_lang_core``, undone after it):
    the patch is wrapped so that ``tl.range`` is the tensor version (``tl.static_range`` stays Python ints, as on a
    GPU)."""
    from triton.runtime import interpreter

    core = interpreter._patch_lang_core
    if getattr(core, "__kgym_range__", False):
        return

    def patch_lang_core(lang, scope):
        core(lang, scope)
        scope.set_attr(lang, "range", _tensor_range())

    patch_lang_core.__kgym_range__ = True
    interpreter._patch_lang_core = patch_lang_core


_RANGE_NAME = "__kgym_range__"


def _install_for_range():
    """A kernel's ``for i in range(...)`` as on a GPU: Triton compiles a plain ``range`` loop like ``tl.range``
    (code_generator.visit_For), so its loop variable is a tensor there, while the interpreter runs the kernel's
    Python and gives a Python int (honest code calling ``row.to(tl.int64)`` on it failed only on the CPU: the honest
    probe c18, twenty-first session).  The interpreter compiles every kernel and device function again from its
    source (FunctionRewriter, ASTTransformer); its transformer now also turns the iterator of a ``for`` over the name
    ``range`` into the tensor range, which the rewriter puts beside the kernel (it copies the interpreter module's
    names into the kernel's globals where missing).  Host code (grids, hooks, the forward) keeps the builtin; a
    kernel whose source cannot be read is run as it is (the interpreter's own fallback)."""
    import ast

    from triton.runtime import interpreter

    transformer = interpreter.ASTTransformer
    if getattr(transformer, "__kgym_for_range__", False):
        return
    setattr(interpreter, _RANGE_NAME, _tensor_range())
    earlier = getattr(transformer, "visit_For", None)

    def visit_For(self, node):
        node = earlier(self, node) if earlier is not None else self.generic_visit(node)
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            it.func = ast.copy_location(ast.Name(id=_RANGE_NAME, ctx=ast.Load()), it.func)
        return node

    transformer.visit_For = visit_For
    transformer.__kgym_for_range__ = True


# The storages a running interpreted launch was given (GridExecutor's host copies: (first byte, end) each), a list
# per launch; empty outside launches.
_LAUNCH_STORAGES = []


class StoreOutOfBounds(IndexError):
    """A kernel stored (or updated atomically) outside every tensor it was given."""


def _storages(values):
    """(start, end) of the storage of every tensor in ``values`` (tuples and tensor descriptors looked into)."""
    out = []
    for a in values:
        if isinstance(a, (tuple, list)):
            out += _storages(a)
        elif hasattr(a, "untyped_storage"):
            st = a.untyped_storage()
            out.append((int(st.data_ptr()), int(st.data_ptr()) + int(st.nbytes())))
        elif hasattr(a, "base") and hasattr(a.base, "untyped_storage"):  # a TensorDescriptor
            out += _storages([a.base])
    return out


def _check_store(ptrs, mask, what):
    """Raises StoreOutOfBounds where an address ``ptrs`` writes (``mask`` true) lies outside the launch's tensors."""
    if not _LAUNCH_STORAGES or not _LAUNCH_STORAGES[-1]:
        return
    from triton.runtime.interpreter import _get_np_dtype

    addr = np.asarray(ptrs.data, dtype=np.uint64)
    live = np.broadcast_to(np.asarray(mask.data, dtype=bool), addr.shape) if mask is not None else \
        np.ones(addr.shape, dtype=bool)
    addr = addr[live]
    if addr.size == 0:
        return
    size = np.uint64(np.dtype(_get_np_dtype(ptrs.get_element_ty())).itemsize)
    inside = np.zeros(addr.shape, dtype=bool)
    for start, end in _LAUNCH_STORAGES[-1]:
        inside |= (addr >= np.uint64(start)) & (addr + size <= np.uint64(end))
    if inside.all():
        return
    first = int(addr[~inside][0])
    near = min(_LAUNCH_STORAGES[-1], key=lambda r: min(abs(first - r[0]), abs(first - r[1])))
    step = int(size)
    where = (f"{(first - near[1]) // step + 1} element(s) past the end of" if first >= near[1]
             else f"{(near[0] - first + step - 1) // step} element(s) before the start of")
    raise StoreOutOfBounds(
        f"the kernel's {what} wrote outside every tensor it was given: {int((~inside).sum())} element(s), the first "
        f"{where} the nearest tensor's storage ({near[1] - near[0]} bytes); a mask that lets the last block write past the end "
        "(offs <= n where offs < n was meant)? On a GPU such a store corrupts whatever lies next to the tensor")


def _install_store_bounds():
    """Stores outside the tensors a kernel was given (the wrong probe's w07: `offs <= n`, one element past the
    output, correct on every variant since the values kgym reads are right; twenty-first session).  The interpreter
    runs each launch on host copies of its tensors' storages (GridExecutor._init_args_hst; on the CPU the storages
    themselves) and every store, block-pointer store and atomic goes to an address kgym can see: one outside all of
    them raises StoreOutOfBounds in the kernel, which the candidate's call reports.  Loads are not held to it: an
    unmasked load past the end whose value is thrown away is common in honest code and harmless on a GPU."""
    from triton.runtime import interpreter

    executor, builder = interpreter.GridExecutor, interpreter.InterpreterBuilder
    if getattr(executor, "__kgym_store_bounds__", False):
        return
    init_args, call = executor._init_args_hst, executor.__call__

    def _init_args_hst(self, args_dev, kwargs):
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        if _LAUNCH_STORAGES:
            _LAUNCH_STORAGES[-1] = _storages(list(args_hst) + list(kwargs_hst.values()))
        return args_hst, kwargs_hst

    def __call__(self, *args, **kwargs):
        _LAUNCH_STORAGES.append([])
        try:
            return call(self, *args, **kwargs)
        finally:
            _LAUNCH_STORAGES.pop()

    masked_store, atomic_rmw, atomic_cas = (builder.create_masked_store, builder.create_atomic_rmw,
                                            builder.create_atomic_cas)

    def create_masked_store(self, ptrs, value, mask, cache_modifier, eviction_policy):
        _check_store(ptrs, mask, "store")
        return masked_store(self, ptrs, value, mask, cache_modifier, eviction_policy)

    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope):
        _check_store(ptr, mask, "atomic update")
        return atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope)

    def create_atomic_cas(self, ptr, cmp, val, sem, scope):
        _check_store(ptr, None, "atomic compare-and-swap")
        return atomic_cas(self, ptr, cmp, val, sem, scope)

    executor._init_args_hst, executor.__call__ = _init_args_hst, __call__
    builder.create_masked_store, builder.create_atomic_rmw, builder.create_atomic_cas = (
        create_masked_store, create_atomic_rmw, create_atomic_cas)
    executor.__kgym_store_bounds__ = True


def _global_allowed(val) -> bool:
    """Whether Triton's compiler lets a kernel read the module-level value ``val`` (code_generator.py's
    global_lookup, Triton 3.6, whose rule is "only constexpr globals", with the exceptions it lists; an interpreted
    kernel or device function stands for the JITCallable it is on a GPU)."""
    from types import ModuleType

    from triton import knobs, language
    from triton._utils import is_namedtuple
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITCallable, KernelInterface

    return any((type(val) is ModuleType, isinstance(val, (JITCallable, InterpretedFunction, KernelInterface)),
                getattr(val, "__triton_builtin__", False), getattr(val, "__triton_aggregate__", False),
                str(getattr(val, "__module__", "") or "").startswith("triton.language"),
                str(getattr(val, "__module__", "") or "").startswith("triton.experimental.gluon.language"),
                isinstance(val, language.dtype), is_namedtuple(val), isinstance(val, language.constexpr),
                bool(knobs.compilation.allow_non_constexpr_globals)))


def _check_globals(fn, src):
    """Raises Triton's own CompilationError (NameError inside, the GPU's words) where the kernel ``fn`` (source
    ``src``, from its ``def``) reads a module-level value that Triton's compiler refuses: a plain number or object
    that is not ``tl.constexpr(...)``.  The names a kernel reads in its body and never assigns are looked up in
    its globals as the compiler does (names absent there are builtins or undefined: left to the run)."""
    import ast

    from triton.compiler.errors import CompilationError
    from triton.compiler.code_generator import CodeGenerator

    tree = ast.parse(src)
    func = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if func is None:
        return
    local = {a.arg for a in func.args.args + func.args.posonlyargs + func.args.kwonlyargs}
    local |= {a.arg for a in (func.args.vararg, func.args.kwarg) if a is not None}
    body = [n for stmt in func.body for n in ast.walk(stmt)]
    local |= {n.id for n in body if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    scope, builtin = getattr(fn, "__globals__", {}), CodeGenerator.builtin_namespace
    for node in body:
        if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)) or node.id in local:
            continue
        if node.id in builtin or node.id not in scope or _global_allowed(scope[node.id]):
            continue
        raise CompilationError(src, node, (
            f"Cannot access global variable {node.id} from within @jit'ed function. Triton kernels can only access "
            f"global variables that are instanstiated as constexpr (`x = triton.language.constexpr(42)`). Note that "
            f"this is different from annotating a variable as constexpr (`x: triton.language.constexpr = 42`), which "
            f"is not supported. (kgym: Triton's compiler refuses this on a GPU; the CPU's interpreter would run it, "
            f"so it is refused here too: write `{node.id} = tl.constexpr(...)` at module level, or pass the value "
            f"as an argument)"))


def _install_global_check():
    """Module-level values a kernel reads, as on a GPU (the honest probe's c25, twenty-second session: a
    ``LOG2E: float = 1.44...`` read in a kernel was `correct` on the CPU and a `compile_error` on an H200, where
    Triton's compiler lets a kernel read only ``tl.constexpr`` globals).  The interpreter compiles every kernel and
    device function again from its source before the first call (FunctionRewriter.rewrite_ast): the check runs
    there, on that source, and raises the compiler's own error."""
    from triton.runtime import interpreter

    rewriter = interpreter.FunctionRewriter
    if getattr(rewriter, "__kgym_globals__", False):
        return
    transform = rewriter._transform_ast

    def _transform_ast(self, src):
        _check_globals(self.fn, src)
        return transform(self, src)

    rewriter._transform_ast = _transform_ast
    rewriter.__kgym_globals__ = True


def _gpu_min_dot_size(lhs_type, rhs_type):
    """tl.dot's least operand shapes as Triton's NVIDIA backend states them (backends/nvidia/compiler.py
    min_dot_size: K >= 16, or 32 for 8-bit operands; M and N are padded), raised as the compiler's own error where
    an operand is smaller: Triton's interpreter states (1, 1, 1), so a kernel whose dot has K < 16 ran on the CPU
    and was a compile_error on an H200 (the honest probe's p3_c39, twenty-third session: a head dimension padded to
    its next power of two, 8 at the tiny run's sizes)."""
    from triton.compiler.errors import CompilationError

    need = (1, 1, 32) if lhs_type.scalar.primitive_bitwidth == 8 else (1, 1, 16)
    dim = lambda t, i: int(getattr(t.shape[i], "value", t.shape[i]))  # noqa: E731
    m, k, n = dim(lhs_type, -2), dim(lhs_type, -1), dim(rhs_type, -1)
    if m >= need[0] and n >= need[1] and k >= need[2]:
        return need
    raise CompilationError(None, None, (
        f"Input shapes should have M >= {need[0]}, N >= {need[1]} and K >= {need[2]} (tl.dot of {m}x{k} by "
        f"{k}x{n}; kgym: Triton's compiler refuses this on a GPU, so it is refused on the CPU too: pad the "
        f"block's K to at least {need[2]} and mask the extra lanes to zero)"))


def _install_dot_size_check():
    """Every interpreter builder (the module's own and those made for tensor descriptors) states the GPU's least
    tl.dot shapes (_gpu_min_dot_size)."""
    from triton.runtime import interpreter

    cls = interpreter.InterpreterBuilder
    if getattr(cls, "__kgym_dot_size__", False):
        return
    init = cls.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.codegen_fns["min_dot_size"] = _gpu_min_dot_size

    cls.__init__ = __init__
    cls.__kgym_dot_size__ = True
    interpreter.interpreter_builder.codegen_fns["min_dot_size"] = _gpu_min_dot_size


def install():
    """Puts the numpy versions into both libdevice modules and the tensor ``tl.range`` into the interpreter (this
    process only); returns how many functions each libdevice module had replaced."""
    import importlib
    import inspect

    _install_range()
    _install_for_range()
    _install_store_bounds()
    _install_global_check()
    _install_dot_size_check()

    done = {}
    for modname in _MODULES:
        try:
            mod = importlib.import_module(modname)
        except ImportError:
            continue
        n = 0
        for name, member in list(vars(mod).items()):
            if name.startswith("_") or not inspect.isfunction(member) or member.__module__ != modname:
                continue
            if name in _FLOAT:
                setattr(mod, name, _float_fn(name, *_FLOAT[name]))
            elif name in _PREDICATES:
                setattr(mod, name, _predicate(name, _PREDICATES[name]))
            else:
                setattr(mod, name, _missing(name))
            n += 1
        done[modname] = n
    return done
