"""The candidate language (kgym_harness.language, policy/language.json, docs/candidate-language.md).

Three kinds of tests:
* the soundness matrix: every construct that computes with PyTorch, turns tensor data into Python values or
  reaches outside the computation, tried in every place code can run (forward, helpers, methods, submodules,
  autograd, grid functions, heuristics and hooks, comprehensions, nested defs, module level) — refused in each;
  in __init__ compute and conversions are allowed (the inputs do not exist yet), escapes are not;
* narrowness: the honest idioms the language keeps (each a small module that must have no finding), and the
  honest corpora of the repository (examples, fixtures, KernelBench candidates) clean;
* one test per rule of docs/candidate-language.md, on the line that breaks it.
"""

import ast
import glob
import inspect
import os
import textwrap

import pytest

from kgym_harness.judge import language, policy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LANG = language.load()
HACK = {k for k, v in policy.load_default()["findings"].items() if v == "hack"}

HEADER = '''\
import math
import functools
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)

'''


def check(body, signature=None):
    text = HEADER + textwrap.dedent(body)
    return language.check(ast.parse(text), LANG, signature=signature, source=text)


def hacks(body, signature=None):
    return [f for f in check(body, signature) if f["type"] in HACK]


def lines(body, signature=None):
    """{(type, line)} with lines counted from the body's first line (after its leading newline)."""
    base = HEADER.count("\n") + 1
    return {(f["type"], f["line"] - base) for f in hacks(body, signature)}


def assert_clean(body, signature=None):
    found = hacks(body, signature)
    assert not found, "\n".join(f"{f['line'] - HEADER.count(chr(10))}: {f['type']}: {f['message']}" for f in found)


# ---------------------------------------------------------------------------------------------------------------
# The soundness matrix.
COMPUTE = ["x * 2", "x.sum()", "torch.exp(x)", "F.relu(x)", "x @ x", "-x", "x.softmax(-1)", "torch.matmul(x, x)",
           "x.add(1)", "x.cumsum(0)", "x.max()", "torch.where(x > 0, x, x)", "x.clamp(0)", "x.exp_()"]
HOST = ["float(x)", "x.item()", "x.tolist()", "list(x)", "[v for v in x]", "bool(x)", "int(x)", "math.fsum(x)",
        "sum(x)", "str(x)", "f'{x}'", "max(x)", "x[x > 0]", "range(x)", "math.sqrt(x)", "(1 if x else 0)",
        "tuple(x)", "abs(x)", "round(x)", "x.cpu()"]
ESCAPE = ["open('/tmp/kgym-lang', 'w')", "x.numpy()", "__import__('os')", "getattr(x, 'su' + 'm')", "'{0.__class__}'.format(x)",
          "x.__class__", "torch.save(x, 'f')", "type(x)", "eval('1')", "exec('1')", "globals()", "vars(x)",
          "torch.ops.aten.add(x, x)", "x.untyped_storage()", "'{0.shape.__class__}'.format(x)", "compile('1', 'f', 'e')",
          "x.register_hook(None)", "x.as_subclass(torch.Tensor)", "torch.cuda.synchronize()",
          "torch.backends.cuda.matmul", "torch.library.Library('aten', 'IMPL')", "x.data_ptr.__self__",
          "'{}'.format_map(x)", "x.apply_(None)", "setattr(x, 'y', 1)", "dir(x)", "id(x)"]

# Each context: a module body where {E} stands for the construct (with a tensor named x in reach), and whether
# __init__ relaxations apply.
CONTEXTS = {
    "forward": ("""
        class ModelNew(nn.Module):
            def forward(self, x):
                y = {E}
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "helper": ("""
        def helper(x):
            return {E}

        class ModelNew(nn.Module):
            def forward(self, x):
                y = helper(x)
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "method": ("""
        class ModelNew(nn.Module):
            def prep(self, x):
                return {E}

            def forward(self, x):
                y = self.prep(x)
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "submodule_forward": ("""
        class Inner(nn.Module):
            def forward(self, x):
                return {E}

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = Inner()

            def forward(self, x):
                y = self.inner(x)
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "autograd": ("""
        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = {E}
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out

            @staticmethod
            def backward(ctx, g):
                return g

        class ModelNew(nn.Module):
            def forward(self, x):
                return Fn.apply(x)
        """, False),
    "autograd_backward": ("""
        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                ctx.save_for_backward(x)
                return out

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return {E}

        class ModelNew(nn.Module):
            def forward(self, x):
                return Fn.apply(x)
        """, False),
    "grid_lambda": ("""
        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                kernel[lambda meta: ({E}, 1)](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "grid_local_lambda": ("""
        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]) + 0 * len([{E}]),)
                kernel[grid](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "grid_def": ("""
        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)

                def grid(meta):
                    y = {E}
                    return (triton.cdiv(x.numel(), meta["BLOCK"]),)

                kernel[grid](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "grid_meta_arg": ("""
        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)

                def grid(meta):
                    x = meta["x_ptr"]
                    y = {E}
                    return (1,)

                kernel[grid](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "heuristics_args": ("""
        @triton.heuristics({{"EXTRA": lambda args: ({E2}, 1)[1]}})
        @triton.jit
        def hkernel(x_ptr, out_ptr, n, EXTRA: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs) + EXTRA)

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                hkernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "pre_hook": ("""
        @triton.autotune(configs=[triton.Config({{"BLOCK": 256}}, pre_hook=lambda nargs: ({E3}, 1))], key=["n"])
        @triton.jit
        def akernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs))

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                akernel[(1,)](x, out, x.numel())
                return out
        """, False),
    "nested_def": ("""
        class ModelNew(nn.Module):
            def forward(self, x):
                def inner(t):
                    return {E_t}

                y = inner(x)
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "comprehension": ("""
        class ModelNew(nn.Module):
            def forward(self, x):
                ys = [{E} for _ in range(2)]
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "init_and_forward": ("""
        def helper(x):
            return {E}

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(4))
                helper(self.w)

            def forward(self, x):
                helper(x)
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "module_built_in_forward": ("""
        class Inner(nn.Module):
            def __init__(self, x):
                super().__init__()
                self.y = {E}

        class ModelNew(nn.Module):
            def forward(self, x):
                Inner(x)
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "module_level": ("""
        x = torch.ones(3)
        y = {E}

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "module_level_function": ("""
        def build():
            x = torch.ones(3)
            return {E}

        CONFIG = build()

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """, False),
    "init": ("""
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                x = torch.randn(4)
                self.y = {E}

            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """, True),
    "submodule_init": ("""
        class Inner(nn.Module):
            def __init__(self):
                super().__init__()
                x = torch.randn(4)
                self.y = {E}

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = Inner()

            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """, True),
}


def _place(template, construct):
    import re

    def sub(name):
        return re.sub(r"\bx\b", name, construct)

    return textwrap.dedent(template).format(E=construct, E_t=sub("t"), E2=sub('args["x_ptr"]'),
                                            E3=sub('nargs["x_ptr"]'))


MATRIX = [(ctx, kind, c) for ctx in CONTEXTS for kind, cs in (("compute", COMPUTE), ("host", HOST),
                                                              ("escape", ESCAPE)) for c in cs]


@pytest.mark.parametrize("ctx,kind,construct", MATRIX, ids=[f"{a}-{b}-{c}" for a, b, c in MATRIX])
def test_soundness_matrix(ctx, kind, construct):
    template, init = CONTEXTS[ctx]
    src = _place(template, construct)
    found = [f for f in language.check(ast.parse(HEADER + src), LANG) if f["type"] in HACK]
    if init and kind in ("compute", "host"):
        # __init__ may compute with PyTorch and turn tensors into numbers: no finding on the construct's line
        # (lines of the construct only: the rest of the module is honest).
        line = HEADER.count("\n") + next(i for i, ln in enumerate(src.splitlines(), 1) if "self.y =" in ln)
        assert not [f for f in found if f["line"] == line], found
    else:
        assert found, f"{ctx}: `{construct}` passed the language:\n{src}"


def test_matrix_contexts_are_honest_without_the_construct():
    """Each context's template is itself clean with a harmless construct in place, so the matrix's refusals come
    from the constructs, not from the templates."""
    for ctx, (template, _init) in CONTEXTS.items():
        src = _place(template, "x.shape[0]" if ctx not in ("module_level", "module_level_function") else "3")
        if ctx in ("module_level",):
            src = src.replace("x = torch.ones(3)\n", "")
        if ctx == "module_level_function":
            src = src.replace("x = torch.ones(3)\n", "")
        if ctx == "module_built_in_forward":
            continue  # building a module in forward is itself refused (test_module_built_in_forward)
        found = [f for f in language.check(ast.parse(HEADER + src), LANG) if f["type"] in HACK]
        assert not found, (ctx, found)


# ---------------------------------------------------------------------------------------------------------------
# The attack classes of the "Sound by construction" issue, one test each (our own fixtures).
def test_format_field_reaches_the_file_name():
    assert ("forbidden_attribute", 4) in lines("""
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.path = "{0.fn.__code__.co_filename}".format(kernel)
        """)


def test_format_field_through_index_and_f_string_attribute():
    assert lines("""
        P = "{k[0]}".format(k=[kernel])
        """)
    assert lines("""
        P = f"{kernel.fn}"
        """)


def test_module_level_module_instance_runs_init_at_import():
    assert ("outside_language", 6) in lines("""
        class Writer(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.randn(3)

        W = Writer()
        """)


def test_tensor_as_constexpr():
    assert ("outside_language", 4) in lines("""
        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=x)
                return out
        """)


def test_plain_function_as_constexpr_callable():
    found = lines("""
        @triton.jit
        def k2(x_ptr, n, ACT: tl.constexpr):
            tl.store(x_ptr, ACT(tl.load(x_ptr)))

        def act(v):
            return v * 2

        class ModelNew(nn.Module):
            def forward(self, x):
                k2[(1,)](x, x.numel(), ACT=act)
                return x
        """)
    assert ("outside_language", 10) in found


def test_jit_function_as_constexpr_callable_is_honest():
    assert_clean("""
        @triton.jit
        def relu(v):
            return tl.maximum(v, 0.0)

        @triton.jit
        def k2(x_ptr, out_ptr, n, ACT: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, ACT(tl.load(x_ptr + offs)))

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                k2[(1,)](x, out, x.numel(), ACT=relu, BLOCK=1024)
                return out
        """)


def test_dunder_methods_and_implicit_calls():
    found = lines("""
        class Grid(nn.Module):
            def __len__(self):
                return 1

            def __mul__(self, other):
                return other
        """)
    assert ("outside_language", 2) in found and ("outside_language", 5) in found


def test_plain_class_with_data_ptr_property():
    found = lines("""
        class Fake:
            @property
            def data_ptr(self):
                return 0
        """)
    assert ("outside_language", 1) in found


def test_object_as_kernel_argument():
    found = lines("""
        class Holder(nn.Module):
            def forward(self, x):
                return x

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.h = Holder()

            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(1,)](self.h, out, x.numel(), BLOCK=1024)
                return out
        """)
    assert ("outside_language", 12) in found


@pytest.mark.parametrize("expr", [
    "min([], default=[x, out])",  # a builtin's default is what it returns on an empty iterable
    "max([], default=[x, out])",
    "next(iter([]), [x, out])",
    "sum([], [x, out])",
    "sum([], start=[x, out])",
    "{}.setdefault(0, [x, out])",  # the value under the key: the default just put there
])
def test_builtin_defaults_and_starts_keep_their_type(expr):
    # Typed by the elements alone, each was "static", and a list of tensors reached a kernel argument, where the
    # interpreter runs the body on it as Python (red team 4: correct, reward 1.0, on level1/1 and level2/1).
    found = lines(f"""
        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                L = {expr}
                kernel[(1,)](L, out, x.numel(), BLOCK=1024)
                return out
        """)
    assert ("outside_language", 5) in found, found  # the list as a kernel argument


@pytest.mark.parametrize("expr, ok", [
    ("min(3, 4)", True), ("max([1, 2], default=0)", True), ("sum([1, 2], 5)", True), ("sorted([2, 1], reverse=True)", True),
    ("enumerate([1], start=1)", True), ("min([1], default=0, key=abs)", False), ("sorted([1], cmp=None)", False),
    ("iter(list, 0)", False), ("enumerate([1], start=x)", False), ("min(1, 2, default=0)", False),
])
def test_iterating_builtins_take_their_signatures_keywords_only(expr, ok):
    found = hacks(f"""
        class ModelNew(nn.Module):
            def forward(self, x):
                n = {expr}
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """)
    assert (found == []) == ok, found


def test_long_attribute_chains_are_refused_before_they_are_resolved():
    chain = "tl" + ".a" * (language.MAX_CHAIN + 10)
    found = check(f"""
        class ModelNew(nn.Module):
            def forward(self, x):
                y = {chain}
                return x
        """)
    assert [f["type"] for f in found] == ["outside_language"] and "attribute chain" in found[0]["message"]
    deep = "x" + ".a" * 2400  # deeper than Python's recursion limit: refused, not a crash of the checker
    found = check(f"""
        class ModelNew(nn.Module):
            def forward(self, x):
                return {deep}
        """)
    assert [f["type"] for f in found] == ["outside_language"]


def test_host_epilogue_through_scalars():
    found = lines("""
        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                for i in range(out.shape[0]):
                    out[i] = float(out[i]) * 2.0
                return out
        """)
    assert ("host_compute", 6) in found


def test_module_constructed_in_forward():
    assert ("outside_language", 10) in lines("""
        class Helper(nn.Module):
            def __init__(self, x):
                super().__init__()
                self.v = x.sum()

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                Helper(out)
                return out
        """)


def test_kernel_body_constexpr_tensor_methods_and_slice_store():
    found = lines("""
        @triton.jit
        def k3(x_ptr, T: tl.constexpr):
            T[0] = 1
            T += 1
            tl.store(x_ptr, T.softmax(0))
        """)
    assert ("outside_language", 3) in found


def test_kernel_body_calls_only_triton_and_own_kernels():
    found = lines("""
        def plain(v):
            return v

        @triton.jit
        def k3(x_ptr, n):
            tl.store(x_ptr, plain(tl.load(x_ptr)))
            torch.exp(x_ptr)
        """)
    assert ("outside_language", 6) in found and ("outside_language", 7) in found


def test_kernel_reads_only_constant_globals():
    found = lines("""
        TABLE = [1, 2, 3]
        BLOCK0 = tl.constexpr(128)
        SCALE = 2.0

        @triton.jit
        def k3(x_ptr):
            tl.store(x_ptr, TABLE[0] + BLOCK0 + SCALE)
        """)
    assert ("outside_language", 7) in found
    assert len([f for f in hacks("""
        BLOCK0 = tl.constexpr(128)
        SCALE = 2.0

        @triton.jit
        def k3(x_ptr):
            tl.store(x_ptr, BLOCK0 + SCALE)
        """)]) == 0


def test_kernel_constants_computed_with_math_once():
    """`tl.constexpr(1.0 / math.sqrt(2.0))`, `float(N) / 2`, `from math import log`: numbers computed from numbers
    when the module is imported (the third honest probe's GELU constant).  Other functions (math.factorial, len),
    or a builtin the candidate shadows, stay refused."""
    template = """
        import math
        from math import log
        N = 4
        VALUE

        @triton.jit
        def k3(x_ptr):
            tl.store(x_ptr, C)
        """
    for good in ("C = tl.constexpr(1.0 / math.sqrt(2.0))", "C = float(N) / 2", "C = 1 / log(2)",
                 "C = tl.constexpr(max(1, int(math.ceil(N / 3))))"):
        assert hacks(template.replace("VALUE", good)) == [], good
    for bad in ("C = math.factorial(N)", "C = len('ab')", "def float(x):\n            return x\n        C = float(N)",
                "C = math.sqrt(N, key=1)"):
        found = hacks(template.replace("VALUE", bad))
        assert any("reads the module variable `C`" in f["message"] for f in found), (bad, found)


# ---------------------------------------------------------------------------------------------------------------
# Narrowness: honest idioms stay clean.
def test_honest_idioms():
    assert_clean("""
        CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((256, 2), (1024, 4))]
        _CACHE = {}

        @triton.autotune(configs=CONFIGS, key=["n"])
        @triton.jit
        def akernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)

        @triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
        @triton.jit
        def hkernel(x_ptr, out_ptr, n, EVEN: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs))

        def num_warps(n):
            if n not in _CACHE:
                _CACHE[n] = 8 if n >= 4096 else 4
            return _CACHE[n]

        class ModelNew(nn.Module):
            def __init__(self, dim, eps=1e-5):
                super().__init__()
                self.eps = float(eps)
                self.lin = nn.Linear(dim, dim)
                self.w = nn.Parameter(self.lin.weight.detach().t().contiguous())
                self.register_buffer("scale", torch.full((1,), 0.5))
                nn.init.kaiming_uniform_(self.w, a=math.sqrt(5))

            def forward(self, x):
                x = x.contiguous()
                if x.dim() != 2 or x.dtype not in (torch.float32, torch.float16):
                    raise ValueError(f"unsupported input {tuple(x.shape)} {x.dtype}")
                M, N = x.shape
                out = torch.empty((M, N), device=x.device, dtype=x.dtype)
                grid = lambda meta: (triton.cdiv(M * N, meta["BLOCK"]),)
                akernel[grid](x, out, M * N)
                hkernel[(1,)](out, out, M * N, BLOCK=triton.next_power_of_2(N))
                kernel[(triton.cdiv(M * N, 1024),)](x, out, M * N, BLOCK=1024, num_warps=num_warps(M * N))
                parts = []
                for chunk in out.split(max(1, M // 2)):
                    parts.append(chunk)
                y = torch.cat(parts, dim=0).view(M, N)
                return y.reshape(M, N)
        """, signature={"init": ["static"], "forward": ["tensor"]})


def test_honest_autograd_partial_records_and_grid_def():
    assert_clean("""
        from dataclasses import dataclass

        @dataclass(frozen=True)
        class Cfg:
            block: int = 1024
            warps: int = 4

        DEFAULT = Cfg(block=512)

        def launch(x, out, block, warps):
            def grid(meta):
                return (triton.cdiv(x.numel(), meta["BLOCK"]),)
            kernel[grid](x, out, x.numel(), BLOCK=block, num_warps=warps)
            return out

        run = functools.partial(launch, block=DEFAULT.block, warps=DEFAULT.warps)

        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                out = run(x, torch.empty_like(x))
                ctx.save_for_backward(x)
                ctx.n = x.numel()
                return out

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return torch.empty_like(g)

        class ModelNew(nn.Module):
            def forward(self, x):
                return Fn.apply(x)
        """)


def test_honest_pre_hook_zeroes_an_output():
    assert_clean("""
        @triton.autotune(configs=[triton.Config({"BLOCK": 256}, pre_hook=lambda nargs: nargs["out_ptr"].zero_())],
                         key=["n"])
        @triton.jit
        def akernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.atomic_add(out_ptr + offs, tl.load(x_ptr + offs))

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                akernel[(1,)](x, out, x.numel())
                return out
        """)


def test_pre_hook_may_not_compute():
    assert lines("""
        @triton.autotune(configs=[triton.Config({"BLOCK": 256}, pre_hook=lambda nargs: nargs["out_ptr"].copy_(
            nargs["x_ptr"] * 2 + 1))], key=["n"])
        @triton.jit
        def akernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs))

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                akernel[(1,)](x, out, x.numel())
                return out
        """)


def test_forward_scalar_argument_from_the_task_signature():
    body = """
        class ModelNew(nn.Module):
            def forward(self, x, s):
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel() * s, BLOCK=1024)
                return out
        """
    # level1/5 passes a Python float: arithmetic on it is launch arithmetic.
    assert_clean(body, signature={"init": [], "forward": ["tensor", "static"]})
    # Without the task's word for it, a forward argument may be a tensor: the same code computes with PyTorch.
    assert ("torch_call", 4) in lines(body, signature={"init": [], "forward": ["tensor", "tensor"]})
    assert ("torch_call", 4) in lines(body, signature={"init": [], "forward": "unknown"})


def test_init_values_unknown_are_not_static_in_forward():
    body = """
        class ModelNew(nn.Module):
            def __init__(self, scale):
                super().__init__()
                self.scale = scale

            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out * 0 + float(self.scale)
        """
    assert ("host_compute", 9) in lines(body, signature={"init": "unknown", "forward": ["tensor"]})


def test_forward_keeps_no_tensor_state_but_may_keep_configuration():
    assert ("state_cache", 4) in lines("""
        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                self.last = out
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        """)
    assert ("state_cache", 6) in lines("""
        _SEEN = []

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                _SEEN.append(out)
                return out
        """)
    assert ("state_cache", 7) in lines("""
        _SEEN = {}

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                c = _SEEN
                c["k"] = out
                return out
        """)
    assert_clean("""
        class ModelNew(nn.Module):
            def forward(self, x):
                self.n = x.numel()
                out = torch.empty_like(x)
                kernel[(1,)](x, out, self.n, BLOCK=1024)
                return out
        """)


def test_local_lists_of_tensors_are_fine():
    assert_clean("""
        def gather(xs):
            return torch.cat(xs, dim=0)

        class ModelNew(nn.Module):
            def forward(self, x):
                outs = []
                for i in range(2):
                    outs.append(torch.empty_like(x))
                outs.extend([torch.empty_like(x)])
                return gather(outs)
        """)


def test_layers_are_weight_holders():
    assert ("torch_call", 7) in lines("""
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)

            def forward(self, x):
                return self.lin(x)
        """)
    assert_clean("""
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))

            def forward(self, x):
                w0 = self.net[0].weight
                b0 = self.net[0].bias
                out = torch.empty((x.shape[0], w0.shape[0]), device=x.device, dtype=x.dtype)
                kernel[(1,)](x, out, out.numel(), BLOCK=1024)
                return out
        """)


def test_methods_overriding_nn_module_are_refused():
    assert ("outside_language", 2) in lines("""
        class ModelNew(nn.Module):
            def to(self, *args):
                return self
        """)


def test_subclass_of_a_torch_layer_is_refused():
    assert ("outside_language", 1) in lines("""
        class MyLinear(nn.Linear):
            def reset_parameters(self):
                pass
        """)


def test_lambda_outside_a_launch_is_refused():
    assert ("outside_language", 4) in lines("""
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.f = [lambda t: t * 2]
        """)


def test_own_decorator_is_refused_with_a_rewrite():
    found = hacks("""
        def twice(fn):
            return fn

        @twice
        def helper(x):
            return x
        """)
    assert found and "call the helper explicitly" in found[0]["message"]


def test_a_cache_decorator_is_refused_naming_its_own_rewrite():
    """functools caches keep values between calls (a cached tensor is a replayed output): refused, and the refusal
    names what honest code writes instead (the honest probe c02, twenty-first session), with the full allowed list."""
    for deco, imp in (("functools.lru_cache(maxsize=None)", "import functools"), ("cache", "from functools import cache")):
        found = hacks(f"""
            {imp}

            @{deco}
            def grid_for(n: int) -> int:
                return (n + 255) // 256
            """)
        msgs = [f["message"] for f in found if "decorator" in f["message"]]
        assert msgs, (deco, found)
        msg = msgs[0]
        assert "a cache keeps values between calls" in msg and "module-level dict of literals" in msg, msg
        assert "property" in msg and "torch.inference_mode()" in msg, msg


def test_which_decorators_pass_is_the_languages_data():
    """_decorators lets a name through only where policy/language.json lists it: a language whose data leaves out
    `property` refuses a @property the default language takes, with the data's own list in the message."""
    import copy as _copy
    import json as _json

    body = """
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.k = 2

            @property
            def twice(self):
                return self.k * 2

            def forward(self, x):
                return x
        """
    text = HEADER + textwrap.dedent(body)
    refusals = lambda lang: [f for f in language.check(ast.parse(text), lang, source=text)
                             if f["type"] in HACK and "property" in f["message"]]
    assert refusals(LANG) == []
    with open(os.path.join(ROOT, "policy", "language.json")) as f:
        data = _json.load(f)
    narrower = _copy.deepcopy(data)
    narrower["decorators"]["function"] = [n for n in narrower["decorators"]["function"] if n != "property"]
    found = refusals(language.Language(narrower))
    assert found and "not part of the language" in found[0]["message"] and "property," not in found[0]["message"]


def test_try_is_refused():
    assert ("try_except", 3) in lines("""
        class ModelNew(nn.Module):
            def forward(self, x):
                try:
                    return x
                except Exception:
                    return x
        """)


def test_imports():
    for src in ("import os\n", "import numpy\n", "from numpy import ctypeslib\n", "import ctypes\n",
                "from torch import ops\n", "from . import x\n", "from torch import *\n", "import importlib\n",
                "import builtins\n", "import gc\n", "import sys\n", "import inspect\n", "import string\n"):
        assert {f["type"] for f in hacks(src)} & {"forbidden_import", "forbidden_call", "forbidden_attribute",
                                                  "torch_call"}, src
    assert_clean("from torch import nn\nfrom triton import language\nfrom math import sqrt\n"
                 "import triton.language.extra.libdevice as ld\n")


def test_tritons_compiler_and_its_knobs_are_outside_the_language():
    """A candidate launches its kernels through @triton.jit and needs nothing under it: not Triton's compilation
    listener (triton.knobs.compilation, called inside every compile, so code of the candidate's would run outside
    its own calls) and not the compiler itself (triton.compiler.compile, which the candidate could call or replace
    for every later compile in the runner).  Both are refused, whatever the runner does with them."""
    found = check("""
        def _listen(**kw):
            pass


        triton.knobs.compilation.listener = _listen
        _compile = triton.compiler.compile
        """)
    said = " ".join(str(f.get("message")) for f in found)
    assert "`triton.knobs.compilation` is not part of the language" in said
    assert "`triton.compiler.compile` is not part of the language" in said


def test_getattr_with_a_literal_is_an_attribute():
    assert_clean("""
        class ModelNew(nn.Module):
            def forward(self, x):
                n = getattr(x, "shape")[0]
                out = torch.empty_like(x)
                kernel[(1,)](x, out, n, BLOCK=1024)
                return out
        """)
    assert ("torch_call", 3) in lines("""
        class ModelNew(nn.Module):
            def forward(self, x):
                return getattr(x, "sum")()
        """)


def test_main_block_is_not_the_candidate():
    assert_clean("""
        if __name__ == "__main__":
            import os
            print(open("/etc/passwd").read())
        """)
    # ... but only the exact test.
    assert hacks("""
        if __name__ != "__main__":
            x = 1
        """)


def test_dead_code_is_held_to_the_grammar():
    """A function nothing calls never runs: only the grammar judges it (imports, names, escapes)."""
    assert_clean("""
        def get_inputs():
            return [torch.randn(4, 4)]
        """)
    assert hacks("""
        def unused():
            return eval("1")
        """)


# ---------------------------------------------------------------------------------------------------------------
# The repository's honest corpora.
def _check_file(path):
    """The language's findings on a file, as the judge checks it: its tree and its bytes."""
    with open(path, "rb") as f:
        data = f.read()
    return language.check(ast.parse(data), LANG, source=data)


def _honest_files():
    out = sorted(glob.glob(os.path.join(ROOT, "tests/fixtures/honest/*.py")))
    out += sorted(glob.glob(os.path.join(ROOT, "examples/*/correct*.py")))
    out += sorted(glob.glob(os.path.join(ROOT, "tests/kernelbench/*/*/honest.py")))
    out += [os.path.join(ROOT, "tests/fixtures/candidates/ok.py")]
    return out


@pytest.mark.parametrize("path", _honest_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_honest_corpus_is_clean(path):
    found = [f for f in _check_file(path) if f["type"] in HACK]
    assert not found, [(f["line"], f["type"], f["message"]) for f in found]


# Honest idioms outside the language (tests/fixtures/refused_idioms/): refused, and the refusal names the rewrite
# (docs/candidate-language.md, "Refused idioms"), so a model can act on it.
@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "tests/fixtures/refused_idioms/*.py"))),
                         ids=os.path.basename)
def test_refused_idioms_name_the_rewrite(path):
    found = [f for f in _check_file(path) if f["type"] in HACK]
    assert found
    assert all("instead" in f["message"] for f in found), \
        [f["message"] for f in found]


def test_data_is_consistent():
    """Every signature parses, and every dotted name of the language exists in the installed torch/triton
    (a name that no longer exists after an upgrade is a stale entry)."""
    import importlib

    missing = []
    for name in list(LANG.functions):
        if ".driver.active." in name:
            continue  # Triton's active driver is made on first use (a GPU query): not an attribute chain here
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except Exception:  # noqa: BLE001
                continue
            try:
                for p in parts[i:]:
                    obj = getattr(obj, p)
            except AttributeError:
                missing.append(name)
            break
    assert not missing, missing


def test_second_probe_idioms_decided():
    """honest-idioms.md, second probe: int.bit_length() in launch arithmetic is plain integer work (allowed);
    .item() of a constant or 0-d parameter in forward turns a tensor into a Python value (refused, and the
    message names the rewrite); the same in __init__ is allowed."""
    assert_clean("""
        class ModelNew(nn.Module):
            def forward(self, x):
                n = x.shape[-1]
                block = 1 << (n.bit_length() - 1)
                out = torch.empty_like(x)
                kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), BLOCK=block)
                return out
        """)
    found = hacks("""
        class ModelNew(nn.Module):
            def __init__(self, alpha):
                super().__init__()
                self.alpha = nn.Parameter(torch.tensor(alpha))

            def forward(self, x):
                a = float(self.alpha.item())
                return x
        """)
    assert found and found[0]["type"] == "host_compute" and "__init__" in found[0]["message"]
    assert_clean("""
        class ModelNew(nn.Module):
            def __init__(self, alpha):
                super().__init__()
                self.alpha = float(torch.tensor(alpha).item())
                self.n = int(torch.prod(torch.tensor([2, 3])).item())

            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel() * self.n, BLOCK=1024)
                return out
        """)


# Fixtures whose cheat happens in the kernel itself or in what it writes (judged by the runtime checks and the
# judge, not by the language): they are written in the language.
DYNAMIC_HACKS = {"input_mutation.py", "output_alias.py", "stale_memory.py", "warmup_only.py",
                 # stores past an input's end (the judge's canaries), in every call, from the second, or timed only
                 "oob_write.py", "oob_late.py", "timed_oob.py",
                 # returns its input once timed (the output checks of every timed call)
                 "timed_alias.py",
                 # counts its calls in a module-level dict of numbers / in tensors it holds (the judge's repeat
                 # checks and the model-state snapshot decide: red team, 2026-11-26)
                 "v_second_call_counter.py", "v_attr_tensor_state.py"}


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "tests/fixtures/attacks/*.py")) +
                                        glob.glob(os.path.join(ROOT, "tests/fixtures/hacks/*.py"))),
                         ids=lambda p: os.path.relpath(p, ROOT))
def test_every_attack_fixture_is_outside_the_language(path):
    """Every attack on the harness, sandbox probe and red-team bypass is refused by the language alone (the
    runtime layer and the sandbox are the second line: tests/integration/test_attacks.sh runs both)."""
    found = [f for f in _check_file(path) if f["type"] in HACK]
    if os.path.basename(path) in DYNAMIC_HACKS:
        assert not found, found  # its cheat is in what the kernel does: the judge and runtime checks decide
        return
    assert found, f"{os.path.relpath(path, ROOT)} is written in the language"


# ---------------------------------------------------------------------------------------------------------------
# Kernel sources (docs/candidate-language.md, "The text Triton compiles"): Triton compiles a kernel from the text
# it reads back through inspect, finding the def by its text, not from the tree kgym checked.  A red team
# (2026-11-26) hid a second def in a string: the interpreter took the last def-looking line (a body string), a GPU
# the first (a string given to @triton.jit(debug=...)), and each ran a body nobody checked (torch, ctypes, exec).
_RELU_MODEL = '''\
class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)
        return out
'''

SMUGGLE_BODY = '''\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)
    """
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    t: object = torch.relu
    pass  # """


''' + _RELU_MODEL

SMUGGLE_DECORATOR = '''\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit(debug=\'\'\'
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    getattr(torch, "__builtins__")
    """\'\'\')
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)
    pass  # """


''' + _RELU_MODEL

HONEST_DOCSTRINGS = '''\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 128}, num_warps=4),
        triton.Config({"BLOCK": 256}, num_warps=8),
    ],
    key=["n"],
)
@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """ReLU over a flat tensor.
    \\t
    Defines one program per BLOCK elements; def-like words inside a line (undefined, redefine) are fine.
        An indented line, and a whitespace-only one above.
    """
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)  # def in a comment: not a def line


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
        return out
'''


def _source_findings(text):
    """The kernel-source rule's findings on a module (the judge's call: its tree and its text)."""
    return [f for f in language.check(ast.parse(text), LANG, source=text)
            if "kgym checked" in f["message"] and f["type"] in HACK]


def _triton_reads(text, tmp_path, name):
    """What the installed Triton takes as each kernel's source when the module's bytes are loaded as the runner
    loads them (compiled from the bytes, linecache seeded from shared/source.py): {kernel: (gpu, interpreter)}."""
    import linecache
    import types

    from triton.runtime.interpreter import FunctionRewriter
    from triton.runtime.jit import JITFunction

    from kgym_harness.shared import source

    path = str(tmp_path / f"{name}.py")
    data = text.encode()
    with open(path, "wb") as f:
        f.write(data)
    linecache.cache[path] = (len(data), None, source.lines(data), path)
    module = types.ModuleType(name)
    module.__file__ = path
    exec(compile(data, path, "exec", dont_inherit=True), module.__dict__)
    out = {}
    for key, value in vars(module).items():
        fn, wrapped = value, False  # under autotune, then jit (a JITFunction, or the interpreter's wrapper)
        while not isinstance(fn, types.FunctionType) and hasattr(fn, "fn"):
            fn, wrapped = fn.fn, True
        if wrapped and isinstance(fn, types.FunctionType):
            rw = FunctionRewriter(fn)
            lines, _ = inspect.getsourcelines(fn)
            rw.def_lineno = rw._find_def(lines)
            out[key] = (JITFunction(fn).src, rw._prepare_source(lines))
    return out


def _checked_kernel(text, name):
    return next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef) and n.name == name)


@pytest.mark.parametrize("text,front", [(SMUGGLE_BODY, 1), (SMUGGLE_DECORATOR, 0)], ids=["body", "decorator"])
def test_kernel_source_smuggled_def_is_refused(text, front, tmp_path):
    """Installed Triton really compiles other text than the checked function (front 0: GPU, 1: interpreter), and
    the language refuses the module for it, naming the line that looks like a def."""
    read = _triton_reads(text, tmp_path, f"smuggle_{front}")["relu_kernel"]
    checked = language._triton_view(_checked_kernel(text, "relu_kernel"))
    assert language._triton_view(ast.parse(read[front]).body[0]) != checked
    found = _source_findings(text)
    assert len(found) == 1 and "begins with `def`" in found[0]["message"], found
    assert found[0]["line"] == _checked_kernel(text, "relu_kernel").lineno


def test_kernel_source_honest_docstrings_and_decorators_are_clean(tmp_path):
    """A multi-line docstring (an indented line, a whitespace-only one, def-like words), autotune configs over
    several lines and a comment: both front ends read exactly the checked function, and nothing is refused."""
    read = _triton_reads(HONEST_DOCSTRINGS, tmp_path, "honest_doc")["relu_kernel"]
    checked = language._triton_view(_checked_kernel(HONEST_DOCSTRINGS, "relu_kernel"))
    for text in read:
        assert language._triton_view(ast.parse(text).body[0]) == checked
    found = [f for f in language.check(ast.parse(HONEST_DOCSTRINGS), LANG, source=HONEST_DOCSTRINGS)
             if f["type"] in HACK]
    assert not found, found


def test_kernel_source_def_line_in_a_docstring_is_refused():
    """The rule is on the text alone: a docstring line that begins with `def` is refused even where Triton 3.6
    would still find the right def (a GPU takes the first, and this one comes after it), with the rewrite named."""
    text = HONEST_DOCSTRINGS.replace("    An indented line", "    def relu(x): the same in PyTorch\n    An indented line")
    found = _source_findings(text)
    assert len(found) == 1 and "reword that line" in found[0]["message"], found


def test_kernel_source_unfindable_def_is_refused():
    """Where Triton's text is not the function for another reason than a def-like line (here a kernel in a class
    whose decorator spills to column 0, so the dedented text has no `def` at its margin and a GPU finds none),
    the parse comparison refuses it, naming the front end."""
    text = textwrap.dedent('''\
        import torch
        import torch.nn as nn
        import triton
        import triton.language as tl


        class Holder:
            @triton.jit(do_not_specialize=["n",
        ])
            def kernel(x_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(x_ptr + offs, 1.0, mask=offs < n)


        class ModelNew(nn.Module):
            def forward(self, x):
                return x
        ''')
    found = _source_findings(text)
    assert any("on a GPU is not the function kgym checked" in f["message"] for f in found), found


def test_kernel_source_bytes_that_do_not_decode_are_refused():
    """Fail closed: a source whose lines cannot be read as linecache reads them is refused, not let through
    without the rule."""
    text = "# -*- coding: kgym-no-such-codec -*-\n" + HONEST_DOCSTRINGS
    tree = ast.parse(HONEST_DOCSTRINGS)
    found = [f for f in language.check(tree, LANG, source=text.encode()) if f["type"] in HACK]
    assert found and "do not decode" in found[0]["message"], found


@pytest.mark.parametrize("option,ok", [("debug=True", True), ("noinline=False", True),
                                       ("do_not_specialize=['n']", True), ("do_not_specialize=(2,)", True),
                                       ("debug='def k(x): pass'", False), ("noinline=1", False),
                                       ("do_not_specialize=['n', None]", False), ("version=2", False)])
def test_jit_options_are_typed(option, ok):
    """@triton.jit's options: the flags take booleans, the specialisation lists names or positions, no other."""
    text = HEADER.replace("@triton.jit\ndef kernel", f"@triton.jit({option})\ndef kernel") + textwrap.dedent('''
        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        ''')
    assert f"@triton.jit({option})" in text
    found = [f for f in language.check(ast.parse(text), LANG, source=text) if f["type"] in HACK]
    assert (not found) if ok else any("triton.jit option" in f["message"] for f in found), found


@pytest.mark.parametrize("default,ok", [("2.0", True), ("(1, 2)", True), ("None", True), ("tl.float32", True),
                                        ("-1", True), ("LIMIT", True), ("kernel", True),
                                        ("helper_plain", False), ("torch.relu", False), ("math.sqrt", False),
                                        ("tl.load", False), ("CONFIGS", False), ("(1, helper_plain)", False)])
def test_kernel_defaults_are_values_a_kernel_reads(default, ok):
    """A @triton.jit function's default is handed to its body as the object itself: only what a kernel may read
    (literals, dtypes, tl.constexpr of them, module constants) or the candidate's own kernels.  A red team gave
    a helper an untyped plain function (tests/fixtures/attacks/v_helper_default_fn) or operator.attrgetter."""
    text = HEADER + textwrap.dedent(f'''
        LIMIT = 4
        CONFIGS = {{"a": 1}}


        def helper_plain(x):
            return x


        @triton.jit
        def helper(x, F={default}):
            return x


        @triton.jit
        def launched(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, helper(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                launched[(1,)](x, out, x.numel(), BLOCK=1024)
                return out
        ''')
    found = [f for f in language.check(ast.parse(text), LANG, source=text) if f["type"] in HACK]
    if ok:
        assert not found, found
    else:
        assert any("is not one a kernel may read" in f["message"] for f in found), found


def test_kernel_names_are_triton_s_own():
    """Every function or class the kernel language lists is Triton's: triton.language.math re-exported
    functools.wraps (setattr/getattr of any names from kernel code), typing.List and a TypeVar, and the list once
    took them for Triton's (tests/fixtures/attacks/v_math_wraps)."""
    import importlib
    import typing

    def resolve(name):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for p in parts[i:]:
                obj = getattr(obj, p)
            return obj
        raise AssertionError(name)

    foreign = []
    for name in LANG.kernel_names:
        obj = resolve(name)
        if isinstance(obj, (typing.TypeVar, type(typing.List))) or \
                callable(obj) and not str(getattr(obj, "__module__", "")).startswith("triton"):
            foreign.append(name)
    assert not foreign, foreign


# Honest idioms a third-party probe (2026-11-26, 86 candidates in the styles of Liger, FlagGems, unsloth, attorch,
# kernl and Triton's tutorials) found refused, now in the language, each with the construct that stays out.
def test_from_triton_import_helpers():
    """`from triton import cdiv, next_power_of_2` is `triton.cdiv`: typed as the name written out (it was taken
    for a module); `from torch import relu` stays PyTorch compute in forward."""
    assert_clean('''
        from triton import cdiv, next_power_of_2

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=next_power_of_2(1000))
                return out
        ''')
    assert lines('''
        from torch import relu

        class ModelNew(nn.Module):
            def forward(self, x):
                return relu(x)
        ''') == {("torch_call", 5)}


def test_module_alias_of_an_own_function_apply():
    """`relu = _ReLU.apply` (Triton's layer-norm tutorial): the own autograd Function's apply, its forward checked
    as forward code; a module-level alias of a PyTorch function stays out."""
    body = '''
        class _Add(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                out = torch.empty_like(x)
                kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
                return out


        add_one = _Add.apply


        class ModelNew(nn.Module):
            def forward(self, x):
                return add_one(x)
        '''
    assert_clean(body)
    assert hacks(body.replace("kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)",
                              "out = x + 1"))


def test_launch_unpacks_strides_after_the_tensors():
    """`k[grid](x, y, *x.stride(), N)` (kernl, flash-attention): numbers of unknown count after every tensor land
    in parameters as numbers whatever their count; a tensor after them, or unpacked, could land in a constexpr."""
    template = '''
        @triton.jit
        def k2(x_ptr, y_ptr, sm, sn, N, BLOCK: tl.constexpr):
            r = tl.program_id(0)
            c = tl.arange(0, BLOCK)
            v = tl.load(x_ptr + r * sm + c * sn, mask=c < N, other=0.0)
            tl.store(y_ptr + r * N + c, v, mask=c < N)


        class ModelNew(nn.Module):
            def forward(self, x):
                M, N = x.shape
                y = torch.empty_like(x)
                k2[(M,)](ARGS, BLOCK=triton.next_power_of_2(N))
                return y
        '''
    assert_clean(template.replace("ARGS", "x, y, *x.stride(), N"))
    assert_clean(template.replace("ARGS", "x, y, *x.shape, N"))
    for bad in ("x, *x.stride(), y, N", "x, y, *[x, y], N", "*(x, y), *x.stride(), x"):
        found = hacks(template.replace("ARGS", bad))
        assert any("unpacked" in f["message"] for f in found), (bad, found)


def test_export_list():
    """`__all__ = ["ModelNew"]` (a package's export list): string constants nothing reads; reading it, or binding
    it to anything else or anywhere else, stays a dunder name."""
    assert_clean('''
        __all__ = ["ModelNew", "kernel"]

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
                return out
        ''')
    for bad in ('__all__ = [ModelNew]', '__all__ = ["a"]\nN = len(__all__)', '__all__ += ["b"]'):
        found = hacks(bad + '\n')
        assert any("`__all__`" in f["message"] for f in found), (bad, found)


def test_module_list_filled_by_append_in_init():
    """`self.layers = nn.ModuleList()` then `.append(nn.Linear(...))` in __init__ (level-3 models, a second
    honest probe): the appended layers are the container's elements, as the comprehension form's are; appending
    a tensor gives tensors, and appending in forward stays refused."""
    body = '''
        class ModelNew(nn.Module):
            def __init__(self, sizes):
                super().__init__()
                self.layers = nn.ModuleList()
                for a, b in zip(sizes[:-1], sizes[1:]):
                    self.layers.append(nn.Linear(a, b))

            def forward(self, x):
                for layer in self.layers:
                    n = layer.weight.shape[0]
                    out = torch.empty((x.shape[0], n), device=x.device, dtype=x.dtype)
                    kernel[(triton.cdiv(out.numel(), 1024),)](x, out, out.numel(), BLOCK=1024)
                    x = out
                return x
        '''
    assert_clean(body)
    assert hacks(body.replace("self.layers.append(nn.Linear(a, b))",
                              "self.layers.append(nn.Linear(a, b))\n                self.layers.append(torch.ones(3))"))
    assert hacks(body.replace("x = out\n", "x = out\n                    self.layers.append(nn.Linear(2, 2))\n"))


def test_launch_takes_a_static_config_dict():
    """`kernel[grid](..., **_CONFIG)` with a module-level dict of numbers (a config shared between launches): its
    values land in parameters as numbers; a dict holding a tensor, or a list unpacked, stays refused."""
    template = '''
        _CONFIG = {"BLOCK": 1024, "num_warps": 4}


        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                d = DICT
                kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), **d)
                return out
        '''
    assert_clean(template.replace("DICT", "_CONFIG"))
    for bad in ('{"BLOCK": x}', 'dict(BLOCK=1024, out_ptr=x)'):
        found = hacks(template.replace("DICT", bad))
        assert found, bad


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "tests/fixtures/honest_probe/*.py"))),
                         ids=os.path.basename)
def test_honest_probe_corpus_is_clean(path):
    """165 honest candidates in third-party and model-written styles (tests/fixtures/honest_probe/README.md): no
    refusal, so that a change to the language that would refuse one of them is seen here first."""
    found = [f for f in _check_file(path) if f["type"] in HACK]
    assert not found, [(f["line"], f["type"], f["message"]) for f in found]


def test_module_init_spelled_out():
    """`nn.Module.__init__(self)` in the __init__ of an nn.Module subclass (third-party code, the first honest
    probe): what super().__init__() does there.  With another argument, another receiver, outside __init__, or
    in a class whose base is not nn.Module it stays refused."""
    body = '''
        class ModelNew(nn.Module):
            def __init__(self):
                nn.Module.__init__(self)

            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
                return out
        '''
    assert_clean(body)
    assert_clean(body.replace("nn.Module.__init__(self)", "torch.nn.Module.__init__(self)"))
    for bad in ("nn.Module.__init__(self, 1)", "nn.Module.__init__(self, training=True)",
                "nn.Module.__init__(nn.Linear(2, 2))"):
        found = hacks(body.replace("nn.Module.__init__(self)", bad))
        assert any("nn.Module.__init__" in f["message"] for f in found), (bad, found)
    found = hacks(body.replace("out = torch.empty_like(x)\n", "out = torch.empty_like(x)\n"
                               "                nn.Module.__init__(self)\n"))
    assert found
    # a subclass of the candidate's own module: nn.Module.__init__ there would skip its base's __init__
    sub = body.replace("class ModelNew(nn.Module):", "class Base(nn.Module):\n            def __init__(self):\n"
                       "                super().__init__()\n\n\n        class ModelNew(Base):")
    found = hacks(sub)
    assert any("nn.Module.__init__" in f["message"] for f in found), found


def test_class_level_kernels_and_shadowing_through_an_alias():
    """A @triton.jit def in the class body (under @staticmethod or not), launched as self.k[grid](...): a kernel
    like a module-level one (its body checked as kernel code).  An instance attribute of a method's name is
    refused however the instance is named (`s = self; s.k = ...`): every self.k was typed as the class's."""
    body = '''
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                INIT

            @staticmethod
            @triton.jit
            def _k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

            def forward(self, x):
                out = torch.empty_like(x)
                self._k[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
                return out
        '''
    assert_clean(body.replace("INIT", "pass"))
    assert_clean(body.replace("INIT", "pass").replace("            @staticmethod\n", ""))
    # the body is kernel code: Python inside it is refused as in a module-level kernel
    assert hacks(body.replace("INIT", "pass").replace("offs = tl.program_id(0)", "y = torch.zeros(3)\n                offs = tl.program_id(0)"))
    # called like a function, it is refused as a module-level kernel is
    found = hacks(body.replace("INIT", "pass").replace("self._k[(triton.cdiv(x.numel(), 1024),)](", "self._k("))
    assert any("launch it with" in f["message"] for f in found), found
    for init in ("self._k = kernel", "s = self\n                s._k = kernel", "x = [self]\n                x[0]._k = kernel",
                 "s = self\n                s.forward = kernel", "s = self\n                s.training = False"):
        found = hacks(body.replace("INIT", init))
        assert any("may not share a method's name" in f["message"] for f in found), (init, found)


def test_property_of_an_own_module():
    """`@property def p(self)` on an nn.Module subclass (third-party code, the third honest probe): `self.p` is a
    call of p with self alone, typed in the reader's context, so a property read in forward is forward code.
    Setters, parameters, the call form, other classes and torch compute read in forward stay refused."""
    body = '''
        class ModelNew(nn.Module):
            def __init__(self, slope):
                super().__init__()
                self._slope = float(slope)

            PROP

            def forward(self, x):
                out = torch.empty_like(x)
                kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), READ, BLOCK=1024)
                return out
        '''
    good = "@property\n            def slope(self):\n                return self._slope"
    assert_clean(body.replace("PROP", good).replace("READ", "self.slope"))
    # torch compute inside the property, read in forward: forward code
    compute = "@property\n            def slope(self):\n                return torch.relu(torch.ones(1))"
    assert hacks(body.replace("PROP", compute).replace("READ", "self.slope"))
    # a property that is never read is still a method whose body the checker reads as one
    for bad in ("@property\n            def slope(self, k=1):\n                return self._slope",
                "@property\n            def slope(self):\n                return self._slope\n\n"
                "            @slope.setter\n            def slope(self, v):\n                pass",
                "def _get(self):\n                return self._slope\n\n            slope = property(_get)"):
        assert hacks(body.replace("PROP", bad).replace("READ", "self.slope")), bad
    # recursion terminates (and the program is refused or typed, not hung)
    hacks(body.replace("PROP", "@property\n            def slope(self):\n                return self.slope")
          .replace("READ", "self.slope"))
    # not on a record
    rec = body.replace("PROP", "").replace("READ", "1.0").replace(
        "class ModelNew", "@dataclass(frozen=True)\n        class Cfg:\n            a: int = 1\n\n"
        "            @property\n            def b(self):\n                return self.a\n\n\n        class ModelNew")
    assert hacks(rec)


# An autotuned copy kernel and a ModelNew that launches it; PRUNE is its prune_configs_by.
_TUNED = '''
        @triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 1024})], key=["n"],
                         prune_configs_by=PRUNE)
        @triton.jit
        def tuned(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                tuned[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
                return out
        '''


def test_autotune_perf_model_takes_keywords():
    """`prune_configs_by={"perf_model": f}`: Triton calls f(**launch arguments, **config values), keywords only
    (the third honest probe's cost model); before, f was typed as taking the launch arguments' object first.
    Its body is forward code: torch compute there stays refused."""
    template = '''
        def _estimate(n, BLOCK, **kwargs):
            BODY
        ''' + _TUNED.replace("PRUNE", '{"perf_model": _estimate, "top_k": 1}')
    assert_clean(template.replace("BODY", "return triton.cdiv(n, BLOCK) * BLOCK / 1e6"))
    assert hacks(template.replace("BODY", "return torch.ones(1).sum()"))


def test_autotune_arguments_that_leave_the_current_stream_or_time_are_refused_with_the_rewrite():
    """Red team 34: triton.autotune(use_cuda_graph=True) benchmarks each config in a CUDA graph on a stream of Triton's
    own; a candidate that re-tunes every 16 calls put device time on that stream inside the profiled block, which moved
    its timing to the device-wide clock (a speedup below 1 pulled toward 1).  It and do_bench are refused, each with
    why and what to write instead; the arguments that benchmark on the current stream stay in the language."""
    base = _TUNED.replace("prune_configs_by=PRUNE", "ARG")
    for arg, words in (("use_cuda_graph=True", "a stream of Triton's own"), ("do_bench=None", "a timer of your own")):
        found = check(base.replace("ARG", arg))
        said = " ".join(str(f.get("message")) for f in found)
        assert f"triton.autotune({arg.split('=')[0]}=...) is not part of the language" in said and words in said \
            and "leave it out" in said, found
    assert_clean(base.replace("ARG", "warmup=5, rep=20, cache_results=False"))


def test_configs_a_prune_function_returns_have_their_hooks_typed():
    """A red team (2026-11-26): early_config_prune returned a new Config whose pre_hook computed the output with
    torch, untyped (a Config's hooks were typed only in the autotune list).  The configs it returns are launched
    with: their hooks are launch hooks with the kernel's arguments.  An honest hook (zeroing the output) stays
    clean."""
    template = '''
        def hook(nargs):
            BODY

        def prune(configs, nargs, **kwargs):
            return [triton.Config({"BLOCK": 1024}, pre_hook=hook)]
        ''' + _TUNED.replace("PRUNE", '{"early_config_prune": prune}')
    assert_clean(template.replace("BODY", 'nargs["out_ptr"].zero_()'))
    found = hacks(template.replace("BODY", 'nargs["out_ptr"].copy_(nargs["x_ptr"] * 2.0)'))
    assert any(f["type"] == "torch_call" for f in found), found


def test_a_base_class_may_not_shadow_a_subclass_method():
    """A red team (2026-11-26): Base.__init__ set `self.launch = fast` over the method ModelNew.launch that forward
    calls; the syntactic rule knew only the writing class's methods."""
    found = hacks('''
        def fast(x):
            return x

        class Base(nn.Module):
            def __init__(self):
                super().__init__()
                self.launch = fast

        class ModelNew(Base):
            def __init__(self):
                super().__init__()

            def launch(self, x):
                out = torch.empty_like(x)
                kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
                return out

            def forward(self, x):
                return self.launch(x)
        ''')
    assert any("may not share a method's name" in f["message"] for f in found), found


def test_a_config_takes_only_the_options_a_launch_takes():
    """triton.Config's ir_override is a path Triton reads IR from instead of compiling the checked kernel; its
    sixth and seventh positional places are pre_hook and ir_override."""
    base = '''import torch, torch.nn as nn, triton, triton.language as tl

@triton.autotune(configs=[CONFIG], key=["n"])
@triton.jit
def k(x, n, B: tl.constexpr):
    tl.store(x + tl.arange(0, B), tl.zeros([B], tl.float32))

class ModelNew(nn.Module):
    def forward(self, x):
        k[(1,)](x, x.numel())
        return x
'''
    for config, ok in (('triton.Config({"B": 128}, num_warps=8, num_stages=2)', True),
                       ('triton.Config({"B": 128}, 4, 3, 1, None)', True),
                       ('triton.Config({"B": 128}, ir_override="/tmp/k.ttgir")', False),
                       ('triton.Config({"B": 128}, 4, 3, 1, None, None, "/tmp/k.ttgir")', False)):
        src = base.replace("CONFIG", config).encode()
        found = language.check(ast.parse(src), source=src)
        assert (not found) == ok, (config, found)
        if not ok:
            assert any("triton.Config" in f["message"] for f in found), found
