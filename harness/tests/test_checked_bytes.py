"""Checked bytes = executed bytes (docs/threat-model.md): the runner compiles the bytes the judge checked, under the
name of the file the judge wrote them to, into a fresh module (no import machinery, no bytecode); every later
reader of that file name (inspect, tracebacks, Triton's interpreter at a kernel's first launch) gets those bytes
even if the file changed on disk; Triton's overrides and dumps are off; the judge notices a changed source file.
Each test runs in a forked process (the candidate module, linecache and Triton's knobs are process-wide)."""

import json
import os
import socket
import traceback

import pytest

from kgym_harness.judge import child
from kgym_harness.shared import transport as tp

CANDIDATE = b'''import torch
import triton
import triton.language as tl


@triton.jit
def add_one_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 0.0, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        add_one_kernel[(1,)](x, out, x.numel(), BLOCK=64)
        return out
'''


def _forked(fn):
    """fn() in a forked child; its JSON-able return value (or its traceback) comes back."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = {"value": fn()}
        except BaseException:  # noqa: BLE001
            out = {"exception": traceback.format_exc()}
        os.write(w, json.dumps(out, default=str).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    out = json.loads(data)
    assert "exception" not in out, out["exception"]
    return out["value"]


@pytest.fixture
def evaluation(tmp_path):
    """An evaluation's folder laid out and the candidate written, as the judge does before ``load``."""
    job = {"workdir": str(tmp_path), "candidate": "/somewhere/candidate.py"}
    child._prepare_workdir(job)
    path = child._write_source(job, CANDIDATE)
    return job, path


def _runner(job):
    from kgym_harness.runner import guards
    from kgym_harness.runner import runner as rn

    a, b = socket.socketpair()
    r = rn.Runner(b, "cpu")
    r.job = job
    r.guards = guards.Guards({})
    return r, tp.Reader(a)


def test_layout_and_file_modes(evaluation):
    job, path = evaluation
    assert path == os.path.join(job["workdir"], "src", "candidate.py")
    assert path == tp.source_path(job["workdir"], "x/candidate.py")
    with open(path, "rb") as f:
        assert f.read() == CANDIDATE
    assert sorted(os.listdir(job["workdir"])) == ["run", "src"]
    # Not root for the runner here (no runner_uid): the modes are the owner's alone; the judge writes once.
    assert os.stat(path).st_mode & 0o777 == 0o400 and os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o500
    with pytest.raises(FileExistsError):
        child._write_source(job, b"again")


def test_load_runs_the_checked_bytes_whatever_the_file_says_later(evaluation):
    """The runner executes the bytes it was sent, under the file's name; linecache holds them without a
    modification time, so inspect and Triton's interpreter (which reads a kernel's source at its first launch)
    keep reading them after the file on disk changed: a rewrite that slipped past every guard would still not
    run.  No __pycache__ appears."""
    job, path = evaluation

    def body():
        import inspect
        import linecache
        import sys

        import torch

        r, judge = _runner(job)
        r.load({"cmd": "load", "name": "candidate.py", "source": CANDIDATE.decode()})
        reply, _ = judge.recv()
        mod = sys.modules["kgym_candidate"]
        # Simulate a rewrite that landed (this test runs as the file's owner, unguarded).
        os.chmod(os.path.dirname(path), 0o700)
        os.chmod(path, 0o600)
        with open(path, "wb") as f:
            f.write(CANDIDATE.replace(b"+ 0.0", b"+ 1.0"))
        x = torch.arange(8, dtype=torch.float32)
        out = mod.ModelNew()(x)
        return {"reply": reply, "file": mod.__file__, "code_file": mod.add_one_kernel.fn.__code__.co_filename,
                "same_output": torch.equal(out, x), "cache_mtime": linecache.cache[path][1],
                "getsource_checked": "+ 0.0" in inspect.getsource(mod.add_one_kernel.fn),
                "pycache": os.path.exists(os.path.join(os.path.dirname(path), "__pycache__")),
                "spec": mod.__spec__ is None}

    got = _forked(body)
    assert got["reply"]["type"] == "ok", got
    assert got["file"] == got["code_file"] == evaluation[1]
    assert got["same_output"] is True, "the kernel ran the rewritten source"
    assert got["cache_mtime"] is None and got["getsource_checked"] is True
    assert got["pycache"] is False and got["spec"] is True


def test_load_refuses_a_file_that_is_not_the_checked_bytes(evaluation):
    job, path = evaluation

    def body():
        import sys

        os.chmod(os.path.dirname(path), 0o700)
        os.chmod(path, 0o600)
        with open(path, "ab") as f:
            f.write(b"\nRAN = True\n")
        r, judge = _runner(job)
        r.load({"cmd": "load", "name": "candidate.py", "source": CANDIDATE.decode()})
        reply, _ = judge.recv()
        return {"reply": reply, "imported": "kgym_candidate" in sys.modules}

    got = _forked(body)
    assert got["reply"]["type"] == "error" and "does not hold the bytes" in got["reply"]["message"]
    assert got["imported"] is False


def test_triton_reads_no_overrides(monkeypatch):
    """Kernel overrides and dumps off, whatever kgym's environment said; compiled kernels are never loaded from
    the cache (always_compile): a file planted there under a kernel's key is never read."""
    monkeypatch.setenv("TRITON_KERNEL_OVERRIDE", "1")
    monkeypatch.setenv("TRITON_OVERRIDE_DIR", "/tmp/somewhere")
    monkeypatch.setenv("TRITON_KERNEL_DUMP", "1")

    def body():
        from triton import knobs

        from kgym_harness.runner import runner as rn

        active = []
        rn._triton_reads_no_overrides(active)
        return {"override": knobs.compilation.override, "dump": knobs.compilation.dump_ir,
                "always": knobs.compilation.always_compile, "env": os.environ.get("TRITON_KERNEL_OVERRIDE"),
                "override_dir": os.environ.get("TRITON_OVERRIDE_DIR"), "active": active}

    got = _forked(body)
    assert got["override"] is False and got["dump"] is False and got["always"] is True, got
    assert got["env"] == "0" and got["override_dir"] is None
    assert got["active"] and "always_compile=True" in got["active"][0], got["active"]


def test_the_judge_notices_a_changed_source_file(evaluation):
    """The judge's own look after each stage (Evaluation.check_source): unchanged, nothing; changed or with a
    file beside it, harness_tampering, said once."""
    job, path = evaluation
    ev = child.Evaluation(chan=None, job=dict(job, policy=None))
    ev.source, ev.source_file = CANDIDATE, path
    ev.check_source("compile")
    assert ev.guards.findings == []
    os.chmod(os.path.dirname(path), 0o700)
    with open(os.path.join(os.path.dirname(path), "planted.py"), "w") as f:
        f.write("x = 1\n")
    ev.check_source("tiny_run")
    ev.check_source("correctness")
    assert [(f["type"], f["stage"]) for f in ev.guards.findings] == [("harness_tampering", "tiny_run")]
    assert "planted.py" in ev.guards.findings[0]["message"]


def test_the_judges_look_is_not_blocked_by_what_lies_there(evaluation):
    """Where no guard stood, the runner chose what lies at the source's name: a FIFO (a plain open would block the
    judge) or a link are reported, not followed."""
    job, path = evaluation
    ev = child.Evaluation(chan=None, job=dict(job, policy=None))
    ev.source, ev.source_file = CANDIDATE, path
    os.chmod(os.path.dirname(path), 0o700)
    os.unlink(path)
    os.mkfifo(path)
    ev.check_source("compile")
    assert [f["type"] for f in ev.guards.findings] == ["harness_tampering"]
    assert "no longer a regular file" in ev.guards.findings[0]["message"]
    os.unlink(path)
    os.symlink("/etc/hostname", path)
    ev.source_file = path
    ev.check_source("tiny_run")
    assert [f["stage"] for f in ev.guards.findings] == ["compile", "tiny_run"]
    assert "cannot be opened" in ev.guards.findings[1]["message"]
