"""The trusted compile cache (kgym_harness.judge.kernelcache, language.kernel_skeleton, tritoncache's kernel reader).

What is asserted, on the CPU (Triton compiles for an H100 target without a GPU: LLVM and ptxas run here):
  - the skeleton of every honest module the language accepts gives each kernel Triton's very cache key (its text,
    first line, callees and constexpr globals) and the same globals as the module itself;
  - statements the skeleton cannot keep exactly make no skeleton (a miss, never a different kernel);
  - the judge's service compiles a request once, in a locked-down worker, files it, and a runner's Triton then
    finds it (a cache hit, the same cubin) through the reader, in that namespace only;
  - requests that are not a kernel of the skeleton or not Triton's specialisation are refused, and a worker made to
    write outside its folder cannot.
"""

import ast
import glob
import json
import os
import threading
import time
import types

import pytest

from kgym_harness.judge import kernelcache, language
from kgym_harness.shared import tritoncache
from kgym_harness.shared.source import lines as source_lines

@pytest.fixture(autouse=True)
def compiled_not_interpreted():
    """These tests need Triton's compiler (tests elsewhere run kernels in its interpreter: conftest)."""
    from triton import knobs

    with knobs.runtime.scope():
        knobs.runtime.interpret = False
        yield


HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CORPUS = sorted(glob.glob(os.path.join(REPO, "tests", "fixtures", "honest_probe", "*.py")))

ADD = b'''import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = tl.constexpr(256)
DT = tl.float32


@triton.jit
def add(x, y, o, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    s = tl.load(x + i, mask=m) + tl.load(y + i, mask=m)
    tl.store(o + i, s.to(DT), mask=m)


class ModelNew(nn.Module):
    def forward(self, x, y):
        o = torch.empty_like(x)
        add[(triton.cdiv(x.numel(), BLOCK),)](x, y, o, x.numel(), B=BLOCK)
        return o
'''


def load(data, path, extra=None):
    """A module from ``data`` as the runner makes one (runner.load): compiled under ``path``, linecache seeded."""
    import linecache

    data = data if isinstance(data, bytes) else data.encode()
    linecache.cache[path] = (len(data), None, source_lines(data), path)
    m = types.ModuleType("kgym_candidate")
    m.__file__ = path
    m.__dict__.update(extra or {})
    exec(compile(data, path, "exec", dont_inherit=True), m.__dict__)
    return m


def kernel_of(module, qualname):
    from triton.runtime.jit import JITFunction

    obj = module
    for part in qualname.split("."):
        obj = vars(obj)[part]
    if isinstance(obj, staticmethod):
        obj = obj.__func__
    while not isinstance(obj, JITFunction) and hasattr(obj, "fn"):
        obj = obj.fn  # autotune, heuristics
    return obj


def skeleton_module(text, path="/kgym-test/skeleton.py"):
    import triton

    return load(text, path, {"__kgym_jit__": triton.jit})


# -- the skeleton --------------------------------------------------------------------------------------------------

def accepted_modules(files):
    """(path, the module, its skeleton's module, the skeleton's kernels) for every file the language accepts with no
    finding (each must have a skeleton), or (path, None, None, None) for one that asks the absent GPU at import."""
    for path in files:
        data = open(path, "rb").read()
        tree = ast.parse(data)
        if language.check(tree, source=data):
            continue
        text, kernels = language.kernel_skeleton(tree, data)
        assert text is not None, (path, kernels)
        assert len(text.splitlines()) <= len(data.splitlines())
        try:
            real = load(data, "/kgym-test/candidate.py")
        except RuntimeError:  # the runner's business
            yield path, None, None, None
            continue
        yield path, real, skeleton_module(text), kernels


def test_every_accepted_honest_module_gives_its_kernels_the_same_triton_key():
    compared = skipped = 0
    for path, real, sk, kernels in accepted_modules(CORPUS):
        if real is None:
            skipped += 1
            continue
        for q in kernels:
            a, b = kernel_of(real, q), kernel_of(sk, q)
            assert a.cache_key == b.cache_key, (path, q)
            assert a.starting_line_number == b.starting_line_number, (path, q)
            assert [(n, v) for (n, _), (v, _) in a.used_global_vals.items()] == \
                [(n, v) for (n, _), (v, _) in b.used_global_vals.items()], (path, q)
            compared += 1
    assert compared >= 250 and skipped <= 2, (compared, skipped)


def test_the_skeleton_keeps_only_imports_constants_and_kernels():
    text, kernels = language.kernel_skeleton(ast.parse(ADD), ADD)
    assert kernels == ["add"]
    lines = text.splitlines()
    assert len(lines) == len(ADD.decode().splitlines())  # every line where it was (Triton hashes line numbers)
    assert all(not line for line in lines[17:])  # ModelNew's lines are blank
    assert "class ModelNew" not in text and "forward" not in text
    assert lines[9] == "@__kgym_jit__(**{})" and lines[10].startswith("def add(")


def test_class_level_kernels_and_jit_options_are_kept_under_their_names():
    src = b'''import triton
import triton.language as tl
import torch.nn as nn


class ModelNew(nn.Module):
    @staticmethod
    @triton.jit(do_not_specialize=["n"])
    def k(x, n, B: tl.constexpr):
        tl.store(x + tl.arange(0, B), tl.zeros([B], tl.float32))

    def forward(self, x):
        self.k[(1,)](x, x.numel(), B=16)
        return x
'''
    text, kernels = language.kernel_skeleton(ast.parse(src), src)
    assert kernels == ["ModelNew.k"], text
    real, sk = load(src, "/kgym-test/c.py"), skeleton_module(text)
    a, b = kernel_of(real, "ModelNew.k"), kernel_of(sk, "ModelNew.k")
    assert a.cache_key == b.cache_key and b.do_not_specialize == ["n"]


@pytest.mark.parametrize("src,why", [
    (b"import triton\nimport triton.language as tl\nN = 4\nif True:\n    N = 8\n"
     b"@triton.jit\ndef k(x):\n    tl.store(x, N)\n", "bound elsewhere"),
    (b"import triton\nimport triton.language as tl\nN = 4; M = 2\n"
     b"@triton.jit\ndef k(x):\n    tl.store(x, N)\n", "shares its line"),
    (b"import triton\nimport triton.language as tl\nF = True\n"
     b"@triton.jit(noinline=F)\ndef k(x):\n    tl.store(x, 1)\n", "not a literal"),
])
def test_what_cannot_be_kept_exactly_makes_no_skeleton(src, why):
    text, reason = language.kernel_skeleton(ast.parse(src), src)
    assert text is None and why in reason, reason


def test_a_kernel_nested_in_a_function_is_left_out():
    src = b'''import triton
import triton.language as tl


def make():
    @triton.jit
    def inner(x):
        tl.store(x, 1)
    return inner
'''
    text, kernels = language.kernel_skeleton(ast.parse(src), src)
    assert kernels == [] and "inner" not in text


# -- the service, the worker, the reader ---------------------------------------------------------------------------

TARGET = ["cuda", 90, 32]


@pytest.fixture
def cache_dirs(tmp_path, monkeypatch):
    """The trusted modules directory in tmp_path; Triton's cache knobs restored afterwards."""
    from triton import knobs

    modules = tmp_path / "modules"
    monkeypatch.setattr(tritoncache, "_resolved", None)
    monkeypatch.setattr(tritoncache, "_location", lambda: str(modules))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "own-cache"))
    monkeypatch.setattr(knobs.cache, "manager_class", None)
    return modules


@pytest.fixture
def public_cache_private_tmp(tmp_path, monkeypatch):
    """cache_dirs as production has it where another uid must reach the cache (the trusted modules directory
    beneath directories every uid traverses, as /var/cache/kgym: not pytest's 0700 tmp_path), and a private (0700)
    TMPDIR for the judge, as bench/fleet.sh gives the fleet's processes.  Yields the modules directory's parent."""
    import shutil
    import tempfile

    from triton import knobs

    public = tempfile.mkdtemp(prefix="kgym-test-modules-", dir="/tmp")
    os.chmod(public, 0o755)
    monkeypatch.setattr(tritoncache, "_resolved", None)
    monkeypatch.setattr(tritoncache, "_location", lambda: os.path.join(public, "modules"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "own-cache"))
    monkeypatch.setattr(knobs.cache, "manager_class", None)
    private = tmp_path / "private-tmp"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", None)
    yield public
    shutil.rmtree(public, ignore_errors=True)


def spec_for(fn, n_arg="i32", block=256, num_warps=4):
    """Triton's serialised specialisation of ``fn`` (as its jit_cache_hook gets it) for the ADD kernel."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import serialize_specialization_data

    backend = make_backend(GPUTarget(*TARGET))
    options = backend.parse_options({"num_warps": num_warps})
    signature = {"x": "*fp32", "y": "*fp32", "o": "*fp32", "n": n_arg, "B": "constexpr"}
    constants = {(4,): block}
    attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]], (2,): [["tt.divisibility", 16]]}
    return serialize_specialization_data("kgym_candidate.add", signature, constants, attrs, options, "key"), \
        (signature, constants, attrs, options)


def parts_for(signature, constants, attrs, num_warps=4, **opts):
    """(signature, constants, attrs, options) of a specialisation, the options parsed by the H100 backend."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    options = make_backend(GPUTarget(*TARGET)).parse_options(dict(num_warps=num_warps, **opts))
    return signature, constants, attrs, options


def spec_of(parts, name="kgym_candidate.k"):
    """The specialisation as the runner's hook sends it (runner.py installs tritoncache.tolerant_serializer)."""
    from triton.runtime import jit

    signature, constants, attrs, options = parts
    ser = tritoncache.tolerant_serializer(jit.serialize_specialization_data)
    return ser(name, signature, constants, attrs, options, "key")


def runner_compile(fn, parts, kdir, modules):
    """What the runner's Triton does after the judge's answer: compile with the reader in place, serving ``kdir``.
    Returns (compiled kernel, whether it was a cache hit)."""
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature, constants, attrs, options = parts
    hits = []
    reader = tritoncache.reader_class(str(modules))
    reader.kernels = kdir
    with knobs.cache.scope(), knobs.compilation.scope():
        knobs.cache.manager_class = reader
        knobs.compilation.listener = lambda **kw: hits.append(kw["cache_hit"])
        ck = triton.compile(ASTSource(fn, signature, constants, attrs), target=GPUTarget(*TARGET),
                            options=options.__dict__)
    return ck, hits == [True]


def service_for(src, helper):
    text, kernels = language.kernel_skeleton(ast.parse(src), src)
    svc = kernelcache.Service(helper)
    svc.target = list(TARGET)
    svc.begin(text, kernels, None)
    return svc


@pytest.fixture(scope="module")
def helper():
    """One helper for a module's tests (a fresh interpreter that warms Triton's backend: ~2 s to start); it keeps
    nothing between requests, which is what test_the_helper_never_gets_a_candidates_bytes checks."""
    h = kernelcache.start(fresh=True)
    assert h is not None
    yield h
    h.sock.close()
    os.waitpid(h.pid, 0)


def test_a_request_is_compiled_once_and_the_runner_finds_it(cache_dirs, helper):
    svc = service_for(ADD, helper)
    real = load(ADD, "/kgym-test/candidate.py")
    spec, parts = spec_for(kernel_of(real, "add"))
    kdir = svc.ensure("add", spec)
    assert kdir and os.path.dirname(os.path.dirname(kdir)) == str(cache_dirs / "kernels"), svc.reasons
    assert svc.facts["compiled"] == 1 and svc.facts["failed"] == 0
    assert svc.ensure("add", spec) == kdir and svc.facts["hits"] == 1 and svc.facts["compiled"] == 1
    # Filed as the judge left it: a 0755 key directory of 0644 files, the group naming them where they are.
    (key,) = [n for n in os.listdir(kdir) if not n.startswith(".")]
    for name in os.listdir(os.path.join(kdir, key)):
        assert oct(os.stat(os.path.join(kdir, key, name)).st_mode & 0o777) == "0o644"
    ck, hit = runner_compile(kernel_of(real, "add"), parts, kdir, cache_dirs)
    assert hit, "the runner's Triton compiled instead of finding the judge's entry"
    with open(os.path.join(kdir, key, "add.cubin"), "rb") as f:
        assert ck.asm["cubin"] == f.read()
    # Without the namespace the reader serves nothing, not even the same entry planted in the runner's own cache
    # (Triton's cache manager, where its always_compile is off: the runner's candidate could have written it).
    import shutil

    own = os.environ["TRITON_CACHE_DIR"]
    shutil.copytree(os.path.join(kdir, key), os.path.join(own, key), dirs_exist_ok=True)
    reader = tritoncache.reader_class(str(cache_dirs))
    assert reader(key).get_group("add.json") is None
    reader.kernels = kdir
    assert set(reader(key).get_group("add.json")) == {n for n in os.listdir(os.path.join(kdir, key))
                                                       if not n.startswith("__grp__")}


def test_another_skeleton_has_its_own_namespace(cache_dirs, helper):
    """A module-level dtype is not in Triton's key (only constexpr globals are): two modules differing in it
    alone have the same key, so only the namespace keeps one's kernel from the other's runner."""
    other = ADD.replace(b"DT = tl.float32", b"DT = tl.float16")
    a, b = service_for(ADD, helper), service_for(other, helper)
    assert a.ns != b.ns
    ra, rb = load(ADD, "/kgym-test/a.py"), load(other, "/kgym-test/b.py")
    spec_a, parts_a = spec_for(kernel_of(ra, "add"))
    spec_b, parts_b = spec_for(kernel_of(rb, "add"))
    kdir_a, kdir_b = a.ensure("add", spec_a), b.ensure("add", spec_b)
    assert kdir_a != kdir_b and a.facts["compiled"] == b.facts["compiled"] == 1
    ck_b, hit = runner_compile(kernel_of(rb, "add"), parts_b, kdir_b, cache_dirs)
    assert hit and "f16" in ck_b.asm["ptx"]
    ck_a, hit = runner_compile(kernel_of(ra, "add"), parts_a, kdir_a, cache_dirs)
    assert hit and "cvt.rn.f16" not in ck_a.asm["ptx"]


@pytest.mark.parametrize("qualname,spec,why", [
    ("ModelNew", "{}", "not a kernel"),
    ("os.system", "{}", "not a kernel"),
    ("add", "[1]", "not Triton's"),
    ("add", "x" * (kernelcache.MAX_SPEC + 1), "64 KiB"),
    ("add", None, "64 KiB"),
], ids=["a-class", "not-in-the-skeleton", "not-a-spec", "too-long", "none"])
def test_requests_that_are_not_the_skeletons_are_refused(cache_dirs, helper, qualname, spec, why):
    svc = service_for(ADD, helper)
    assert svc.ensure(qualname, spec) is None
    assert svc.facts["refused"] == 1 and any(why in r for r in svc.reasons), svc.reasons
    assert not os.path.exists(cache_dirs / "kernels" / svc.ns)


def test_a_compile_error_is_remembered_for_the_twins(cache_dirs, helper):
    bad = ADD.replace(b"s.to(DT)", b"s.to(DT) + tl.arange(0, 2 * B)")  # shapes B and 2B: Triton refuses
    svc = service_for(bad, helper)
    spec, _ = spec_for(kernel_of(load(bad, "/kgym-test/bad.py"), "add"))
    assert svc.ensure("add", spec) is None and svc.facts["failed"] == 1
    assert "CompilationError" in svc.reasons[0]
    twin = service_for(bad, helper)
    assert twin.ensure("add", spec) is None and "failed" in twin.reasons[0]


def test_concurrent_twins_wait_for_one_compile(cache_dirs):
    helpers = [kernelcache.start(fresh=True) for _ in range(2)]
    try:
        svcs = [service_for(ADD, h) for h in helpers]
        spec, _ = spec_for(kernel_of(load(ADD, "/kgym-test/t.py"), "add"), block=512)
        out = [None, None]
        threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, svcs[i].ensure("add", spec)))
                   for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert out[0] and out[0] == out[1]
        assert sorted(s.facts["compiled"] for s in svcs) == [0, 1]
        assert sum(s.facts["joined"] + s.facts["hits"] for s in svcs) == 1
    finally:
        for h in helpers:
            h.sock.close()
            os.waitpid(h.pid, 0)


def test_a_kernel_given_as_a_constant_is_named_not_a_failed_launch(cache_dirs, helper):
    """Triton's own serialiser raised for a kernel passed as a constexpr argument, failing the launch wherever a
    jit_cache_hook is installed; the runner's names it, and the worker finds it in the skeleton."""
    from triton.runtime import jit

    src = ADD.replace(b"class ModelNew", b"@triton.jit\ndef twice(v):\n    return v * 2\n\n\nclass ModelNew")
    src = src.replace(b"def add(x, y, o, n, B: tl.constexpr):", b"def add(x, y, o, n, B: tl.constexpr, F: tl.constexpr):")
    src = src.replace(b"s.to(DT)", b"F(s).to(DT)")
    real = load(src, "/kgym-test/f.py")
    ser = tritoncache.tolerant_serializer(jit.serialize_specialization_data)
    _, (signature, constants, attrs, options) = spec_for(kernel_of(real, "add"))
    signature = dict(signature, F="constexpr")
    constants = {**constants, (5,): kernel_of(real, "twice")}
    spec = ser("kgym_candidate.add", signature, constants, attrs, options, "key")
    assert json.loads(spec)["constant_vals"][1] == {"kgym_jit": "twice"}
    svc = service_for(src, helper)
    kdir = svc.ensure("add", spec)
    assert kdir, svc.reasons
    _, hit = runner_compile(kernel_of(real, "add"), (signature, constants, attrs, options), kdir, cache_dirs)
    assert hit
    assert ser("n", {}, {(0,): object()}, {}, options, "k") is None  # anything else JSON cannot hold: no request


def test_a_worker_cannot_write_outside_its_folder(tmp_path, cache_dirs, helper):
    """A skeleton is made by the judge from checked statements; were the language to let a statement through that
    writes a file, the worker's Landlock keeps it inside the worker's own folder."""
    target = tmp_path / "planted"
    skeleton = f"open({str(target)!r}, 'w').write('x')\n"
    out = tmp_path / "work"
    out.mkdir()
    answer = helper.compile({"skeleton": skeleton, "qualname": "k", "spec": "{}", "target": TARGET,
                             "out": str(out), "uid": None}, 30)
    assert "error" in answer and not target.exists(), answer
    assert "Permission" in answer["error"] or "denied" in answer["error"], answer


@pytest.mark.skipif(os.geteuid() != 0, reason="a private tmpfs needs a mount namespace (root)")
def test_what_a_worker_writes_never_reaches_the_disk(tmp_path, helper):
    """Its folder is a private tmpfs of WORK_BYTES in the worker's own mount namespace: a worker that writes without
    end (here 8 MiB files, under RLIMIT_FSIZE each, past WORK_BYTES in all) meets ENOSPC, and nothing of it is on
    the host's disk, during or after (its log is in the tmpfs too: a descriptor opened on the disk before the mount
    stayed there, test_kernelcache_redteam4)."""
    n = kernelcache.WORK_BYTES // (8 << 20) + 8
    skeleton = ("import os\n"
                f"for i in range({n}):\n"
                "    open(os.path.join(os.environ['HOME'], f'f{i}'), 'wb').write(b'x' * (8 << 20))\n")
    out = tmp_path / "work"
    out.mkdir()
    answer = helper.compile({"skeleton": skeleton, "qualname": "k", "spec": "{}", "target": TARGET,
                             "out": str(out), "uid": None}, 60)
    assert "No space left" in answer.get("error", ""), answer
    assert os.listdir(out) == [], os.listdir(out)


def _drop_possible(uid):
    from kgym_harness.runner import sandbox

    return os.geteuid() == 0 and all(sandbox._reachable(p, uid, uid) for p in sandbox.python_paths())


@pytest.mark.skipif(not _drop_possible(60124), reason="root, and Python readable by another uid (a GPU machine's /usr)")
def test_a_worker_dropped_to_a_runner_uid_compiles_and_files(public_cache_private_tmp, helper):
    """The production path whole: a private TMPDIR, the worker dropped to the runner's uid in its PID namespace,
    tmpfs and Landlock, the entry sent back and filed, no warning (every protection in place)."""
    svc = service_for(ADD, helper)
    svc.uid = 60124
    spec, _ = spec_for(kernel_of(load(ADD, "/kgym-test/dropped.py"), "add"), block=2048)
    kdir = svc.ensure("add", spec)
    assert kdir and svc.facts["compiled"] == 1 and svc.reasons == [], svc.reasons


@pytest.mark.skipif(os.geteuid() != 0 or _drop_possible(60125), reason="a root judge whose uid drop is refused")
def test_a_worker_that_cannot_lock_down_leaves_no_failure_for_twins(cache_dirs, helper):
    """Where the drop to the runner's uid is refused (this machine: Python under a 0700 /root), the worker does not
    compile; that is the machine's state, not a fact of the request: no .fail- marker, so a judge that can compile
    it (another machine sharing nothing, or this one fixed) is not told it failed before."""
    svc = service_for(ADD, helper)
    svc.uid = 60125
    spec, _ = spec_for(kernel_of(load(ADD, "/kgym-test/nolock.py"), "add"), block=4096)
    assert svc.ensure("add", spec) is None and svc.facts["failed"] == 1, svc.reasons
    assert "locked down" in svc.reasons[0], svc.reasons
    nsdir = os.path.join(str(cache_dirs / "kernels"), svc.ns)
    assert not [n for n in os.listdir(nsdir) if n.startswith(".fail-")], os.listdir(nsdir)


def test_the_entry_the_worker_sends_is_checked(tmp_path):
    """The worker reads its entry in its own folder and sends it; the judge believes none of it: names that are not
    plain, files past the caps, no group file or one naming files the entry lacks, text that is not base64."""
    import base64

    key = "A" * 52
    nsdir = tmp_path / "ns"
    nsdir.mkdir()
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    group = b64(json.dumps({"child_paths": {"k.cubin": "/x/k.cubin"}}).encode())
    good = {"__grp__k.json": group, "k.cubin": b64(b"\x7fELF")}
    assert kernelcache._file(key, dict(good), str(nsdir), "d0") == key
    assert (nsdir / "d0" / key / "k.cubin").read_bytes() == b"\x7fELF"
    bad = [("not a key", good), (key, {}), (key, dict(good, **{"../x": b64(b"1")})),
           (key, dict(good, **{".hidden": b64(b"1")})), (key, dict(good, lock=b64(b"1"))),
           (key, dict(good, **{"k.ptx": "not base64!"})),
           (key, dict(good, **{f"f{i}": b64(b"1") for i in range(kernelcache.MAX_FILES)})),
           (key, dict(good, big=b64(b"x" * (kernelcache.MAX_BYTES + 1)))),
           (key, {"k.cubin": good["k.cubin"]}),
           (key, {"__grp__k.json": group}),
           (key, dict(good, **{"__grp__j.json": group}))]
    for i, (k, files) in enumerate(bad):
        with pytest.raises(ValueError):
            kernelcache._file(k, files, str(nsdir), f"d{i + 1}")
        assert not (nsdir / f"d{i + 1}").exists()


@pytest.mark.parametrize("name", ["../x", ".hidden", "a/b"])
def test_the_reader_serves_no_name_outside_the_entry(tmp_path, name):
    kdir = tmp_path / "ns"
    (kdir / "KEY").mkdir(parents=True)
    (kdir / "KEY" / "k.json").write_text("{}")
    (kdir / "KEY" / "__grp__k.json").write_text(json.dumps({"child_paths": {"k.json": "/x", name: "/y"}}))
    owners = {os.getuid()}
    assert tritoncache.kernel_group(str(kdir), "KEY", "k.json", owners) is None
    (kdir / "KEY" / "__grp__k.json").write_text(json.dumps({"child_paths": {"k.json": "/elsewhere/k.json"}}))
    assert tritoncache.kernel_group(str(kdir), "KEY", "k.json", owners) == {"k.json": str(kdir / "KEY" / "k.json")}
    os.chmod(kdir / "KEY" / "k.json", 0o666)
    assert tritoncache.kernel_group(str(kdir), "KEY", "k.json", owners) is None


@pytest.mark.parametrize("option,value", [
    ("ir_override", "/tmp/planted.ttgir"),           # IR read from a path instead of compiled from the kernel
    ("extern_libs", [["libdevice", "/tmp/evil.bc"]]),  # bitcode linked into the kernel
    ("default_dot_input_precision", "ieee-but-not"),
    ("not_an_option", 1),
])
def test_options_a_candidate_cannot_choose_are_refused(cache_dirs, helper, option, value):
    svc = service_for(ADD, helper)
    spec, _ = spec_for(kernel_of(load(ADD, "/kgym-test/o.py"), "add"))
    obj = json.loads(spec)
    obj["options"][option] = value
    assert svc.ensure("add", json.dumps(obj)) is None
    assert svc.facts["refused"] == 1 and "option" in svc.reasons[0], svc.reasons
    obj["options"]["num_warps"] = 8  # a free option alone is the candidate's choice
    del obj["options"][option]
    assert svc.ensure("add", json.dumps(obj)) and svc.facts["compiled"] == 1, svc.reasons


def test_an_evaluations_compiles_have_a_budget(cache_dirs, helper):
    svc = service_for(ADD, helper)
    spec, _ = spec_for(kernel_of(load(ADD, "/kgym-test/b.py"), "add"))
    svc.facts["wait_ms"] = kernelcache.EVALUATION_BUDGET_S * 1000
    assert svc.ensure("add", spec) is None and "spent" in svc.reasons[0]


def test_the_workers_folder_is_one_its_uid_reaches_whatever_tmpdir_is(public_cache_private_tmp, monkeypatch,
                                                                      helper):
    """The judge's TMPDIR may be private (bench/fleet.sh gives the fleet's processes a 0700 one): a worker folder
    made there could not be reached by the worker once it dropped to the runner's uid, and on a GPU machine every
    compile of the fleet failed (the runners compiled for themselves).  The folder lies beneath the cache's root."""
    from kgym_harness.runner import sandbox

    private = os.environ["TMPDIR"]
    uid = 60123
    seen = []
    compile_ = helper.compile

    def spy(request, budget):
        seen.append((request["out"], os.stat(request["out"]).st_uid,
                     sandbox._reachable(request["out"], uid, uid)))
        # The compile itself as the judge's uid: where this machine's Python is unreadable by other uids the
        # drop is refused, and a root worker told to drop does not compile (test_kernelcache_redteam3).
        return compile_(dict(request, uid=None), budget)

    monkeypatch.setattr(helper, "compile", spy)
    svc = service_for(ADD, helper)
    svc.uid = uid
    spec, _ = spec_for(kernel_of(load(ADD, "/kgym-test/tmpdir.py"), "add"), block=512)
    assert svc.ensure("add", spec) and svc.facts["compiled"] == 1, svc.reasons
    ((out, owner, reachable),) = seen
    assert reachable, f"uid {uid} cannot reach the worker's folder {out}"
    assert not out.startswith(str(private)) and (os.geteuid() != 0 or owner == uid)
    assert not os.path.exists(out), "the worker's folder outlived its compile"
    # A folder left by a judge killed mid-compile goes with the next compile; a recent one stays.
    work = os.path.dirname(out)
    old = os.path.join(work, "compile-old")
    os.mkdir(old)
    os.utime(old, (0, time.time() - kernelcache.STALE_WORK_S - 60))  # its mtime is not what dates it
    old_named = os.path.join(work, f"compile-{int(time.time() - kernelcache.STALE_WORK_S - 60)}-x")
    recent_dated = os.path.join(work, f"compile-{int(time.time())}-y")
    os.mkdir(old_named)
    os.mkdir(recent_dated)
    os.utime(recent_dated, (0, 0))
    spec, _ = spec_for(kernel_of(load(ADD, "/kgym-test/tmpdir.py"), "add"), block=1024)
    assert svc.ensure("add", spec) and svc.facts["compiled"] == 2, svc.reasons
    # Unnamed ones (no judge of this version made them) and those named over an hour ago go; a folder named
    # now stays whatever its mtime says (its worker sets that).
    assert not os.path.exists(old) and not os.path.exists(old_named), os.listdir(work)
    assert os.path.isdir(recent_dated), os.listdir(work)
    # The workers' folder is no namespace: not counted, never evicted as one.
    assert kernelcache._count(os.path.dirname(work), 0) == 1


def test_a_worker_that_asks_for_all_memory_fails_alone(tmp_path, helper):
    out = tmp_path / "work"
    out.mkdir()
    answer = helper.compile({"skeleton": "X = 'x' * (10 ** 11)\n", "qualname": "k", "spec": "{}", "target": TARGET,
                             "out": str(out), "uid": None}, 30)
    assert "MemoryError" in answer.get("error", ""), answer


def test_the_least_recently_used_are_evicted_when_the_cache_is_full(tmp_path):
    """Namespaces (and a namespace's requests) go least recently used first, down to what is kept; a runner copies
    what it loads at once (tritoncache.kernel_group), so no age protects one."""
    base = tmp_path / "kernels"
    base.mkdir()
    now = __import__("time").time()
    for i in range(10):
        d = base / f"ns{i}"
        d.mkdir()
        (d / "f").write_bytes(b"x" * 100)
        os.utime(d, (now - 100 + i, now - 100 + i))  # ns0 used longest ago
    kernelcache._evict(str(base), 7)
    assert sorted(os.listdir(base)) == [f"ns{i}" for i in range(3, 10)]
    kernelcache._evict(str(base), 7, keep_bytes=300)  # and by bytes: 7 x 100 > 300
    assert sorted(os.listdir(base)) == [f"ns{i}" for i in range(7, 10)]


def test_a_runner_loads_a_copy_so_eviction_cannot_fail_it(tmp_path):
    kdir = tmp_path / "ns" / "req"
    (kdir / "KEY").mkdir(parents=True)
    (kdir / "KEY" / "k.json").write_text("{}")
    (kdir / "KEY" / "k.cubin").write_bytes(b"cubin")
    (kdir / "KEY" / "__grp__k.json").write_text(json.dumps({"child_paths": {"k.json": "/x", "k.cubin": "/y"}}))
    own = tmp_path / "own" / "KEY"
    own.mkdir(parents=True)
    got = tritoncache.kernel_group(str(kdir), "KEY", "k.json", {os.getuid()}, copy_to=str(own))
    assert got == {"k.json": str(own / "k.json"), "k.cubin": str(own / "k.cubin")}
    import shutil

    shutil.rmtree(tmp_path / "ns")  # evicted right after the answer
    assert (own / "k.cubin").read_bytes() == b"cubin"


def test_the_helper_never_gets_a_candidates_bytes(tmp_path, helper, monkeypatch):
    """Every worker is forked from the helper: what the helper once held, a later worker could read.  So the
    request goes to the worker alone; the helper is told the target and the budget."""
    sent = []
    real_send = kernelcache._send
    monkeypatch.setattr(kernelcache, "_send", lambda sock, obj: (sent.append((sock, obj)), real_send(sock, obj))[1])
    out = tmp_path / "work"
    out.mkdir()
    helper.compile({"skeleton": "SECRET_KERNEL = 1\n", "qualname": "k", "spec": "{}", "target": TARGET,
                    "out": str(out), "uid": None}, 30)
    to_helper = [obj for sock, obj in sent if sock is helper.sock]
    assert to_helper == [{"target": TARGET, "budget": 30}]
    assert any("SECRET_KERNEL" in json.dumps(obj) for sock, obj in sent if sock is not helper.sock)


def test_a_worker_past_its_budget_is_killed(tmp_path, helper):
    out = tmp_path / "work"
    out.mkdir()
    t0 = __import__("time").monotonic()
    answer = helper.compile({"skeleton": "while True:\n    pass\n", "qualname": "k", "spec": "{}", "target": TARGET,
                             "out": str(out), "uid": None}, 1.0)
    assert "longer than 1 s" in answer.get("error", ""), answer
    assert __import__("time").monotonic() - t0 < 10
    assert helper.compile({"skeleton": "", "qualname": "k", "spec": "{}", "target": TARGET, "out": str(out),
                           "uid": None}, 30).get("error")  # the helper goes on serving
