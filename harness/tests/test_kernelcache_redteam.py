"""Red team of the trusted compile cache (judge/kernelcache.py, language.kernel_skeleton, tritoncache's reader).

Each test is one attack, asserting the SAFE behaviour: it fails where the attack works.  CPU only (Triton compiles
for an sm_90 target here, as in test_kernelcache)."""

import ast
import json
import os

import pytest

from kgym_harness.judge import kernelcache, language


from test_kernelcache import (TARGET, cache_dirs, compiled_not_interpreted, helper, kernel_of, load,  # noqa: F401
                              parts_for, runner_compile, service_for, skeleton_module, spec_of)


_parts, _spec = parts_for, spec_of


_OWN = r"""
import json, sys, types, linecache, tempfile, os
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
src, qualname, sig, consts, attrs, options, target = eval(sys.stdin.read())
path = os.path.join(tempfile.mkdtemp(), "candidate.py")
open(path, "w").write(src)
m = types.ModuleType("kgym_candidate"); m.__file__ = path
exec(compile(src, path, "exec"), m.__dict__)
fn = m
for part in qualname.split("."):
    fn = vars(fn)[part]
ck = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget(*target), options=options)
sys.stdout.write(ck.asm["ptx"])
"""


def _own_ptx(src, qualname, parts, tmp_path):
    """The PTX the candidate's own module compiles to for ``parts`` (Triton in a fresh process, the real module's
    globals, constants as given: no JSON round trip)."""
    import subprocess
    import sys

    signature, constants, attrs, options = parts
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "own-compile-cache")
    arg = repr((src.decode(), qualname, signature, constants, attrs, dict(options.__dict__), TARGET))
    out = subprocess.run([sys.executable, "-c", _OWN], input=arg, capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def _accepted(src):
    data = src if isinstance(src, bytes) else src.encode()
    return language.check(ast.parse(data), source=data)


# -- 1. cross-candidate poisoning through Triton's key: constants are hashed as str(value) -------------------------

BIAS = b'''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x, b, o, n, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    v = tl.load(x + i, mask=m)
    if HAS_BIAS:
        v = v + tl.load(b + i, mask=m)
    if ACT == 1:
        v = tl.maximum(v, 0.0)
    tl.store(o + i, v, mask=m)


class ModelNew(nn.Module):
    def forward(self, x, b):
        o = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 256),)](x, b, o, x.numel(), False, 1, B=256)
        return o
'''

SIG = {"x": "*fp32", "b": "*fp32", "o": "*fp32", "n": "i32", "HAS_BIAS": "constexpr", "ACT": "constexpr",
       "B": "constexpr"}
ATTRS = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]], (2,): [["tt.divisibility", 16]]}


def test_bias_kernel_is_accepted():
    assert _accepted(BIAS) == []


def _relu(ptx):
    return "max" in ptx


def test_a_string_constexpr_cannot_poison_a_twins_int_specialisation(cache_dirs, helper, tmp_path):
    """Triton hashes a constexpr's value as str(value) (ASTSource.hash: '-'.join(str(v))): ACT="1" and ACT=1 have one
    key, yet `ACT == 1` is False for the string (the relu compiled out).  The attacker's runner (same kernels,
    any forward: the skeleton holds no forward) asks for the string; the judge files it under that key; an honest
    twin launching ACT=1 is then served the attacker's kernel: no relu, a wrong answer it never wrote."""
    victim = load(BIAS, "/kgym-test/victim.py")
    evil = _parts(SIG, {(4,): False, (5,): "1", (6,): 256}, ATTRS)
    honest = _parts(SIG, {(4,): False, (5,): 1, (6,): 256}, ATTRS)
    attacker = service_for(BIAS, helper)
    kdir = attacker.ensure("k", _spec(evil))
    assert kdir, attacker.reasons  # a string constant is the candidate's own choice: compiled, in its request's folder
    twin = service_for(BIAS, helper)
    assert twin.ns == attacker.ns
    assert _relu(_own_ptx(BIAS, "k", honest, tmp_path))
    served, hit = runner_compile(kernel_of(victim, "k"), honest, twin.ensure("k", _spec(honest)) or kdir,
                                 cache_dirs)
    assert not (hit and not _relu(served.asm["ptx"])), \
        "the twin's runner was served a kernel compiled with ACT='1' (no relu) for its ACT=1"



def _memops(ptx):
    return ptx.count("ld.global"), ptx.count("st.global")


def test_a_forged_constant_path_cannot_poison_a_twins_specialisation(cache_dirs, helper, tmp_path):
    """Triton's key holds the constants' values in the order of their paths, not the paths: a hostile runner's spec
    with constants at (3,) (n, a runtime argument whose signature still says i32), (5,), (6,) -- HAS_BIAS left
    out (None) -- has the key of the honest {(4,): False, (5,): 1, (6,): 256} ("False-1-256" both), and compiles
    (n := False: the mask is always false).  Value types alone are no defence: the judge must check
    that the constants are exactly the signature's constexpr arguments."""
    victim = load(BIAS, "/kgym-test/victim.py")
    honest = _parts(SIG, {(4,): False, (5,): 1, (6,): 256}, ATTRS)
    evil = _parts(SIG, {(3,): False, (5,): 1, (6,): 256}, ATTRS)
    attacker = service_for(BIAS, helper)
    assert attacker.ensure("k", _spec(evil)) is None and "constexpr" in attacker.reasons[0], attacker.reasons
    twin = service_for(BIAS, helper)
    served, hit = runner_compile(kernel_of(victim, "k"), honest, twin.ensure("k", _spec(honest)), cache_dirs)
    own = _memops(_own_ptx(BIAS, "k", honest, tmp_path))
    assert not (hit and _memops(served.asm["ptx"]) != own), \
        "the twin's runner was served a kernel compiled with n=False (masked out) for its own specialisation"

# -- 1b. the same through the options: Triton hashes each as f"{name}-{value}" ---------------------------------------

@pytest.mark.parametrize("option,forged,effect", [
    # CudaLauncher launches with cuLaunchCooperativeKernel where metadata.launch_cooperative_grid is truthy: a grid
    # larger than what fits co-resident on the GPU then fails to launch (the honest twin errors).
    ("launch_cooperative_grid", "False", lambda ck: bool(ck.metadata.launch_cooperative_grid)),
    ("launch_pdl", "False", lambda ck: bool(ck.metadata.launch_pdl)),
    # debug: device asserts and overflow checks compiled in (an honest twin's tl.device_assert fires).
    ("debug", "False", lambda ck: bool(ck.metadata.debug)),
])
def test_a_string_option_cannot_poison_a_twins_bool_option(cache_dirs, helper, option, forged, effect):
    """An accepted candidate may launch with launch_cooperative_grid="False" / launch_pdl="False" / debug="False"
    (the language does not type launch options: see test_the_forging_launch_is_an_accepted_candidate); the
    judge lets any value of a FREE_OPTION through (_options_why); the key is the same as for False; an honest
    twin (same kernels) launching with the default False is served the truthy-option kernel."""
    victim = load(BIAS, "/kgym-test/victim.py")
    honest = _parts(SIG, {(4,): False, (5,): 1, (6,): 256}, ATTRS)
    evil = json.loads(_spec(honest))
    evil["options"][option] = forged
    attacker = service_for(BIAS, helper)
    assert attacker.ensure("k", json.dumps(evil)) is None and "not a bool" in attacker.reasons[0], attacker.reasons
    twin = service_for(BIAS, helper)
    kdir = twin.ensure("k", _spec(honest))
    served, hit = runner_compile(kernel_of(victim, "k"), honest, kdir, cache_dirs)
    assert not (hit and effect(served)), \
        f"the twin's runner was served a kernel compiled with {option}={forged!r} for its {option}=False"


def test_the_forging_launch_is_an_accepted_candidate():
    """No hostile Python is needed for 1 and 1b: the candidate's own forward launches with the forged values."""
    for launch in (b'False, "1", B=256', b'False, 1, B=256, launch_cooperative_grid="False"',
                   b'False, 1, B=256, debug="False"', b'False, 1, B=256, launch_pdl="False"'):
        src = BIAS.replace(b"False, 1, B=256", launch)
        assert _accepted(src) == [], launch
        assert language.kernel_skeleton(ast.parse(src), src)[0] == language.kernel_skeleton(ast.parse(BIAS), BIAS)[0]


# -- 5. an honest string constexpr that names a dtype ----------------------------------------------------------------

ROUND = b'''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x, o, n, MODE: tl.constexpr, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    v = tl.load(x + i, mask=m)
    if MODE == "fp16":
        v = v.to(tl.float16).to(tl.float32)
    tl.store(o + i, v, mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        o = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 256),)](x, o, x.numel(), "fp16", B=256)
        return o
'''


def test_an_honest_string_constexpr_is_compiled_as_that_string(cache_dirs, helper, tmp_path):
    """compile_entry turns every constant string that names a dtype into tl.dtype (a dtype and its name serialise
    alike), so an honest MODE="fp16" is compiled as tl.float16, where `MODE == "fp16"` is False: the honest
    runner's own request is served a kernel without its rounding (a false positive: wrong output)."""
    assert _accepted(ROUND) == []
    real = load(ROUND, "/kgym-test/round.py")
    parts = _parts({"x": "*fp32", "o": "*fp32", "n": "i32", "MODE": "constexpr", "B": "constexpr"},
                   {(3,): "fp16", (4,): 256}, {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]})
    svc = service_for(ROUND, helper)
    kdir = svc.ensure("k", _spec(parts))
    assert kdir, svc.reasons
    served, hit = runner_compile(kernel_of(real, "k"), parts, kdir, cache_dirs)
    assert "cvt.rn.f16.f32" in _own_ptx(ROUND, "k", parts, tmp_path)  # what the module itself compiles to
    assert not (hit and "cvt.rn.f16.f32" not in served.asm["ptx"]), \
        "the honest runner was served MODE=tl.float16's kernel for its MODE='fp16'"


# -- 3. the worker's streams are the judge's ---------------------------------------------------------------------------

PRINTS = b'''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x, o, n, B: tl.constexpr):
    tl.static_print("kgym judge: FORGED by the candidate")
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(o + i, tl.load(x + i, mask=i < n), mask=i < n)


class ModelNew(nn.Module):
    def forward(self, x):
        o = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 256),)](x, o, x.numel(), B=256)
        return o
'''


def _helper_with_streams(path):
    """kernelcache.start(fresh=True) with the helper's stdout and stderr (the judge's, which kgym captures as the
    judge's own output) going to ``path``."""
    saved = os.dup(1), os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        h = kernelcache.start(fresh=True)
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for x in (fd,) + saved:
            os.close(x)
    return h


def test_a_kernels_compile_time_output_does_not_reach_the_judges_streams(cache_dirs, tmp_path):
    """tl.static_print (accepted in kernels) runs at compile time.  The worker inherits the helper's fds 1 and 2,
    i.e. the judge's stdout and stderr (sandbox.close_descriptors keeps them), so the candidate's text lands in
    the stream kgym keeps as the trusted judge's own output (before the cache, it went to the runner's)."""
    assert _accepted(PRINTS) == []
    log = tmp_path / "judge-streams"
    h = _helper_with_streams(str(log))
    try:
        svc = service_for(PRINTS, h)
        parts = _parts({"x": "*fp32", "o": "*fp32", "n": "i32", "B": "constexpr"}, {(3,): 256},
                       {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]})
        assert svc.ensure("k", _spec(parts)), svc.reasons
    finally:
        h.sock.close()
        os.waitpid(h.pid, 0)
    assert "FORGED" not in log.read_text(errors="replace"), "the candidate's compile-time print reached the judge's stream"


# -- 5b. honest idioms the skeleton must keep Triton's key for (else every request is a wasted worker compile) -----

TRAILING = b'''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x, o, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(o + i, tl.load(x + i, mask=i < n), mask=i < n)
    # v = tl.exp(v)   (an earlier try, left commented out at the end of the body)


class ModelNew(nn.Module):
    def forward(self, x):
        o = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 256),)](x, o, x.numel(), B=256)
        return o
'''


def test_a_trailing_comment_in_a_kernel_keeps_its_key():
    """inspect.getblock (Triton's source of a kernel) takes comment lines indented like the body after its last
    statement; language.kernel_skeleton copies only up to the AST's end_lineno, so the skeleton's kernel text
    lacks them, its key differs, and every request of such an honest module is a worker compile the runner never
    finds (it compiles again itself)."""
    assert _accepted(TRAILING) == []
    text, kernels = language.kernel_skeleton(ast.parse(TRAILING), TRAILING)
    assert text is not None and kernels == ["k"]
    real, sk = load(TRAILING, "/kgym-test/trailing.py"), skeleton_module(text)
    assert kernel_of(real, "k").src == kernel_of(sk, "k").src, "the skeleton's kernel text is not Triton's"


# -- 4. disk: what one accepted candidate leaves in the trusted directory, and writes while compiling --------------

def _big_print(mib):
    return (b'''import torch
import torch.nn as nn
import triton
import triton.language as tl

MSG = tl.constexpr("A" * (%d << 20))


@triton.jit
def k(x, o, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    v = tl.load(x + i, mask=i < n)
    tl.device_print(MSG, v)
    tl.store(o + i, v, mask=i < n)


class ModelNew(nn.Module):
    def forward(self, x):
        o = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 128),)](x, o, x.numel(), B=128)
        return o
''' % mib)


_PRINT_SIG = {"x": "*fp32", "o": "*fp32", "n": "i32", "B": "constexpr"}


def _tree_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def test_the_cache_has_a_bound_on_the_disk_it_takes(cache_dirs, helper):
    """A 20-line accepted candidate (a 4 MiB constexpr string printed by tl.device_print: the string goes into every
    IR, the PTX and the cubin) has the judge file a ~58 MB entry per specialisation in a few seconds; one namespace
    holds up to MAX_NAMESPACE_BYTES (+ one entry), and nothing but MAX_NAMESPACES (4096) bounds the namespaces, whose
    eviction starts only at that count: 4096 x ~320 MiB, over a terabyte, before anything is removed (grpo.sh
    empties the cache only per run; the device machines have 64-235 GiB of disk)."""
    src = _big_print(4)
    assert _accepted(src) == []
    svc = service_for(src, helper)
    kdir = svc.ensure("k", _spec(_parts(_PRINT_SIG, {(3,): 128}, {})))
    assert kdir is None or _tree_bytes(kdir) <= kernelcache.MAX_BYTES, svc.reasons  # too big: not filed
    assert not os.path.exists(cache_dirs / "kernels" / svc.ns) or \
        _tree_bytes(cache_dirs / "kernels" / svc.ns) <= kernelcache.MAX_BYTES
    worst = kernelcache.MAX_NAMESPACES * (kernelcache.MAX_NAMESPACE_BYTES + kernelcache.MAX_BYTES)
    assert worst <= 32 << 30, f"{worst / 2**30:.1f} GiB of trusted cache can accumulate before any eviction"


def test_a_worker_cannot_write_more_than_an_entry_may_hold(tmp_path, helper):
    """The worker has no RLIMIT_FSIZE and no quota on its folder (in the judge's TMPDIR): a 6 MiB constexpr string
    makes Triton write ~80 MB there (all refused afterwards by _file as too big); WORKER_DATA_BYTES (8 GiB) lets
    the string be hundreds of MiB, i.e. gigabytes written per request, per concurrent judge."""
    src = _big_print(6)
    text, _ = language.kernel_skeleton(ast.parse(src), src)
    out = tmp_path / "work"
    out.mkdir()
    answer = helper.compile({"skeleton": text, "qualname": "k", "spec": _spec(_parts(_PRINT_SIG, {(3,): 128}, {})),
                             "target": TARGET, "out": str(out), "uid": None}, 60)
    # Where kgym is root the folder is a private tmpfs (nothing of it on the disk); elsewhere RLIMIT_FSIZE.
    biggest = max((os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs), default=0)
    assert biggest <= kernelcache.MAX_BYTES, (biggest, answer.get("error"))  # RLIMIT_FSIZE: a file at most that
    assert _tree_bytes(out) <= kernelcache.MAX_FILES * kernelcache.MAX_BYTES and answer.get("error"), answer


# -- 3b. the worker's lockdown fails open -------------------------------------------------------------------------

_NO_LANDLOCK = r"""
import socket, sys
from kgym_harness.runner import sandbox
from kgym_harness.judge import kernelcache

def refused(read, readwrite, active, warnings, execute=()):
    warnings.append("landlock not active (Function not implemented): the runner can read and write wherever its uid can")
    return False

sandbox.landlock_runner = refused  # a kernel without Landlock (or one that refuses the ruleset)
sys.exit(kernelcache._worker(socket.socket(fileno=int(sys.argv[1]))))
"""


def test_a_worker_without_its_landlock_does_not_run_the_skeleton(tmp_path):
    """_lockdown records a Landlock refusal as a warning and the worker goes on to exec the skeleton and compile
    (the runner's missing protections are checked by kgym against its required list; the worker's never are).
    Where the judge is not root the worker keeps the judge's own uid: with any hole in the language, it writes
    the kernels directory itself."""
    import socket
    import subprocess
    import sys

    target = tmp_path / "planted"
    out = tmp_path / "work"
    out.mkdir()
    mine, theirs = socket.socketpair()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(kernelcache.__file__)).rsplit("/kgym_harness", 1)[0]
    proc = subprocess.Popen([sys.executable, "-c", _NO_LANDLOCK, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                            env=env)
    theirs.close()
    try:
        kernelcache._send(mine, {"skeleton": f"open({str(target)!r}, 'w').write('x')\n", "qualname": "k",
                                 "spec": "{}", "target": TARGET, "out": str(out), "uid": None})
        mine.settimeout(60)
        answer = kernelcache._recv(mine)
    finally:
        mine.close()
        proc.wait(60)
    assert not target.exists(), f"the worker ran the skeleton without its sandbox: {answer}"


# -- names the skeleton relies on ---------------------------------------------------------------------------------

@pytest.mark.parametrize("imp", [
    b"from triton import heuristics as __kgym_jit__",   # the skeleton's decorator name, rebound by a kept import
    b"import torch as __builtins__",                     # the builtins of every function defined afterwards
])
def test_a_dunder_import_alias_is_refused(imp):
    """The language's dunder rule looks at Name nodes; an import's `as` name is not one, so a candidate may bind
    __kgym_jit__ (the skeleton's decorator: its kept import rebinds it in the worker: at worst a miss today) or
    __builtins__ (side finding, the runner: CPython takes a function's builtins from its globals' __builtins__
    when the def runs, so `min`, `max`, `abs`, `sum`, `round`, `range`, `int`, `float` in every later function
    resolve to torch.* while the checker reasons about Python's builtins)."""
    src = BIAS.replace(b"import triton.language as tl\n", b"import triton.language as tl\n" + imp + b"\n")
    assert _accepted(src) != [], "accepted"


def test_a_rebound_skeleton_decorator_is_never_served(cache_dirs, helper):
    """Regression fixture: with __kgym_jit__ rebound by a kept import the worker finds no kernel, and nothing is
    filed (a miss, never another kernel)."""
    src = BIAS.replace(b"import triton.language as tl\n",
                       b"import triton.language as tl\nfrom triton import heuristics as __kgym_jit__\n")
    svc = service_for(src, helper)
    assert svc.ns is not None
    assert svc.ensure("k", _spec(_parts(SIG, {(4,): False, (5,): 1, (6,): 256}, ATTRS))) is None


def test_a_walrus_rebinding_a_kernel_dtype_is_refused():
    """Regression fixture: a dtype global is not in Triton's key, so a module whose runtime value of DT differs
    from its skeleton's (DT rebound by `(DT := ...)`, which _collect does not count as a binding) would be
    served the skeleton's kernel; the language refuses the walrus anywhere."""
    src = BIAS.replace(b"import triton.language as tl\n",
                       b"import triton.language as tl\nDT = tl.float32\nZ = (DT := tl.float16)\n")
    assert _accepted(src) != []
