"""The machine's trusted cache of Triton's C modules (kgym_harness.shared.tritoncache): signatures from a runner are refused
unless every word is a Triton type name, the runner's cache manager serves only C modules from the trusted directory,
the directory is refused where another user could write it, the judge's learning never raises, and what the judge
builds lies exactly where a runner's Triton looks for it (with a stub libcuda, Triton's real launcher and CUDA
utilities sources are compiled here by gcc, on the CPU)."""

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import sysconfig
import threading

import pytest
import torch

from kgym_harness.judge import child
from kgym_harness.shared import tritoncache
from kgym_harness.shared import transport as tp

SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")


# -- validate_signature ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [
    ["*fp32", "*fp32", "i32", "constexpr"],
    ["*kfp16", "fp32", ["i32", "i64"]],
    ["*bf16", "*u1", "*i8", "*fp8e4nv", "*kvoid", "u64", "i1", "fp64", "nvTmaDesc"],
    [],
    [[]],
    ["i32", [[[["i64"]]]]],  # nested 4 deep: the most allowed
    ["i32"] * tritoncache.MAX_ITEMS,
])
def test_validate_signature_accepts_real_triton_signatures(sig):
    out = tritoncache.validate_signature(json.loads(json.dumps(sig)))  # as it comes over the socket

    def tupled(x):
        return tuple(tupled(v) for v in x) if isinstance(x, list) else x

    assert out == tupled(sig)


def test_a_validated_signature_makes_the_runners_launcher_source():
    """What the runner's Triton generates (argument names as keys, tuples) and what the judge generates from the
    JSON it received (indices as keys, lists made tuples) are the same C source."""
    from triton.backends.nvidia import driver

    runner_sig = {"x_ptr": "*fp32", "w": "*kfp16", "n": "i32", "pair": ("i32", ("fp32", "*i64")), "BLOCK": "constexpr"}
    wire = json.loads(json.dumps(list(runner_sig.values())))
    sig = tritoncache.validate_signature(wire)
    judge_src = driver.make_launcher({}, {i: s for i, s in enumerate(sig)}, None)
    runner_src = driver.make_launcher({(4,): 1024}, runner_sig, [])
    assert judge_src == runner_src


@pytest.mark.parametrize("bad,why", [
    ('["*fp32", "i32\\"); system(\\"id"]', "not a Triton type name"),
    ('["*fp32; int x"]', "not a Triton type name"),
    ('["*fp32\\n#include </etc/passwd>"]', "not a Triton type name"),
    ('["tensordesc<fp16[64,64]>"]', "not a Triton type name"),
    ('["*tensordesc<fp16[64,64]>"]', "not a Triton type name"),
    ('["**fp32"]', "not a Triton type name"),
    ('["int32"]', "not a Triton type name"),  # a name canonicalisation accepts, never a signature's spelling
    ('["I32"]', "not a Triton type name"),
    ('[""]', "not a Triton type name"),
    ('["*"]', "not a Triton type name"),
    ('["' + "x" * 100000 + '"]', "not a Triton type name"),
    ('[32]', "an item of type int"),
    ('[1.5]', "an item of type float"),
    ('[true]', "an item of type bool"),
    ('[null]', "an item of type NoneType"),
    ('[{"i32": 1}]', "an item of type dict"),
    ('{"0": "i32"}', "a signature is a list"),
    ('"i32"', "a signature is a list"),
    ('null', "a signature is a list"),
    ('["i32", [[[[["i64"]]]]]]', "nested deeper than 4"),
    (json.dumps(["i32"] * (tritoncache.MAX_ITEMS + 1)), "more than 256 items"),
    (json.dumps([["i32"] * 200, ["i64"] * 200]), "more than 256 items"),
    (json.dumps([[[]] * 300]), "more than 256 items"),
])
def test_validate_signature_refuses_anything_else(bad, why):
    with pytest.raises(ValueError) as err:
        tritoncache.validate_signature(json.loads(bad))
    assert why in str(err.value)
    assert len(str(err.value)) < 200  # a long string is quoted in part, never whole


def test_the_vocabulary_is_tritons_own():
    from triton._utils import type_canonicalisation_dict
    from triton.backends.nvidia.driver import ty_to_cpp

    words = tritoncache.vocabulary()
    for w in words:
        if w == "constexpr":
            continue
        assert ty_to_cpp(w)  # every word is one the launcher generator maps (pointers: CUdeviceptr)
    canonical = set(type_canonicalisation_dict.values())
    assert {w[2:] for w in words if w.startswith("*k")} == canonical
    assert not any("tensordesc" in w for w in words)


# -- the runner's cache manager ----------------------------------------------------------------------------------

@pytest.fixture
def caches(tmp_path, monkeypatch):
    """A trusted directory and the runner's own (workdir) cache, Triton's knobs restored afterwards."""
    from triton import knobs

    trusted = tmp_path / "trusted"
    trusted.mkdir()
    work = tmp_path / "work-cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(work))
    monkeypatch.setattr(knobs.cache, "manager_class", None)
    return trusted, work


def test_the_reader_serves_c_modules_from_the_trusted_directory_only(caches):
    trusted, work = caches
    key = "KEYONE"
    (trusted / key).mkdir()
    for name in ("__triton_launcher" + SUFFIX, "kernel.cubin", "kernel.json", "__grp__kernel.json", "plain.so",
                 "evil" + SUFFIX + ".json"):
        (trusted / key / name).write_bytes(b"trusted")
    Reader = tritoncache.reader_class(str(trusted))
    r = Reader(key)
    assert r.get_file("__triton_launcher" + SUFFIX) == str(trusted / key / ("__triton_launcher" + SUFFIX))
    # Not a C module: the workdir cache as Triton's FileCacheManager would answer (nothing there yet).
    for name in ("kernel.cubin", "kernel.json", "plain.so", "evil" + SUFFIX + ".json"):
        assert r.get_file(name) is None, name
    assert r.get_group("kernel.json") is None
    # A module the trusted directory lacks: the workdir's, where the runner compiles it itself.
    assert r.get_file("cuda_utils" + SUFFIX) is None
    mine = r.put(b"built by the runner", "cuda_utils" + SUFFIX)
    assert mine == str(work / key / ("cuda_utils" + SUFFIX)) and r.get_file("cuda_utils" + SUFFIX) == mine
    # Non-modules go to the workdir and come back from there, even when the trusted directory holds the name.
    assert r.put("{}", "kernel.json") == str(work / key / "kernel.json")
    assert r.get_file("kernel.json") == str(work / key / "kernel.json")
    # Another key: nothing trusted.
    assert Reader("OTHER").get_file("__triton_launcher" + SUFFIX) is None
    # Override and dump managers are Triton's own business.
    assert not Reader(key, override=True)._plain
    # A module someone made writable (a runner left as root can chmod: Landlock does not cover it), or gave away,
    # or a key directory opened up: not served.
    launcher = trusted / key / ("__triton_launcher" + SUFFIX)
    launcher.chmod(0o666)
    assert Reader(key).get_file(launcher.name) is None
    launcher.chmod(0o644)
    (trusted / key).chmod(0o777)
    assert Reader(key).get_file(launcher.name) is None
    (trusted / key).chmod(0o755)
    assert Reader(key).get_file(launcher.name) == str(launcher)
    link = trusted / "LINKED"
    link.symlink_to(trusted / key)
    assert Reader("LINKED").get_file(launcher.name) is None
    if os.getuid() == 0:
        os.chown(launcher, 12345, 12345)
        assert Reader(key).get_file(launcher.name) is None


def test_install_reader_sets_the_manager_and_records_each_signature_once(caches, monkeypatch):
    from triton import knobs
    from triton.backends.nvidia import driver
    from triton.runtime.cache import get_cache_manager

    trusted, _work = caches
    monkeypatch.setattr(driver, "make_launcher", driver.make_launcher)
    monkeypatch.setattr(tritoncache, "_resolved", str(trusted))
    recorded = []
    assert tritoncache.install_reader(recorded) == {"reads": str(trusted)}
    assert knobs.cache.manager_class.trusted == str(trusted)
    assert type(get_cache_manager("ab" * 32)).__name__ == "TrustedModulesReader"
    sig = {"x": "*fp32", "t": ("i32", "i64"), "B": "constexpr"}
    a = driver.make_launcher({}, sig, None)
    b = driver.make_launcher({}, dict(sig), None)
    assert a == b and recorded == [["*fp32", ["i32", "i64"], "constexpr"]]
    for i in range(tritoncache.MAX_RECORDED + 5):
        driver.make_launcher({}, {"n": "i32", **{f"p{k}": "*fp32" for k in range(i)}}, None)
    assert len(recorded) == tritoncache.MAX_RECORDED
    # A trusted directory that became writable by others (checked again at every use): not read at all.
    trusted.chmod(0o777)
    knobs.cache.manager_class = None
    facts = tritoncache.install_reader([])
    assert facts["reads"] is None and "writable by other users" in facts["why"]
    assert knobs.cache.manager_class is None


def test_the_writer_never_finds_a_module_and_writes_it_for_all_to_read(caches):
    from triton import knobs

    trusted, _work = caches
    key = trusted / "KEY"
    key.mkdir(mode=0o777)
    key.chmod(0o777)
    (key / ("m" + SUFFIX)).write_bytes(b"found")
    if os.getuid() == 0:
        os.chown(key, 12345, 12345)
    old = os.umask(0o077)
    try:
        with tritoncache._writing_into(str(trusted)):
            w = knobs.cache.manager_class("KEY")
            assert w.get_file("m" + SUFFIX) is None  # a trusted process loads only what it has just built
            path = w.put(b"built", "m" + SUFFIX)
    finally:
        os.umask(old)
    assert path == str(key / ("m" + SUFFIX)) and open(path, "rb").read() == b"built"
    assert _modes(trusted) == {"KEY": 0o755, "KEY/m" + SUFFIX: 0o644}
    assert key.stat().st_uid == os.getuid()
    assert tritoncache.servable(path, {0, os.getuid()})


# -- the directory ---------------------------------------------------------------------------------------------

def test_safe_dir_makes_directories_with_the_mode_asked_whatever_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        path, why = tritoncache.safe_dir(str(tmp_path / "a" / "b" / "mods"), 0o755)
    finally:
        os.umask(old)
    assert why is None and path == str((tmp_path / "a" / "b" / "mods").resolve())
    for d in ("a", "a/b", "a/b/mods"):
        assert stat.S_IMODE((tmp_path / d).stat().st_mode) == 0o755, d
    # Below a sticky directory writable by all (as /tmp): accepted.
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    assert tritoncache.safe_dir(str(sticky / "mine"), 0o755)[1] is None


def test_safe_dir_refuses_what_another_user_could_write(tmp_path):
    for mode in (0o775, 0o757, 0o1777):  # the directory itself: group-, other-writable, even sticky
        d = tmp_path / f"leaf{mode:o}"
        d.mkdir()
        d.chmod(mode)
        path, why = tritoncache.safe_dir(str(d), 0o755)
        assert path is None and "writable by other users" in why and str(d) in why
    parent = tmp_path / "open"
    parent.mkdir()
    parent.chmod(0o777)  # no sticky bit: anyone could rename what lies below
    path, why = tritoncache.safe_dir(str(parent / "mods"), 0o755)
    assert path is None and f"{parent} is writable by other users" in why
    afile = tmp_path / "file"
    afile.write_text("")
    assert "not a directory" in tritoncache.safe_dir(str(afile), 0o755)[1]
    link = tmp_path / "link"
    link.symlink_to(parent / "mods")  # judged where it leads
    assert "writable by other users" in tritoncache.safe_dir(str(link), 0o755)[1]
    if os.getuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o755)
        os.chown(theirs, 12345, 12345)
        assert "belongs to uid 12345" in tritoncache.safe_dir(str(theirs), 0o755)[1]
        assert "belongs to uid 12345" in tritoncache.safe_dir(str(theirs / "below"), 0o755)[1]


def test_the_judges_comparison_cache_uses_the_same_check(tmp_path, monkeypatch):
    """compare.enable_fused has no check of its own: it asks safe_dir."""
    from kgym_harness.judge import compare

    seen = []
    monkeypatch.setattr(compare, "_fused_on", False)
    monkeypatch.setattr(tritoncache, "safe_dir", lambda p, mode: seen.append((p, mode)) or (None, "no: test"))
    assert compare.enable_fused(str(tmp_path / "c")) == "no: test"
    assert seen == [(str(tmp_path / "c"), 0o700)] and not compare._fused_on


def test_modules_dir_location_and_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert tritoncache._location() == "/var/cache/kgym/triton-modules"
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tritoncache._location() == str(tmp_path / "xdg" / "kgym" / "triton-modules")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # ignored, as the XDG specification says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert tritoncache._location() == str(tmp_path / "home" / ".cache" / "kgym" / "triton-modules")
    monkeypatch.undo()

    monkeypatch.setattr(tritoncache, "_resolved", None)
    bad = tmp_path / "bad"
    bad.mkdir()
    bad.chmod(0o777)
    monkeypatch.setattr(tritoncache, "_location", lambda: str(bad / "mods"))
    path, why = tritoncache.modules_dir()
    assert path is None and "writable by other users" in why and tritoncache.known_dir() is None
    monkeypatch.setattr(tritoncache, "_location", lambda: str(tmp_path / "good" / "mods"))
    path, why = tritoncache.modules_dir()
    assert why is None and path == str(tmp_path / "good" / "mods") and tritoncache.known_dir() == path
    # Kept: a runner past its uid drop (another HOME, another uid) still reads the one found before.
    monkeypatch.setattr(tritoncache, "_location", lambda: "/nonexistent/elsewhere")
    assert tritoncache.modules_dir() == (path, None)


# -- learn: the judge --------------------------------------------------------------------------------------------

def _no_nvidia_backend(monkeypatch):
    import triton.backends.nvidia

    monkeypatch.setitem(sys.modules, "triton.backends.nvidia.driver", None)
    monkeypatch.delattr(triton.backends.nvidia, "driver", raising=False)


def test_learn_never_raises_and_says_why(tmp_path, monkeypatch):
    from triton.backends.nvidia import driver

    monkeypatch.setattr(tritoncache, "_resolved", str(tmp_path))
    for junk in (None, "x", 5, {"a": 1}, [5, None, "rm -rf /", ["tensordesc<fp16[1]>"]], [[[[[[["i32"]]]]]]]):
        facts = tritoncache.learn(junk)
        assert facts["learned"] == 0 and facts["refused"], (junk, facts)
    facts = tritoncache.learn([["i32"]] * 100)
    assert "68 signatures past the first 32" in facts["refused"][0]

    def no_libcuda():
        raise AssertionError("libcuda.so cannot found!")

    monkeypatch.setattr(driver, "library_dirs", no_libcuda)
    facts = tritoncache.learn([["*fp32", "i32"]])
    assert facts["learned"] == 0 and "not usable here" in facts["unavailable"] and "libcuda" in facts["unavailable"]
    _no_nvidia_backend(monkeypatch)
    facts = tritoncache.learn([["*fp32", "i32"]])
    assert "NotFoundError" in facts["unavailable"]
    monkeypatch.setattr(tritoncache, "_resolved", None)
    monkeypatch.setattr(tritoncache, "_location", lambda: "/proc/no/such/dir")
    assert tritoncache.learn([["*fp32", "i32"]])["unavailable"]
    assert tritoncache.learn([])["learned"] == 0  # nothing asked: nothing looked at


def test_learn_uses_the_key_compile_module_from_src_uses(tmp_path, monkeypatch):
    """The file learn() checks for (and builds) is the one compile_module_from_src asks its cache manager for."""
    from triton import knobs
    from triton.backends.nvidia import driver
    from triton.runtime import build

    src = driver.make_launcher({}, {0: "*fp32", 1: "i32", 2: ("i64", "constexpr")}, None)
    asked = []

    class Recorder:
        def __init__(self, key, override=False, dump=False):
            self.key = key

        def get_file(self, filename):
            asked.append(os.path.join(str(tmp_path), self.key, filename))
            return asked[-1]

    monkeypatch.setattr(knobs.cache, "manager_class", Recorder)
    monkeypatch.setattr(build, "_load_module_from_path", lambda name, path: ("loaded", name, path))
    assert build.compile_module_from_src(src, tritoncache.LAUNCHER)[0] == "loaded"
    assert asked == [tritoncache.entry_path(str(tmp_path), src, tritoncache.LAUNCHER)]


@pytest.fixture
def stub_cuda(tmp_path, monkeypatch):
    """A machine without a GPU made to build Triton's C: an empty libcuda.so.1 to link against, and modules loaded
    lazily (their CUDA calls are never made).  Skips without gcc or Python's headers."""
    from triton.backends.nvidia import driver

    cc = shutil.which("gcc") or shutil.which("cc")
    include = sysconfig.get_paths()["include"]
    if not cc or not os.path.exists(os.path.join(include, "Python.h")):
        pytest.skip("no C compiler or Python headers")
    lib = tmp_path / "stub-libcuda"
    lib.mkdir()
    (lib / "empty.c").write_text("int kgym_stub_libcuda;\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib / "libcuda.so.1"), str(lib / "empty.c")], check=True)
    monkeypatch.setenv("TRITON_LIBCUDA_PATH", str(lib))
    driver.libcuda_dirs.cache_clear()
    driver.library_dirs.cache_clear()
    flags = sys.getdlopenflags()
    sys.setdlopenflags(os.RTLD_LAZY)
    yield
    sys.setdlopenflags(flags)
    driver.libcuda_dirs.cache_clear()
    driver.library_dirs.cache_clear()


def _modes(root):
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            out[os.path.relpath(p, root)] = stat.S_IMODE(os.lstat(p).st_mode)
    return out


def test_what_the_judge_learns_a_runner_loads_without_compiling(tmp_path, monkeypatch, stub_cuda, caches):
    """End to end on the CPU: the judge compiles a launcher with Triton's own generator and compiler call into the
    trusted directory (0644 files in 0755 directories under a umask of 077); a second learn finds it; the
    runner's Triton, asked for the launcher of the same signature, loads that file and runs no compiler."""
    from triton import knobs
    from triton.backends.nvidia import driver
    from triton.runtime import build

    trusted, work = caches
    monkeypatch.setattr(tritoncache, "_resolved", str(trusted))
    sig = ["*fp32", "*kfp16", "i32", ["i64", "fp32"], "constexpr"]
    old = os.umask(0o077)
    try:
        facts = tritoncache.learn([sig, sig, "junk"])
    finally:
        os.umask(old)
    assert facts["learned"] == 1 and facts["failed"] == [] and len(facts["refused"]) == 1, facts
    modes = _modes(trusted)
    assert modes and all(m == (0o755 if os.path.isdir(trusted / p) else 0o644) for p, m in modes.items()), modes
    assert not any(".tmp" in p for p in modes), modes  # nothing half-written left behind
    assert os.environ["TRITON_CACHE_DIR"] == str(work) and knobs.cache.manager_class is None  # restored
    assert tritoncache.learn([sig]) == {"learned": 0, "already_cached": 1, "deferred": 0, "refused": [],
                                        "failed": []}

    # The runner: its Triton makes the launcher for a kernel with these argument types.
    monkeypatch.setattr(driver, "make_launcher", driver.make_launcher)
    recorded = []
    tritoncache.install_reader(recorded)

    def no_compiler(*a, **k):
        raise AssertionError("the runner compiled")

    monkeypatch.setattr(build, "_build", no_compiler)
    runner_sig = {"x": "*fp32", "w": "*kfp16", "n": "i32", "pair": ("i64", "fp32"), "BLOCK": "constexpr"}
    src = driver.make_launcher({(4,): 128}, runner_sig, None)
    mod = driver.compile_module_from_src(src=src, name=tritoncache.LAUNCHER, library_dirs=driver.library_dirs(),
                                         include_dirs=driver.include_dirs, libraries=driver.libraries)
    assert os.path.dirname(os.path.dirname(mod.__file__)) == str(trusted)
    assert recorded == [sig]
    # A signature nobody learned: a miss, which reaches the compiler (refused here), as before.
    with pytest.raises(AssertionError, match="the runner compiled"):
        driver.compile_module_from_src(src=driver.make_launcher({}, {"y": "*fp64"}, None), name=tritoncache.LAUNCHER,
                                       library_dirs=driver.library_dirs(), include_dirs=driver.include_dirs,
                                       libraries=driver.libraries)


def test_learn_compiles_at_most_limit_and_stops_when_full(tmp_path, monkeypatch, caches):
    from triton.backends.nvidia import driver

    trusted, _work = caches
    monkeypatch.setattr(tritoncache, "_resolved", str(trusted))
    monkeypatch.setattr(driver, "library_dirs", lambda: [])
    built = []

    def fake_compile(src, name, **kwargs):
        built.append(src)
        path = tritoncache.entry_path(str(trusted), src, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "wb").close()

    monkeypatch.setattr(driver, "compile_module_from_src", fake_compile)
    sigs = [["i32"] * k for k in range(1, 8)]
    facts = tritoncache.learn(sigs, limit=3)
    assert facts["learned"] == 3 and facts["deferred"] == 4 and len(built) == 3
    facts = tritoncache.learn(sigs, limit=3)
    assert facts["already_cached"] == 3 and facts["learned"] == 3 and facts["deferred"] == 1
    monkeypatch.setattr(tritoncache, "MAX_ENTRIES", 6)
    facts = tritoncache.learn(sigs, limit=3)
    assert facts["already_cached"] == 6 and facts["learned"] == 0 and facts["deferred"] == 1
    # An entry someone opened up is not counted as cached: built (and so replaced) again.
    monkeypatch.setattr(tritoncache, "MAX_ENTRIES", 4096)
    opened = tritoncache.entry_path(str(trusted), driver.make_launcher({}, {0: "i32"}, None), tritoncache.LAUNCHER)
    os.chmod(opened, 0o666)
    monkeypatch.setattr(driver, "compile_module_from_src", lambda src, name, **kw: (built.append(src), os.chmod(
        tritoncache.entry_path(str(trusted), src, name), 0o644)))
    facts = tritoncache.learn([["i32"]])
    assert facts["learned"] == 1 and built[-1] == driver.make_launcher({}, {0: "i32"}, None)


def test_warm_utilities_builds_cuda_utils_where_the_runner_finds_it(tmp_path, monkeypatch, stub_cuda, caches):
    """The zygote's warm-up: Triton's driver.c compiled into the trusted directory, no CUDA driver made; the
    runner's Triton then gets that file for its CudaUtils without compiling."""
    import triton
    from pathlib import Path

    from triton.backends.nvidia import driver
    from triton.runtime import build

    trusted, _work = caches
    monkeypatch.setattr(tritoncache, "_resolved", str(trusted))
    monkeypatch.setattr(driver, "PyCUtensorMap", driver.PyCUtensorMap)
    had = driver.CudaUtils.__dict__.get("instance")
    active = triton.runtime.driver._active
    try:
        facts = tritoncache.warm_utilities()
        assert "compiled" in facts, facts
        assert triton.runtime.driver._active is active  # no driver (and so no CUDA) was started
        assert tritoncache.warm_utilities() == {"cached": facts["compiled"]}
        assert stat.S_IMODE(os.stat(facts["compiled"]).st_mode) == 0o644

        monkeypatch.setattr(driver, "make_launcher", driver.make_launcher)
        tritoncache.install_reader([])
        monkeypatch.setattr(build, "_build", lambda *a, **k: pytest.fail("the runner compiled"))
        src = Path(os.path.join(driver.dirname, "driver.c")).read_text()
        mod = driver.compile_module_from_src(src=src, name="cuda_utils", library_dirs=driver.library_dirs(),
                                             include_dirs=driver.include_dirs, libraries=driver.libraries)
        assert mod.__file__ == facts["compiled"]
    finally:
        if had is None and "instance" in driver.CudaUtils.__dict__:
            del driver.CudaUtils.instance


def test_warm_utilities_never_raises(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tritoncache, "_resolved", None)
    monkeypatch.setattr(tritoncache, "_location", lambda: "/proc/no/such/dir")
    facts = tritoncache.warm_utilities()
    assert facts.get("unavailable") and "not cached for runners" in capsys.readouterr().err
    _no_nvidia_backend(monkeypatch)
    monkeypatch.setattr(tritoncache, "_resolved", str(tmp_path))
    assert "NotFoundError" in tritoncache.warm_utilities()["error"]


# -- the protocol: the runner's launchers command and the judge's use of it ---------------------------------------

def test_the_runner_answers_launchers(monkeypatch):
    from kgym_harness.runner import runner

    a, b = socket.socketpair()
    r = runner.Runner(b, "cpu")
    t = threading.Thread(target=r.serve, daemon=True)
    t.start()
    link = child.RunnerLink(a, "cpu", [])
    reply, _ = link.ask({"cmd": "launchers"})
    assert reply["type"] == "ok" and reply["signatures"] == []  # the CPU: Triton makes no launcher
    r.signatures.append(["*fp32", "i32"])
    assert link.ask({"cmd": "launchers"})[0]["signatures"] == [["*fp32", "i32"]]
    link.ask({"cmd": "exit"})
    t.join(5)


def _one_answer(sock, answer):
    """A hostile runner: answers one command with ``answer`` (a callable of the command's seq, giving bytes)."""
    reader = tp.Reader(sock)

    def serve():
        msg, _ = reader.recv()
        data = answer(msg["seq"])
        if data is None:
            sock.close()
        else:
            sock.sendall(data)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("answer", [
    lambda seq: json.dumps({"type": "ok", "seq": seq, "signatures": [["*fp32", "i32"], "x", 5]}).encode() + b"\n",
    lambda seq: json.dumps({"type": "ok", "seq": seq, "signatures": "rm -rf /"}).encode() + b"\n",
    lambda seq: json.dumps({"type": "ok", "seq": seq, "signatures": {"a": 1}}).encode() + b"\n",
    lambda seq: json.dumps({"type": "ok", "seq": seq}).encode() + b"\n",
    lambda seq: json.dumps({"type": "error", "seq": seq, "message": "no"}).encode() + b"\n",
    lambda seq: json.dumps({"type": "ok", "seq": seq + 7, "signatures": []}).encode() + b"\n",
    lambda seq: json.dumps({"type": "ok", "seq": seq, "signatures": [["i32"]] * 5000,
                            "findings": [{"type": "forged", "stage": "x"}]}).encode() + b"\n",
    lambda seq: b"not json at all\n",
    lambda seq: b"[1, 2]\n",
    lambda seq: None,  # the runner is gone
])
def test_the_judge_survives_any_launchers_answer(answer, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(tritoncache, "learn", lambda sigs: seen.append(sigs) or {
        "learned": 0, "already_cached": 0, "deferred": 0, "refused": ["some"], "failed": []})
    a, b = socket.socketpair()
    findings = [{"type": "earlier"}]
    link = child.RunnerLink(a, "cpu", findings)
    t = _one_answer(b, answer)
    child._learn_launchers(link)  # never raises
    t.join(5)
    assert findings == [{"type": "earlier"}]  # nothing the answer carried counts
    assert "kgym judge: Triton launchers" in capsys.readouterr().err
    assert len(seen) <= 1  # learn (which validates) sees the answer's data, or nothing when there is no answer


def test_the_judge_hands_the_runners_signatures_to_learn(monkeypatch):
    seen = []
    monkeypatch.setattr(tritoncache, "learn", lambda sigs: seen.append(sigs) or {
        "learned": 0, "already_cached": 1, "deferred": 0, "refused": [], "failed": []})
    a, b = socket.socketpair()
    link = child.RunnerLink(a, "cpu", [])
    t = _one_answer(b, lambda seq: json.dumps({"type": "ok", "seq": seq,
                                               "signatures": [["*fp32", ["i32", "i64"]]]}).encode() + b"\n")
    child._learn_launchers(link)
    t.join(5)
    assert seen == [[["*fp32", ["i32", "i64"]]]]


def test_the_runner_keeps_its_triton_cache_in_its_workdir(monkeypatch, tmp_path):
    """TRITON_CACHE_DIR outranks TRITON_HOME and TRITON_* variables pass the runner's clean environment: one set
    for kgym (a benchmark's empty cache per run) reached every runner, where Landlock refused writes, and every GPU
    evaluation failed with PermissionError (measured on an H100).  The runner's cache is its own folder's (the
    workdir's run/, laid out by the judge)."""
    from triton import knobs

    from kgym_harness.runner import runner

    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere/kgym/was/told")
    monkeypatch.setenv("TRITON_HOME", "/elsewhere")
    # The set-up forces Triton's overrides and dumps off: restored with the test.
    monkeypatch.setenv("TRITON_KERNEL_OVERRIDE", "0")
    monkeypatch.setenv("TRITON_KERNEL_DUMP", "0")
    monkeypatch.chdir(tmp_path)  # setup chdirs into its folder: undone with the test
    job = {"workdir": str(tmp_path), "sandbox": {"enabled": False}}
    child._prepare_workdir(job)
    run = os.path.join(str(tmp_path), "run")
    threads = torch.get_num_threads()
    a, b = socket.socketpair()
    r = runner.Runner(b, "cpu")
    t = threading.Thread(target=r.serve, daemon=True)
    t.start()
    link = child.RunnerLink(a, "cpu", [])
    try:
        with knobs.compilation.scope():
            reply, _ = link.ask({"cmd": "setup", "job": job})
            assert reply["type"] == "ok", reply
            assert os.environ["TRITON_HOME"] == run
            assert os.environ["TRITON_CACHE_DIR"] == os.path.join(run, ".triton", "cache")
            link.ask({"cmd": "exit"})
            t.join(5)
    finally:
        torch.set_num_threads(threads)
