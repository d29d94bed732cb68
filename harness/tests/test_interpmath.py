"""Tests of kgym_harness.runner.interpmath: libdevice's math functions in Triton's CPU interpreter.

Each case runs in a fresh Python process (install() patches both libdevice modules for the whole process, as it
does in a runner)."""

import os
import subprocess
import sys
import textwrap

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PRELUDE = '''
import os
os.environ["TRITON_INTERPRET"] = "1"
import math
import torch
torch.manual_seed(0)  # each case's draws the same on every run (an unseeded x near 0 once failed CI)
import triton
import triton.language as tl
from kgym_harness.runner import interpmath
done = interpmath.install()
from triton.language.extra import libdevice
from triton.language.extra.cuda import libdevice as cudalib
from triton.language.extra.cuda.libdevice import tanh as dev_tanh
'''


def _run(body):
    env = dict(os.environ, PYTHONPATH=HARNESS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _PRELUDE + textwrap.dedent(body)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_float_functions_match_torch_in_an_interpreted_kernel():
    """Unary, binary and ternary functions, both modules and a name imported from one, fp32 and fp64: the values
    torch computes (the stubs returned None before)."""
    out = _run('''
        assert all(n > 150 for n in done.values()) and len(done) == 2, done

        @triton.jit
        def k(x_ptr, y_ptr, o_ptr, n, OP: tl.constexpr, B: tl.constexpr):
            offs = tl.arange(0, B)
            m = offs < n
            x = tl.load(x_ptr + offs, mask=m, other=1.0)
            y = tl.load(y_ptr + offs, mask=m, other=1.0)
            if OP == 0:
                r = dev_tanh(x)
            elif OP == 1:
                r = libdevice.pow(y, 3.0)
            elif OP == 2:
                r = cudalib.expm1(x)
            elif OP == 3:
                r = libdevice.atan2(x, y)
            elif OP == 4:
                r = libdevice.fma(x, y, x)
            elif OP == 5:
                r = libdevice.erf(x) + libdevice.log1p(y)
            else:
                r = libdevice.rsqrt(y)
            tl.store(o_ptr + offs, r, mask=m)

        ref = [torch.tanh, lambda x, y: y ** 3, lambda x, y: torch.expm1(x), torch.atan2, lambda x, y: x * y + x,
               lambda x, y: torch.erf(x) + torch.log1p(y), lambda x, y: torch.rsqrt(y)]
        for dtype in (torch.float32, torch.float64):
            x = torch.randn(37, dtype=dtype)
            y = torch.rand(37, dtype=dtype) + 0.5
            for op, f in enumerate(ref):
                o = torch.empty_like(x)
                k[(1,)](x, y, o, 37, OP=op, B=64)
                want = f(x, y) if op != 0 else f(x)
                assert o.dtype == dtype and torch.allclose(o, want, rtol=1e-6, atol=1e-6), (op, dtype, o, want)
        print("ok")
        ''')
    assert out.strip().endswith("ok")


def test_predicates_are_int32_and_others_say_they_are_missing():
    out = _run('''
        @triton.jit
        def k(x_ptr, o_ptr, B: tl.constexpr):
            offs = tl.arange(0, B)
            tl.store(o_ptr + offs, libdevice.isnan(tl.load(x_ptr + offs)))

        x = torch.tensor([1.0, float("nan"), 2.0, float("inf")])
        o = torch.zeros(4, dtype=torch.int32)
        k[(1,)](x, o, B=4)
        assert o.tolist() == [0, 1, 0, 0], o

        @triton.jit
        def bits(x_ptr, o_ptr, B: tl.constexpr):
            offs = tl.arange(0, B)
            tl.store(o_ptr + offs, libdevice.float_as_int(tl.load(x_ptr + offs)))

        try:
            bits[(1,)](x, o, B=4)
        except Exception as exc:
            assert "no version in Triton's CPU interpreter" in str(exc), exc
        else:
            raise AssertionError("float_as_int ran")
        print("ok")
        ''')
    assert out.strip().endswith("ok")


def test_tl_range_loop_variable_is_a_tensor_as_on_a_gpu():
    """A persistent kernel's `for row in tl.range(...)`: `row.to(tl.int64)` works (the loop variable is a tensor on
    a GPU; it was a Python int in the interpreter), nested `range(row, ...)` and arithmetic keep working, and
    `tl.static_range` still gives Python ints (a tuple index)."""
    out = _run('''
        @triton.jit
        def k(x_ptr, o_ptr, n_rows, n_cols, B: tl.constexpr):
            pid = tl.program_id(0)
            for row in tl.range(pid, n_rows, 2):
                base = row.to(tl.int64) * n_cols
                offs = tl.arange(0, B)
                acc = tl.zeros([B], tl.float32)
                for j in range(row, row + 1):
                    acc += tl.load(x_ptr + base + offs, mask=offs < n_cols, other=0.0) * (j - row + 1)
                pair = (1.0, 2.0)
                for s in tl.static_range(2):
                    acc = acc * pair[s]
                tl.store(o_ptr + base + offs, acc, mask=offs < n_cols)

        x = torch.randn(5, 7)
        o = torch.empty_like(x)
        k[(2,)](x, o, 5, 7, B=8)
        assert torch.allclose(o, x * 2.0), (o, x)
        print("ok")
        ''')
    assert out.strip().endswith("ok")


def test_plain_range_loop_variable_is_a_tensor_in_kernels_only(tmp_path):
    """A kernel's `for row in range(pid, n, tl.num_programs(0))`: Triton compiles a plain range like tl.range, so
    `row.to(tl.int64)` works on a GPU; in the interpreter the loop variable was a Python int and the honest kernel
    failed on the CPU only (the honest probe c18, twenty-first session).  Now a tensor inside kernels and device
    functions; host code in the same module (a grid function, the forward) keeps the builtin range."""
    mod = tmp_path / "kgym_plain_range_kernel.py"
    mod.write_text(textwrap.dedent('''
        import triton
        import triton.language as tl


        @triton.jit
        def _scale(v, j):
            for t in range(j, j + 1):
                v = v * (t - j + 2).to(tl.float32)
            return v


        @triton.jit
        def k(x_ptr, o_ptr, n_rows, n_cols, B: tl.constexpr):
            pid = tl.program_id(0)
            for row in range(pid, n_rows, tl.num_programs(0)):
                base = row.to(tl.int64) * n_cols
                offs = tl.arange(0, B)
                x = tl.load(x_ptr + base + offs, mask=offs < n_cols, other=0.0)
                tl.store(o_ptr + base + offs, _scale(x, row), mask=offs < n_cols)


        def grid(meta):
            kinds = [type(i).__name__ for i in range(2)]
            assert kinds == ["int", "int"], kinds
            return (2,)
        '''))
    out = _run(f'''
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import kgym_plain_range_kernel as m
        x = torch.randn(5, 7)
        o = torch.empty_like(x)
        m.k[m.grid](x, o, 5, 7, B=8)
        assert torch.allclose(o, x * 2.0), (o, x)
        assert [type(i).__name__ for i in range(2)] == ["int", "int"]
        print("ok")
        ''')
    assert out.strip().endswith("ok")


def test_a_store_outside_the_kernels_tensors_raises_in_the_interpreter(tmp_path):
    """interpmath._install_store_bounds: a mask that lets the last block write one element past the output (the wrong
    probe's w07: `offs <= n`) raises StoreOutOfBounds, naming how far past; a store into a view of a larger
    storage, a masked tail and in-bounds atomics do not; nor does an unmasked load past the end (not held)."""
    mod = tmp_path / "kgym_store_bounds_kernel.py"
    mod.write_text(textwrap.dedent('''
        import triton
        import triton.language as tl


        @triton.jit
        def copy(x_ptr, y_ptr, n, B: tl.constexpr, PAST: tl.constexpr):
            offs = tl.program_id(0) * B + tl.arange(0, B)
            x = tl.load(x_ptr + offs)  # unmasked load past the end: read, never stored unmasked
            mask = offs <= n if PAST else offs < n
            tl.store(y_ptr + offs, x, mask=mask)


        @triton.jit
        def total(x_ptr, s_ptr, n, B: tl.constexpr):
            offs = tl.program_id(0) * B + tl.arange(0, B)
            tl.atomic_add(s_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0)))
        '''))
    out = _run(f'''
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import kgym_store_bounds_kernel as m
        x = torch.randn(37)
        y = torch.empty(37)
        m.copy[(3,)](x, y, 37, B=16, PAST=False)
        assert torch.equal(y, x)
        big = torch.zeros(64)
        m.copy[(3,)](x, big[5:42], 37, B=16, PAST=True)  # one past the view, still inside its storage
        try:
            m.copy[(3,)](x, y, 37, B=16, PAST=True)
        except Exception as exc:
            assert "wrote outside every tensor it was given" in str(exc) and "1 element(s) past the end" in str(exc), exc
        else:
            raise AssertionError("a store past the end went unseen")
        s = torch.zeros(1)
        m.total[(3,)](x, s, 37, B=16)
        assert torch.allclose(s, x.sum().reshape(1), atol=1e-5)
        print("ok")
        ''')
    assert out.strip().endswith("ok")


def test_a_kernel_reads_only_the_globals_tritons_compiler_allows(tmp_path):
    """Triton's compiler lets a kernel read a module-level value only where it is tl.constexpr (or a module, a jit
    function, a dtype...): `LOG2E: float = 1.44` read in a kernel is a compile error on a GPU (the honest probe's
    c25 on an H200, twenty-second session) and ran in the interpreter.  Now the interpreter raises the compiler's own
    CompilationError; tl.constexpr globals, device functions, dtypes and modules stay allowed, and a name the kernel
    assigns itself is local."""
    mod = tmp_path / "kgym_globals_kernel.py"
    mod.write_text(textwrap.dedent('''
        import triton
        import triton.language as tl

        LOG2E: float = 1.4426950408889634
        BLOCK = 8
        HALF = tl.constexpr(0.5)
        F32 = tl.float32


        @triton.jit
        def _twice(v):
            return v * 2.0


        @triton.jit
        def good(x_ptr, o_ptr, n, B: tl.constexpr):
            offs = tl.arange(0, B)
            LOG2E = 3.0
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(F32)
            tl.store(o_ptr + offs, _twice(x) * HALF + LOG2E - 3.0, mask=offs < n)


        @triton.jit
        def bad(x_ptr, o_ptr, n, B: tl.constexpr):
            offs = tl.arange(0, B)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tl.store(o_ptr + offs, x * LOG2E, mask=offs < n)


        @triton.jit
        def bad_int(x_ptr, o_ptr, n):
            offs = tl.arange(0, BLOCK)
            tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
        '''))
    out = _run(f'''
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import kgym_globals_kernel as m
        from triton.compiler.errors import CompilationError
        x = torch.randn(5)
        o = torch.empty_like(x)
        m.good[(1,)](x, o, 5, B=8)
        # `+ 3.0 - 3.0` rounds in float32 at 3.0's ulp (2.4e-7): an absolute bound, not a relative one, since a
        # random x near 0 would fail rtol (CI, 2026-11-27).  A global LOG2E read would be off by 1.56.
        assert torch.allclose(o, x, rtol=0.0, atol=1e-6), (o, x)
        for k, args in ((m.bad, dict(B=8)), (m.bad_int, {{}})):
            try:
                k[(1,)](x, o, 5, **args)
            except CompilationError as e:
                assert "Cannot access global variable" in str(e) and "tl.constexpr" in str(e), str(e)
            else:
                raise AssertionError(f"{{k}} ran")
        print("ok")
        ''')
    assert out.strip().endswith("ok")


def test_a_dot_has_the_least_shapes_of_tritons_gpu_backend(tmp_path):
    """tl.dot with K < 16 (32 for 8-bit operands) is a compile error on a GPU (the honest probe's p3_c39 on an H200,
    twenty-third session: a head dimension padded to its next power of two, 8 at the tiny run's sizes) and ran in
    the interpreter, whose own bound is 1.  Now the interpreter holds it to the GPU's bound; K = 16 runs and is right."""
    mod = tmp_path / "kgym_dot_kernel.py"
    mod.write_text(textwrap.dedent('''
        import triton
        import triton.language as tl


        @triton.jit
        def mm(a_ptr, b_ptr, c_ptr, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
            rm = tl.arange(0, M)
            rk = tl.arange(0, K)
            rn = tl.arange(0, N)
            a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
            b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
            tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, input_precision="ieee"))
        '''))
    out = _run(f'''
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import kgym_dot_kernel as m
        from triton.compiler.errors import CompilationError
        a, b = torch.randn(4, 16), torch.randn(16, 8)
        c = torch.empty(4, 8)
        m.mm[(1,)](a, b, c, M=4, K=16, N=8)   # M and N below 16 are padded on a GPU: allowed
        assert torch.allclose(c, a @ b, atol=1e-5), (c, a @ b)
        a, b = torch.randn(32, 8), torch.randn(8, 32)
        c = torch.empty(32, 32)
        try:
            m.mm[(1,)](a, b, c, M=32, K=8, N=32)
        except Exception as e:
            chain, cur = [], e
            while cur is not None:
                chain.append(cur)
                cur = cur.__cause__ or cur.__context__
            assert any(isinstance(x, CompilationError) for x in chain), repr(e)
            assert "K >= 16" in str(e) and "32x8 by 8x32" in str(e), str(e)
        else:
            raise AssertionError("a dot with K = 8 ran")
        print("ok")
        ''')
    assert out.strip().endswith("ok")
