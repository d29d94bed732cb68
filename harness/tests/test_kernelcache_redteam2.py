"""Second red team of the trusted compile cache (judge/kernelcache.py, language.kernel_skeleton, tritoncache's reader,
runner.py's compile hand-back).

Each test is one attack, asserting the SAFE behaviour: it fails where the attack works (a passing one is kept as a
regression fixture).  CPU only: Triton compiles for an sm_90 target here, as in test_kernelcache.py.

The attacks of the first red team (test_kernelcache_redteam.py: str(value) key collisions, forged constant paths,
string options, dtype-named strings, compile-time prints, disk, Landlock, dunder import aliases, trailing comments)
are not repeated."""

import ast
import json
import os

import pytest

from kgym_harness.judge import kernelcache, language
from kgym_harness.shared import tritoncache

from test_kernelcache import (TARGET, cache_dirs, compiled_not_interpreted, helper, kernel_of, load,  # noqa: F401
                              accepted_modules, parts_for, runner_compile, service_for, skeleton_module, spec_of)


# -- helpers --------------------------------------------------------------------------------------------------------

_parts, _spec = parts_for, spec_of


def _accepted(src):
    data = src if isinstance(src, bytes) else src.encode()
    return language.check(ast.parse(data), source=data)


_SUB = r"""
import json, os, sys, types, linecache
import triton
import triton.language as tl
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend
from triton.runtime.jit import JITFunction
from kgym_harness.shared import tritoncache
from kgym_harness.shared.source import lines as source_lines
req = json.loads(sys.stdin.read())
src = req["src"].encode("utf-8", "surrogateescape")
path = req["path"]
linecache.cache[path] = (len(src), None, source_lines(src), path)
m = types.ModuleType("kgym_candidate"); m.__file__ = path
sys.modules["kgym_candidate"] = m
exec(compile(src, path, "exec", dont_inherit=True), m.__dict__)
def get(q):
    o = m
    for part in q.split("."):
        o = vars(o)[part]
    if isinstance(o, staticmethod):
        o = o.__func__
    while not isinstance(o, JITFunction) and hasattr(o, "fn"):
        o = o.fn
    return o
def val(v):
    if isinstance(v, dict) and "jit" in v: return get(v["jit"])
    if isinstance(v, dict) and "dtype" in v: return tl.dtype(v["dtype"])
    if isinstance(v, dict) and "tuple" in v: return tuple(val(x) for x in v["tuple"])
    if isinstance(v, dict) and "constexpr" in v: return tl.constexpr(val(v["constexpr"]))
    return v
def tup(v):
    return tuple(tup(x) for x in v) if isinstance(v, list) else v
fn = get(req["qualname"])
sig = {k: tup(v) for k, v in req["signature"].items()}
consts = {tuple(k): val(v) for k, v in req["constants"]}
attrs = {tuple(k): v for k, v in req["attrs"]}
options = make_backend(GPUTarget(*req["target"])).parse_options({k: tup(v) for k, v in req["options"].items()})
hits = []
knobs.compilation.listener = lambda **kw: hits.append(kw["cache_hit"])
if req["kdir"] is not None:
    reader = tritoncache.reader_class(req["modules"])
    reader.kernels = req["kdir"]
    knobs.cache.manager_class = reader
    knobs.compilation.always_compile = False
else:
    knobs.cache.dir = req["own_cache"]
    knobs.compilation.always_compile = True
out = {"key": fn.cache_key}
try:
    ck = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget(*req["target"]), options=options.__dict__)
    out.update(ptx=ck.asm["ptx"], hit=hits == [True], hash=ck.hash)
except Exception as exc:
    out.update(error=f"{type(exc).__name__}: {exc}"[:2000], hit=False)
sys.stdout.write(json.dumps(out))
"""


def _enc(v):
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    if isinstance(v, JITFunction):
        return {"jit": v.__qualname__}
    if isinstance(v, tl.dtype):
        return {"dtype": str(v)}
    if isinstance(v, tuple):
        return {"tuple": [_enc(x) for x in v]}
    if isinstance(v, tl.constexpr):
        return {"constexpr": _enc(v.value)}
    return v


def _compile_in(src, qualname, parts, tmp_path, kdir=None, modules=None, path="/kgym-test/candidate.py"):
    """Triton's compile of the candidate's own module, in a fresh process (tests here import Triton as its
    interpreter), for ``parts`` (constants may name the module's kernels: {"jit": qualname}): with ``kdir``, as its
    runner does after the judge's answer (the reader serving ``kdir`` alone: nothing is compiled on a hit);
    without, from scratch.  Returns {"ptx", "hit", "key", "hash"} or {"error", "hit": False}."""
    import subprocess
    import sys

    signature, constants, attrs, options = parts
    n = len(os.listdir(tmp_path))
    req = {"src": (src if isinstance(src, bytes) else src.encode()).decode("utf-8", "surrogateescape"),
           "path": path, "qualname": qualname, "signature": signature,
           "constants": [[list(k), _enc(v)] for k, v in constants.items()],
           "attrs": [[list(k), v] for k, v in attrs.items()], "options": dict(options.__dict__),
           "target": TARGET, "kdir": kdir, "modules": str(modules) if modules else None,
           "own_cache": str(tmp_path / f"own-cache-{n}")}
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(kernelcache.__file__))))
    env["TRITON_CACHE_DIR"] = str(tmp_path / f"runner-own-cache-{n}")
    out = subprocess.run([sys.executable, "-c", _SUB], input=json.dumps(req), capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def _through_cache(src, qualname, parts, svc_helper, modules, tmp_path, spec=None):
    """A candidate's runner through the cache: its request (Triton's serialised specialisation, or ``spec``), the
    judge's answer, its Triton's lookup.  Returns (service, what the runner ran, what its own module compiles
    to)."""
    svc = service_for(src, svc_helper)
    kdir = svc.ensure(qualname, spec if spec is not None else _spec(parts, "kgym_candidate." + qualname))
    served = _compile_in(src, qualname, parts, tmp_path, kdir=kdir, modules=modules) if kdir else {"hit": False}
    own = _compile_in(src, qualname, parts, tmp_path)
    assert "error" not in own, own
    return svc, served, own


ATTRS2 = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
SIG2 = {"x": "*fp32", "o": "*fp32", "n": "i32", "B": "constexpr"}


# -- 1. a class body's names: the defaults of a class-level @triton.jit helper ----------------------------------------

CLASS_DEFAULT = b'''import torch
import torch.nn as nn
import triton
import triton.language as tl

SCALE = 1.0


class ModelNew(nn.Module):
    SCALE = 3.0

    @staticmethod
    @triton.jit
    def scale(v, s=SCALE):
        return v * s

    @staticmethod
    @triton.jit
    def k(x, o, n, F: tl.constexpr, B: tl.constexpr):
        i = tl.program_id(0) * B + tl.arange(0, B)
        m = i < n
        tl.store(o + i, F(tl.load(x + i, mask=m)), mask=m)

    def forward(self, x):
        o = torch.empty_like(x)
        self.k[(triton.cdiv(x.numel(), 256),)](x, o, x.numel(), F=self.scale, B=256)
        return o
'''


def _code(ptx):
    """A PTX's instructions, without its debug sections and file directives (the worker's file is its own)."""
    body = ptx.split(".section", 1)[0]
    return [line for line in body.splitlines() if not line.lstrip().startswith((".file", ".loc", "//", "$L__"))]


def _mul_constant(ptx):
    """The float the kernel multiplies by, as PTX spells it (0f40400000 is 3.0; a multiplication by 1.0 is folded away)."""
    return "0f40400000" in ptx


def test_a_class_level_helpers_default_is_the_class_bodys(cache_dirs, helper, tmp_path):
    """A @triton.jit helper defined in a class body evaluates its defaults there, in the class's namespace: `s=SCALE`
    is the class attribute (3.0).  The skeleton keeps the class's kernels but not its other statements, so there the
    same default is the module's SCALE (1.0).  Triton's key of the helper (passed to the kernel as a constexpr
    function) is its text and first line, the same in both; the code generator calls it with its Python defaults
    (inspect.getcallargs).  So the honest module's request is served a kernel that multiplies by 1.0: equal keys,
    other code."""
    assert _accepted(CLASS_DEFAULT) == []
    real = load(CLASS_DEFAULT, "/kgym-test/classdefault.py")
    sig = {"x": "*fp32", "o": "*fp32", "n": "i32", "F": "constexpr", "B": "constexpr"}
    parts = _parts(sig, {(3,): kernel_of(real, "ModelNew.scale"), (4,): 256}, ATTRS2)
    svc, served, own = _through_cache(CLASS_DEFAULT, "ModelNew.k", parts, helper, cache_dirs, tmp_path)
    assert _mul_constant(own["ptx"])  # the module itself multiplies by 3.0
    assert not (served["hit"] and not _mul_constant(served["ptx"])), \
        "the runner was served the skeleton's kernel (s=1.0, the module's SCALE) for its own (s=3.0, the class's)"


# -- 2. the else branch of `if __name__ == "__main__":` runs, and nobody collects what it binds ----------------------

CAST = b'''import torch
import torch.nn as nn
import triton
import triton.language as tl

DT = tl.float32


@triton.jit
def k(x, o, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    tl.store(o + i, tl.load(x + i, mask=m).to(DT).to(tl.float32), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        o = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 256),)](x, o, x.numel(), B=256)
        return o
'''

ELSE_DT = CAST + b'''

if __name__ == "__main__":
    pass
else:
    DT = tl.float16
'''


def test_a_name_rebound_in_the_else_of_the_main_test_is_refused_or_makes_no_skeleton():
    """`if __name__ == "__main__": ... else: ...` -- the runner executes the module as kgym_candidate, so the else
    branch always runs.  Checker._collect skips the whole `if` (main blocks "never run"), so nothing it binds is a
    binding: DT stays a constant bound once (tl.float32), the skeleton keeps it, and the module's kernels read
    tl.float16.  A dtype global is not in Triton's key: the runner would be served the skeleton's code."""
    findings = _accepted(ELSE_DT)
    text, _ = language.kernel_skeleton(ast.parse(ELSE_DT), ELSE_DT)
    assert findings or text is None, "accepted, and the skeleton keeps DT = tl.float32 while the module runs float16"


def test_the_else_branch_rebinding_serves_other_code(cache_dirs, helper, tmp_path):
    """The same, end to end: the module's own compile rounds through fp16 (cvt.rn.f16.f32); through the cache its
    runner finds the skeleton's fp32 kernel under its own key."""
    parts = _parts(SIG2, {(3,): 256}, ATTRS2)
    svc, served, own = _through_cache(ELSE_DT, "k", parts, helper, cache_dirs, tmp_path)
    assert "cvt.rn.f16.f32" in own["ptx"]
    assert not (served["hit"] and "cvt.rn.f16.f32" not in served["ptx"]), \
        "the runner was served the skeleton's DT=tl.float32 kernel; its module reads DT=tl.float16"


ELSE_MODEL = b'''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add(x, y, o, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    tl.store(o + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)


class ModelNew(nn.Module):
    def forward(self, x, y):
        o = torch.empty_like(x)
        add[(triton.cdiv(x.numel(), 256),)](x, y, o, x.numel(), B=256)
        return o


if __name__ == "__main__":
    pass
else:
    class ModelNew(nn.Module):
        def forward(self, x, y):
            return torch.matmul(x, y)
'''


@pytest.mark.parametrize("tail", [
    None,
    b"\n\nif __name__ == '__main__':\n    pass\nelse:\n    import torch as tl\n",
])
def test_side_finding_the_else_of_the_main_test_is_checked_like_the_module(tail):
    """Side finding (the language, not the cache): the runner takes ModelNew from the module after it ran, i.e. the
    class of the else branch, whose forward is torch.matmul and no kernel at all; the checker typed the first
    ModelNew only (nor does the bindings rule see the second).  Likewise `import torch as tl` there: the checker
    reads every `tl.` of the module as triton.language."""
    src = ELSE_MODEL if tail is None else ELSE_MODEL.split(b"\n\nif __name__")[0] + tail
    m = load(src, "/kgym-test/else.py")  # as the runner's load does: __name__ is kgym_candidate
    assert "torch" in str(m.ModelNew.forward.__code__.co_names) if tail is None else m.tl is __import__("torch")
    assert _accepted(src) != [], "accepted: the module the runner runs is not the one the checker typed"


# -- 5. honest modules whose skeleton is made but cannot serve them (every request a wasted worker) -------------------

TABS = b'''import torch
import torch.nn as nn
import triton
import triton.language as tl


class ModelNew(nn.Module):
\t@staticmethod
\t@triton.jit
\tdef k(x, o, n, B: tl.constexpr):
\t\ti = tl.program_id(0) * B + tl.arange(0, B)
\t\tm = i < n
\t\ttl.store(o + i, tl.load(x + i, mask=m), mask=m)

\tdef forward(self, x):
\t\to = torch.empty_like(x)
\t\tself.k[(triton.cdiv(x.numel(), 256),)](x, o, x.numel(), B=256)
\t\treturn o
'''

IF_CONSTANT = b'''import torch
import torch.nn as nn
import triton
import triton.language as tl

if torch.version.hip is None:
    BLOCK = tl.constexpr(256)
else:
    BLOCK = tl.constexpr(128)


@triton.jit
def k(x, o, n):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(o + i, tl.load(x + i, mask=m), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        o = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 256),)](x, o, x.numel())
        return o
'''


@pytest.mark.parametrize("src,qualname", [(TABS, "ModelNew.k"), (IF_CONSTANT, "k")], ids=["tab-indented-class",
                                                                                           "constant-chosen-by-if"])
def test_an_accepted_module_has_no_skeleton_or_one_that_keeps_its_keys(src, qualname):
    """A class indented with tabs: the skeleton writes its decorator line with `col_offset` spaces (one space for a
    tab) above the def's tab: TabError when the worker runs it, for every kernel of the module, on every request of
    every twin (a worker's error is not remembered as a compile error is).  A kernel constant chosen by a
    module-level `if` (the language allows constants there, and _kernel_constant counts them): the skeleton keeps
    no `if`, so BLOCK is missing there (NameError at compile; another key).  Either way the skeleton should be
    refused (no request is made) or keep the module's keys."""
    assert _accepted(src) == []
    text, kernels = language.kernel_skeleton(ast.parse(src), src)
    if text is None:
        return
    real = load(src, "/kgym-test/honest.py")
    try:
        sk = skeleton_module(text)
    except SyntaxError as exc:  # TabError included
        pytest.fail(f"the skeleton does not even compile: {exc}")
    for q in kernels:
        assert kernel_of(real, q).cache_key == kernel_of(sk, q).cache_key, q


# -- 3. what the judge files from a worker's folder ----------------------------------------------------------------

def test_the_judge_does_not_file_through_a_link_the_worker_left(tmp_path):
    """The worker (the runner's uid, Landlock: it may make anything beneath its folder, symbolic links included)
    names a key; the judge (root) then reads ``out/cache/<key>/`` and copies what its group file names into the
    namespace, 0644.  Only the last component is opened with O_NOFOLLOW (_read) and lstat-ed (``<key>``): a worker
    that made ``out/cache`` a link has the judge read, as root, a directory of its choosing -- e.g. one its own
    runner wrote in its workdir (a cubin of its own making, filed as the judge's compile, served to every twin that
    asks for that specialisation), or files only root may read, which its runner then reads from the namespace.
    Needs a worker that runs more than checked text (the docs' "a worker subverted through a hole in the
    language could spoil only its own namespace"): the judge should never follow a link out of the folder."""
    key = "A" * 52
    elsewhere = tmp_path / "runner-workdir" / "planted"
    (elsewhere / key).mkdir(parents=True)
    (elsewhere / key / "k.cubin").write_bytes(b"\x7fELF the attacker's own cubin")
    (elsewhere / key / "k.json").write_text("{}")
    (elsewhere / key / "__grp__k.json").write_text(json.dumps({"child_paths": {"k.cubin": "x", "k.json": "y"}}))
    out = tmp_path / "work"
    out.mkdir()
    os.symlink(elsewhere, out / "cache")  # what the worker leaves: a link, not a folder
    nsdir = tmp_path / "ns"
    nsdir.mkdir()
    try:
        kernelcache._file(str(out), key, str(nsdir), "d" * 40)
    except (ValueError, OSError):
        pass
    filed = nsdir / ("d" * 40) / key / "k.cubin"
    assert not filed.exists(), "the judge filed files from outside the worker's folder (followed out/cache)"


def test_the_worker_does_not_open_its_log_through_a_link(tmp_path, helper):
    """_worker opens ``out/worker.log`` (O_CREAT|O_TRUNC, no O_NOFOLLOW, no O_EXCL) before _lockdown, i.e. still as
    the judge's uid (root where kgym drops the worker to the runner's), in a folder the judge has just chowned to
    the runner's uid; then everything the compile prints (tl.static_print: the candidate's text) goes there.  A
    process of that uid that plants ``worker.log`` as a link in that window has root truncate and write any file.
    (Here: the link is made before the request; the worker follows it.)"""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "work"
    out.mkdir()
    os.symlink(victim, out / "worker.log")
    helper.compile({"skeleton": "print('written by the worker')\n", "qualname": "k", "spec": "{}", "target": TARGET,
                    "out": str(out), "uid": None}, 30)
    assert victim.read_text() == "precious\n", f"the worker wrote through the link: {victim.read_text()!r}"


# -- 4. a twin fills the namespace it shares with honest candidates --------------------------------------------------

def test_one_twin_cannot_fill_the_namespace_its_honest_twins_share(cache_dirs, helper, monkeypatch):
    """A namespace is every evaluation's of one skeleton, and it holds at most MAX_ENTRIES entries, ever (entries
    never expire; a namespace in use is never evicted).  One evaluation may make MAX_REQUESTS requests -- as many
    as MAX_ENTRIES (64): a twin whose forward launches its kernels with 64 different free options or constexpr
    values (its own word, each a cheap compile within its 60 s) fills the namespace, and from then on every honest
    twin's request is refused ("the namespace is full") for as long as the group runs.  (MAX_ENTRIES is made 4
    here, and MAX_REQUESTS with it, to keep the test short.)"""
    monkeypatch.setattr(kernelcache, "MAX_ENTRIES", 4)
    monkeypatch.setattr(kernelcache, "MAX_REQUESTS", 4)
    from test_kernelcache import ADD, spec_for

    real = load(ADD, "/kgym-test/twin.py")
    attacker = service_for(ADD, helper)
    for warps in (1, 2, 8, 16):  # any specialisations but the honest one
        assert attacker.ensure("add", spec_for(kernel_of(real, "add"), num_warps=warps)[0]), attacker.reasons
    honest = service_for(ADD, helper)
    assert honest.ns == attacker.ns
    assert honest.ensure("add", spec_for(kernel_of(real, "add"), num_warps=4)[0]), \
        f"the honest twin's request was refused: {honest.reasons}"


# -- 5b. the JSON round trip of a specialisation ------------------------------------------------------------------

TUPLE_CONSTANT = b'''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k(x, o, n, SHAPE: tl.constexpr):
    i = tl.program_id(0) * SHAPE[0] + tl.arange(0, SHAPE[0])
    m = i < n
    tl.store(o + i, tl.load(x + i, mask=m), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        o = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 256),)](x, o, x.numel(), SHAPE=(256, 1))
        return o
'''


def test_a_tuple_constexpr_is_served(cache_dirs, helper, tmp_path):
    """A tuple given to a constexpr parameter (accepted: SHAPE=(256, 1)) is hashed by Triton as str((256, 1)); JSON
    makes it a list and compile_entry hands the worker [256, 1] (it turns lists back into tuples in the signature
    and options, not in constants): the worker's key is Triton's of "[256, 1]", the runner's of "(256, 1)", so the
    honest runner never finds what its request compiled (a wasted worker compile per request, then its own)."""
    assert _accepted(TUPLE_CONSTANT) == []
    parts = _parts({"x": "*fp32", "o": "*fp32", "n": "i32", "SHAPE": "constexpr"}, {(3,): (256, 1)}, ATTRS2)
    svc, served, own = _through_cache(TUPLE_CONSTANT, "k", parts, helper, cache_dirs, tmp_path)
    assert svc.facts["compiled"] == 1, svc.reasons
    assert "error" not in served, served
    assert served["hit"], "compiled by the worker under another key: the runner compiled it again"


def test_a_burst_of_new_skeletons_does_not_turn_the_cache_off(cache_dirs, helper, monkeypatch):
    """MAX_NAMESPACES (512) namespaces used within IDLE_S (10 minutes) -- ~0.9 new skeletons a second on the machine,
    a GRPO run's ordinary load on 8 GPUs, or a stream of candidates made to differ -- and every new skeleton is
    refused ("the cache is full") until one has been idle for 10 minutes: nothing is ever evicted by age or size
    but those.  (MAX_NAMESPACES is made 3 here.)"""
    monkeypatch.setattr(kernelcache, "MAX_NAMESPACES", 3)
    from test_kernelcache import ADD, spec_for

    for i in range(3):
        src = ADD.replace(b"BLOCK = tl.constexpr(256)", b"BLOCK = tl.constexpr(%d)" % (256 << i))
        svc = service_for(src, helper)
        assert svc.ensure("add", spec_for(kernel_of(load(src, f"/kgym-test/n{i}.py"), "add"))[0]), svc.reasons
    fresh = service_for(ADD.replace(b"DT = tl.float32", b"DT = tl.float16"), helper)
    kdir = fresh.ensure("add", spec_for(kernel_of(load(ADD, "/kgym-test/fresh.py"), "add"))[0])
    assert kdir, f"a new skeleton was refused: {fresh.reasons}"


# -- what held (regression fixtures) ----------------------------------------------------------------------------------

def test_held_a_twin_whose_module_runs_other_globals_cannot_change_what_an_honest_twin_is_served(
        cache_dirs, helper, tmp_path):
    """A twin whose module runs other values than its skeleton's (ELSE_DT: DT rebound to float16 in the else of the
    main test) gets no skeleton at all now (and the language refuses it); the honest module it would have shared a
    skeleton with is served exactly what its own module compiles to."""
    honest = CAST + b"\n" * (len(ELSE_DT.splitlines()) - len(CAST.splitlines()))
    assert language.kernel_skeleton(ast.parse(ELSE_DT), ELSE_DT)[0] is None
    parts = _parts(SIG2, {(3,): 128}, ATTRS2)
    first = service_for(honest, helper)
    assert first.ensure("k", _spec(parts)) and first.facts["compiled"] == 1, first.reasons
    svc, served, own = _through_cache(honest, "k", parts, helper, cache_dirs, tmp_path)
    assert svc.facts["hits"] == 1 and served["hit"], (svc.facts, served.get("error"))
    assert _code(served["ptx"]) == _code(own["ptx"])  # the same instructions (the debug file names aside)


def test_held_every_name_an_honest_kernel_reads_is_the_same_object_in_its_skeleton():
    """Beyond Triton's key (test_kernelcache compares keys and recorded globals): every global name a kernel's text
    reads, and its Python defaults (what the code generator uses for a callee), compared between the module and
    its skeleton -- dtypes, modules and builtins included, which Triton leaves out of its key -- over the honest
    corpus and the examples' modules (4706 names when written, none different)."""
    import glob

    from triton.runtime.jit import JITFunction

    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    files = sorted(glob.glob(os.path.join(repo, "tests", "fixtures", "honest_probe", "*.py"))) + \
        sorted(p for p in glob.glob(os.path.join(repo, "examples", "*", "*.py")) if not p.endswith("task.py"))

    def same(a, b):
        if isinstance(a, JITFunction) or isinstance(b, JITFunction):
            return isinstance(a, JITFunction) and isinstance(b, JITFunction) and a.cache_key == b.cache_key
        if isinstance(a, tuple) and isinstance(b, tuple):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        return a is b or (type(a) is type(b) and repr(a) == repr(b))

    compared = 0
    for path, real, sk, kernels in accepted_modules(files):
        if real is None:
            continue
        for q in kernels:
            a, b = kernel_of(real, q), kernel_of(sk, q)
            for name in {n.id for n in ast.walk(a.parse()) if isinstance(n, ast.Name)}:
                assert same(a.__globals__.get(name), b.__globals__.get(name)), (path, q, name)
                compared += 1
            assert same(a.fn.__defaults__ or (), b.fn.__defaults__ or ()), (path, q)
    assert compared > 4000, compared
