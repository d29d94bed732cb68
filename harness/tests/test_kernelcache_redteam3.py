"""Third red team of the trusted compile cache: the worker's folder beneath the cache's root (056a53b:
``<root>/.work/compile-XXXX``, owned by the worker's uid, stale ones swept by every later compile with
shutil.rmtree) and its budget.

Each test is one attack, asserting the SAFE behaviour: it fails where the attack works.  A subverted worker is
simulated by a spy on the helper's ``compile`` doing what such a worker may do in its folder under its Landlock (which
grants every right but execute beneath ``out``; utime is no Landlock right, and the folder is the worker's own):
any tree of directories, and its folder's mtime set to any value.  CPU only, as test_kernelcache.py."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from kgym_harness.judge import kernelcache
from kgym_harness.shared import tritoncache

from test_kernelcache import (ADD, cache_dirs, compiled_not_interpreted, helper, kernel_of, load,  # noqa: F401
                              service_for, spec_for)

# Deeper than Python's recursion limit (and than a soft RLIMIT_NOFILE of 1024): shutil.rmtree's fd-based walk of
# Python 3.11/3.12 recurses once, and holds one descriptor, per level.
DEPTH = 3000


def _deep(top, depth=DEPTH):
    """A chain of ``depth`` directories beneath ``top`` (made through directory descriptors: no path limit)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        # What it may hold at the bottom: anything (here one byte; a worker may write until the disk is full).
        os.close(os.open("payload", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
    finally:
        os.close(fd)


def _work_dir():
    base, why = kernelcache.root()
    assert base, why
    work, why = tritoncache.safe_dir(os.path.join(base, kernelcache.WORK), 0o711)
    assert work, why
    return base, work


def _remove_deep(path):
    """Test clean-up that any depth survives (GNU rm walks with fts, not by recursion)."""
    if not os.path.lexists(path):
        return
    subprocess.run(["rm", "-rf", path], check=False)


def _add_spec(block):
    return spec_for(kernel_of(load(ADD, "/kgym-test/redteam3.py"), "add"), block=block)[0]


def test_a_deep_tree_a_worker_leaves_does_not_outlive_its_compile(cache_dirs, helper, monkeypatch):
    """The worker's last act: its folder emptied but for a chain of DEPTH directories (anything at the bottom), the
    folder's mtime set to 0.  The judge's ``finally: shutil.rmtree(out, ignore_errors=True)`` raises RecursionError
    (not an OSError: ignore_errors does not cover it) and removes nothing: the folder, and whatever the worker wrote
    into it, stays in ``.work`` for good (beneath the cache's root, on its disk; no bound counts it: _count/_bytes
    skip dot names)."""
    seen = []

    def subverted(request, budget):
        out = request["out"]
        seen.append(out)
        for name in os.listdir(out):
            p = os.path.join(out, name)
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)
        _deep(out)
        os.utime(out, (0, 0))
        return {"error": "the worker ended without an answer", "transient": True}

    monkeypatch.setattr(helper, "compile", subverted)
    svc = service_for(ADD, helper)
    try:
        assert svc.ensure("add", _add_spec(256)) is None
        assert seen, svc.reasons
        work = os.path.dirname(seen[0])
        left = os.listdir(work)
        assert not left, (f"the subverted worker's folder outlived its compile in {work}: {left} "
                          f"(the judge's reasons: {svc.reasons})")
    finally:
        for out in seen:
            _remove_deep(out)


def test_a_stale_folder_with_a_deep_tree_does_not_deny_every_later_compile(cache_dirs, helper):
    """A worker's folder left in ``.work`` (the judge killed mid-compile, or the test above) holding a chain of DEPTH
    directories, older than STALE_WORK_S (or with its mtime set to 0 by its worker, which owns it).  Every later
    compile of every judge sharing the root sweeps it first: shutil.rmtree raises RecursionError, which
    _worker_folder's ``except OSError`` does not catch, and the honest request fails ("RecursionError: maximum
    recursion depth exceeded"), for every evaluation on the machine, until someone removes it by hand."""
    _base, work = _work_dir()
    left = os.path.join(work, "compile-killed")
    os.mkdir(left, 0o700)
    try:
        _deep(left)
        os.utime(left, (0, time.time() - kernelcache.STALE_WORK_S - 60))
        svc = service_for(ADD, helper)
        kdir = svc.ensure("add", _add_spec(512))
        assert kdir and svc.facts["compiled"] == 1, f"an honest compile failed: {svc.reasons}"
        assert not os.path.lexists(left), "the stale folder is still there"
    finally:
        _remove_deep(left)


def test_a_live_workers_folder_is_not_swept_on_its_own_mtime(cache_dirs, helper, monkeypatch):
    """Staleness is the folder's mtime, which its worker sets (utime: its own folder; no Landlock right covers it).
    A worker that dates its live folder to 1970 has it removed by the next compile of any other judge sharing the
    root, on that honest request's time and under its lock (shutil.rmtree of whatever the worker made there: ~0.45 M
    files written in 10 s here took 5.6 s to remove; a DEPTH chain fails the request, test above).  A folder whose
    judge is still in _compile must not be swept, whatever its mtime."""
    found = []
    compile_ = helper.compile

    def dated(request, budget):
        out = request["out"]
        os.utime(out, (0, 0))  # the worker, as soon as it runs
        base = os.path.dirname(os.path.dirname(out))
        other = kernelcache._worker_folder(base)  # another judge's compile meanwhile
        if other:
            os.rmdir(other)
        found.append(os.path.isdir(out))
        return compile_(request, budget)

    monkeypatch.setattr(helper, "compile", dated)
    svc = service_for(ADD, helper)
    svc.ensure("add", _add_spec(1024))
    assert found == [True], f"another judge's sweep removed a live worker's folder ({svc.reasons})"



def test_a_folder_another_judge_removes_during_the_sweep_does_not_fail_the_compile(cache_dirs, helper, monkeypatch):
    """Concurrency of judges sharing the root, no attack needed: _worker_folder lists ``.work`` and then lstat()s
    each entry (DirEntry.stat: not cached from readdir); a folder another judge's compile removes in between (its
    ``finally`` rmtree, or its own sweep) raises FileNotFoundError there, caught by the ``except OSError`` around the
    whole sweep, and this honest compile fails ("no folder for the worker beneath the cache").  Every compile on a
    fleet's shared root races every other judge's worker folder so."""
    _base, work = _work_dir()
    theirs = os.path.join(work, "compile-another-judges")
    os.mkdir(theirs, 0o700)
    real_scandir = os.scandir

    class Listing:
        def __init__(self, path):
            self.it = real_scandir(path)
            self.entries = iter(list(self.it))
            if str(path) == work and os.path.isdir(theirs):
                os.rmdir(theirs)  # the other judge, between this one's readdir and lstat

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()

        def __iter__(self):
            return self

        def __next__(self):
            return next(self.entries)

        def close(self):
            self.it.close()

    monkeypatch.setattr(kernelcache.os, "scandir", Listing)
    svc = service_for(ADD, helper)
    kdir = svc.ensure("add", _add_spec(128))
    monkeypatch.undo()
    assert kdir and svc.facts["compiled"] == 1, f"an honest compile failed: {svc.reasons}"


_ROOT_WORKER = r"""
import json, os, sys, tempfile
from kgym_harness.judge import kernelcache
out, victim = sys.argv[1], sys.argv[2]
ok = kernelcache._lockdown(out, 60123, [], [])
r = {"ok": ok, "euid": os.geteuid()}
if ok:
    try:
        os.chmod(victim, 0o4755)  # outside its folder: no Landlock right covers chmod
    except OSError as exc:
        r["chmod"] = str(exc)
print(json.dumps(r))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the judge is root only where kgym runs as root")
def test_pre_existing_a_root_judges_worker_whose_drop_is_refused_does_not_run():
    """Not 056a53b's (side finding, _lockdown): where the judge is root and the runner's uid cannot read Python's
    files (a pyenv under /root 0700, as on this machine), drop_privileges refuses and the worker runs the skeleton as
    ROOT, held by Landlock alone, which covers no chmod, chown, utime, kill or setuid: a subverted worker makes any
    root-owned file set-uid (shown on a file of the test's), chowns the cache's directories away, kills any process.
    "Judge's uid + Landlock" is accepted for a non-root judge; for root it must fail closed."""
    # Where the worker's uid can reach its folder (pytest's tmp_path is 0700): on a machine whose Python that uid
    # can read (a GPU machine's /usr), the drop succeeds and the worker must simply not be root.
    public = tempfile.mkdtemp(prefix="kgym-test-rt3-", dir="/tmp")
    os.chmod(public, 0o755)
    out = os.path.join(public, "out")
    os.mkdir(out)
    os.chown(out, 60123, 60123)
    fd, victim = tempfile.mkstemp(dir=public)
    os.close(fd)
    os.chmod(victim, 0o644)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(kernelcache.__file__))))
    proc = subprocess.run([sys.executable, "-c", _ROOT_WORKER, str(out), victim], capture_output=True, text=True,
                          env=env, timeout=120)
    try:
        lines = proc.stdout.strip().splitlines()
        assert lines, f"the worker's lockdown failed: {proc.stderr[-600:]}"
        r = json.loads(lines[-1])
        mode = oct(os.stat(victim).st_mode & 0o7777)
    finally:
        subprocess.run(["rm", "-rf", public], check=False)
    assert not (r["ok"] and r["euid"] == 0), f"the worker runs as root under Landlock alone: {r}, victim now {mode}"
