"""The runner/judge sandbox (kgym_harness.runner.sandbox): each test forks, locks the child down as the zygote's runner
will be, tries hostile actions and the honest path inside, and reports over a pipe.  Needs root (as on CI and on
the GPU machines); skipped otherwise."""

import ctypes
import errno
import json
import os
import select
import shutil
import signal
import socket
import tempfile
import traceback

import pytest

from kgym_harness.runner import sandbox

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the runner sandbox is set up by root (the zygote)")

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(HARNESS)
RUNNER_UID = 60000 + 7
_SYS_IO_URING_SETUP = 425  # x86-64 and arm64 (generic numbering)


def _collect(fn, timeout=240):
    """Fork; fn(report) runs in the child and fills the dict ``report``; the dict comes back over a pipe.  A child
    that dies or hangs fails the test."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        rep = {}
        try:
            fn(rep)
        except BaseException:
            rep["exception"] = traceback.format_exc()
        try:
            os.write(w, json.dumps(rep, default=str).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    try:
        while True:
            ready, _, _ = select.select([r], [], [], timeout)
            if not ready:
                os.kill(pid, signal.SIGKILL)
                pytest.fail(f"the sandboxed child hung (so far: {data[:2000]!r})")
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    assert data, "the sandboxed child died without a report"
    rep = json.loads(data)
    assert "exception" not in rep, rep["exception"]
    return rep


def _in_new_pid_ns(runner, rep):
    """The zygote's intermediate: unshare_pid, fork the runner (PID 1 of the new namespace), relay its report."""
    warnings = []
    rep["unshare_pid"] = sandbox.unshare_pid(warnings)
    rep["intermediate_warnings"] = warnings
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        sub = {}
        try:
            runner(sub)
        except BaseException:
            sub["exception"] = traceback.format_exc()
        try:
            os.write(w, json.dumps(sub, default=str).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.waitpid(pid, 0)
    rep.update(json.loads(data) if data else {"exception": "the runner died without a report"})


def _errno_of(fn):
    try:
        fn()
        return 0
    except OSError as exc:
        return exc.errno


def _io_uring_setup():
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(ctypes.c_long(_SYS_IO_URING_SETUP), ctypes.c_uint(4), params)
    if fd >= 0:
        os.close(fd)
        return 0
    return ctypes.get_errno()


@pytest.fixture
def world(monkeypatch):
    """What lies outside the runner: a secret file beside (not in) the workdir, a listening TCP socket, a token
    in the environment, a repository file not on sys.path."""
    from kgym_harness.judge import child

    workdir = tempfile.mkdtemp(prefix="kgym-runner-", dir="/var/tmp")
    # Laid out as the judge does it (transport.py): src/ holds the checked source, run/ is the runner's own.
    job = {"workdir": workdir, "runner_uid": RUNNER_UID, "candidate": "candidate.py"}
    child._prepare_workdir(job)
    source_bytes = b"import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
    source = child._write_source(job, source_bytes)
    outside = tempfile.mkdtemp(prefix="kgym-outside-", dir="/var/tmp")
    os.chmod(outside, 0o755)
    secret = os.path.join(outside, "secret.txt")
    with open(secret, "w") as f:
        f.write("expected output")
    os.chmod(secret, 0o644)  # world-readable: only Landlock stands in the way
    repo_file = os.path.join(REPO, "README.md")
    assert os.path.exists(repo_file)
    # `python -m pytest` puts the current directory (the repository) on sys.path; the zygote must not run with
    # it there, and the runner here takes it off (see _lockdown).
    assert not any(sandbox._beneath(repo_file, p) for p in sandbox.python_paths() if p != REPO), "pick another"
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind(("127.0.0.1", 0))
    lst.listen(4)
    monkeypatch.setenv("KGYM_TOKEN", "kgym-secret-token")
    monkeypatch.setenv("MY_API_KEY", "abc")
    monkeypatch.setenv("TRITON_DEBUG_TOKEN", "abc")
    probe = f"kgym_probe_{os.getpid()}"
    lst.setblocking(False)  # accept() raises BlockingIOError while nobody has connected
    yield dict(workdir=workdir, run=os.path.join(workdir, "run"), src=os.path.dirname(source), source=source,
               source_bytes=source_bytes, secret=secret, repo_file=repo_file, port=lst.getsockname()[1],
               parent=os.getpid(), probe=probe, listener=lst)
    lst.close()
    shutil.rmtree(workdir, ignore_errors=True)
    shutil.rmtree(outside, ignore_errors=True)
    for d in ("/tmp", "/dev/shm"):
        try:
            os.unlink(os.path.join(d, probe))
        except OSError:
            pass


def _kept_in_tmp():
    """What the runner's private /tmp holds: the top folders of the Python paths bound back into it (a checkout or
    a venv under /tmp: `make test` in /tmp/kgym), nothing else of the host's /tmp."""
    kept = set()
    for p in sandbox.python_paths():
        r = os.path.realpath(p)
        if r != "/tmp" and sandbox._beneath(r, "/tmp"):
            kept.add(os.path.relpath(r, "/tmp").split(os.sep)[0])
    return sorted(kept)


def _lockdown(world, rep, device="cpu", seccomp=True):
    """The runner's sequence, as the zygote's runner will call it, with probes of the namespace stage.
    ``device`` goes into the job: "cpu" (the default of a job without one) makes new processes and programs fatal,
    "cuda" keeps them allowed (no CUDA is used here)."""
    import sys

    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != REPO]
    active, warnings = sandbox.Granted(), []
    job = {"workdir": world["workdir"], "device": device, "sandbox": {} if seccomp else {"seccomp": False}}
    rep["tmp_kept"] = _kept_in_tmp()
    rep["ns"] = sandbox.enter_runner_namespaces(world["workdir"], [], active, warnings)
    if rep["ns"]:
        sandbox.mount_workdir(world["workdir"], RUNNER_UID, job, active, warnings)
    rep["pid_in_ns"] = os.getpid()
    rep["ppid_in_ns"] = os.getppid()
    rep["tmp_listing"] = os.listdir("/tmp")
    rep["shm_listing"] = os.listdir("/dev/shm")
    for d in ("/tmp", "/dev/shm"):
        with open(os.path.join(d, world["probe"]), "w") as f:
            f.write("private")
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    rep["netns_connect_errno"] = _errno_of(lambda: s.connect(("127.0.0.1", world["port"])))
    s.close()
    sandbox.prepare_dir_for(world["run"], RUNNER_UID, RUNNER_UID, warnings)
    rep["dropped"] = sandbox.drop_privileges(RUNNER_UID, RUNNER_UID, warnings, active)
    sandbox.apply_runner(job, active, warnings)
    rep["active"], rep["warnings"], rep["codes"] = list(active), warnings, active.codes
    return job, active, warnings


def _sandbox_warnings(warnings):
    return [x for x in warnings if "landlock" in x or "seccomp" in x]


# ---------------------------------------------------------------------------------------------------------------
# Fatal system calls: each hostile action runs in its own freshly locked-down runner, which must die by SIGSYS.
# ---------------------------------------------------------------------------------------------------------------

def _send(fd, obj):
    os.write(fd, (json.dumps(obj, default=str) + "\n").encode())


def _hostile_status(world, action, mode, device="cpu", timeout=60):
    """Fork an intermediate, which forks a fresh runner, locks it down and runs ``action(target, world)``.

    mode "runner": the zygote's whole sequence (_lockdown) in a new pid namespace (the runner is its PID 1);
    ``target`` is pytest's pid (which names nobody inside that namespace).
    mode "bare": apply_runner alone, still root, with Landlock off, in the host's pid and network namespaces, so
    that only seccomp stands between the runner and ``target``: the intermediate, its parent (root as well).

    Returns (lockdown report, what the runner said after the action or None, the runner's wait status, the
    intermediate's wait status)."""
    r, w = os.pipe()
    mid = os.fork()
    if mid == 0:
        try:
            os.close(r)
            if mode == "runner":
                warnings = []
                if not sandbox.unshare_pid(warnings):
                    _send(w, {"exception": f"unshare_pid refused: {warnings}"})
                    os._exit(3)
            runner = os.fork()
            if runner == 0:
                rep = {}
                try:
                    if mode == "runner":
                        _lockdown(world, rep, device=device)
                        target = world["parent"]
                    else:
                        import sys

                        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != REPO]
                        active, warnings = [], []
                        target = os.getppid()
                        sandbox.apply_runner({"workdir": world["workdir"], "device": device,
                                              "sandbox": {"landlock": False}}, active, warnings)
                        rep["active"], rep["warnings"] = active, warnings
                    rep["target"] = target
                    _send(w, {"locked": rep})
                except BaseException:
                    _send(w, {"exception": traceback.format_exc()})
                    os._exit(4)
                try:
                    _send(w, {"survived": repr(action(target, world))})
                except OSError as exc:
                    _send(w, {"survived": f"OSError errno {exc.errno} ({exc})"})
                except BaseException:
                    _send(w, {"survived": traceback.format_exc()})
                os._exit(0)
            _send(w, {"runner": runner})
            _send(w, {"status": os.waitpid(runner, 0)[1]})
        except BaseException:
            try:
                _send(w, {"exception": traceback.format_exc()})
            except BaseException:
                pass
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    try:
        while True:
            ready, _, _ = select.select([r], [], [], timeout)
            if not ready:
                os.kill(mid, signal.SIGKILL)
                for line in data.decode().splitlines():
                    if "runner" in json.loads(line):
                        try:
                            os.kill(json.loads(line)["runner"], signal.SIGKILL)
                        except OSError:
                            pass
                pytest.fail(f"the hostile runner hung (so far: {data[:2000]!r})")
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(r)
        mid_status = os.waitpid(mid, 0)[1]
    out = {}
    for line in data.decode().splitlines():
        out.update(json.loads(line))
    assert "exception" not in out, out["exception"]
    assert "locked" in out and "status" in out, out
    return out["locked"], out.get("survived"), out["status"], mid_status


_ARCH = {"x86_64": dict(clone=56, tgkill=234, perf_event_open=298, userfaultfd=323),
         "aarch64": dict(clone=220, tgkill=131, perf_event_open=241, userfaultfd=282)}.get(os.uname().machine)
_SYS_PIDFD_OPEN, _SYS_CLONE3 = 434, 435  # generic numbering: x86-64 and arm64


def _syscall(nr, *args):
    """The raw system call; OSError on failure (so a call the filter merely refuses is reported, not fatal)."""
    libc = ctypes.CDLL(None, use_errno=True)
    ret = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return ret


def _inet_connect(target, world):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(("127.0.0.1", world["port"]))
    return "connected"


def _inet6_socket(target, world):
    socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    return "socket"


def _io_uring(target, world):
    return _io_uring_setup()  # an errno, 0 on success


def _ptrace_attach(target, world):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    if libc.ptrace(16, target, None, None) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace")
    return "attached"


def _kill0(target, world):
    os.kill(target, 0)
    return "signalled"


def _kill9(target, world):
    os.kill(target, signal.SIGKILL)
    return "killed"


def _tgkill9(target, world):
    return _syscall(_ARCH["tgkill"], target, target, signal.SIGKILL)


def _kill_everyone0(target, world):
    os.kill(-1, 0)
    return "signalled"


def _unshare_ns(target, world):
    return _syscall(_SYS_UNSHARE, 0x00020000)  # CLONE_NEWNS


def _mount_tmpfs(target, world):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    if libc.mount(b"tmpfs", world["workdir"].encode(), b"tmpfs", 0, None) != 0:
        raise OSError(ctypes.get_errno(), "mount")
    return "mounted"


def _pidfd_open(target, world):
    return _syscall(_SYS_PIDFD_OPEN, target, 0)


def _fork(target, world):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return "forked"


def _execv(target, world):
    os.execv("/bin/true", ["true"])


_SYS_UNSHARE = {"x86_64": 272, "aarch64": 97}.get(os.uname().machine, -1)

_RUNNER, _BARE = "runner", "bare"
_FATAL = [
    ("inet-socket", _inet_connect, (_RUNNER, _BARE)),
    ("inet6-socket", _inet6_socket, (_RUNNER,)),
    ("io_uring_setup", _io_uring, (_RUNNER,)),
    ("ptrace-attach", _ptrace_attach, (_RUNNER, _BARE)),
    ("kill-parent-0", _kill0, (_RUNNER, _BARE)),
    ("kill-parent-SIGKILL", _kill9, (_RUNNER, _BARE)),
    ("tgkill-parent", _tgkill9, (_RUNNER, _BARE)),
    ("kill-everyone-0", _kill_everyone0, (_RUNNER, _BARE)),
    ("unshare-newns", _unshare_ns, (_RUNNER,)),
    ("mount", _mount_tmpfs, (_RUNNER,)),
    ("pidfd_open-parent", _pidfd_open, (_RUNNER, _BARE)),
    ("fork-on-cpu", _fork, (_RUNNER,)),
    ("execv-on-cpu", _execv, (_RUNNER,)),
]
# Hostile calls stay fatal on a GPU runner too (only processes and exec are allowed there).
_FATAL_CUDA = ("inet-socket", "kill-parent-SIGKILL", "mount", "io_uring_setup")


@pytest.mark.skipif(_ARCH is None, reason="system call numbers known for x86-64 and arm64 only")
@pytest.mark.parametrize("action,mode,device", [
    pytest.param(fn, mode, "cpu", id=f"{name}-{mode}") for name, fn, modes in _FATAL for mode in modes
] + [pytest.param(fn, _RUNNER, "cuda", id=f"{name}-runner-cuda") for name, fn, _ in _FATAL if name in _FATAL_CUDA])
def test_hostile_call_kills_the_runner_by_sigsys(world, action, mode, device):
    locked, survived, status, mid_status = _hostile_status(world, action, mode, device)
    # The lockdown took hold before the hostile call.
    assert not [x for x in locked["warnings"] if "seccomp" in x], locked["warnings"]
    assert any(x.startswith("seccomp: signals only to the runner itself") for x in locked["active"]), locked
    assert any("kill the runner (SIGSYS" in x for x in locked["active"]), locked["active"]
    assert any("no new processes or programs" in x for x in locked["active"]) == (device == "cpu"), locked
    if mode == _RUNNER:
        assert locked["ns"] and locked["dropped"] and locked["pid_in_ns"] == 1, locked
        assert not _sandbox_warnings(locked["warnings"]), locked["warnings"]
        # Each step that took hold says so by its code (what kgym requires: src/eval/result.c); the PID namespace,
        # the closed descriptors and the judge's lockdown are granted by the runner's set-up and the judge, not by
        # these steps.
        want = set(sandbox.PROTECTIONS) - {"pid_namespace", "descriptors", "judge_not_dumpable"} - (
            set() if device == "cpu" else {"no_processes"})
        assert set(locked["codes"]) == want, locked["codes"]
    # The hostile call killed the runner (SIGSYS from seccomp), it did not merely fail.
    assert survived is None, f"the runner survived the hostile call: {survived}"
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS, \
        f"wait status {status:#x}: {'signal ' + str(os.WTERMSIG(status)) if os.WIFSIGNALED(status) else 'exit'}"
    # ... and its effect did not happen: the intermediate (the runner's parent, the target in mode "bare") and
    # pytest are alive, and the TCP listener got no connection.
    assert os.WIFEXITED(mid_status) and os.WEXITSTATUS(mid_status) == 0, f"intermediate status {mid_status:#x}"
    with pytest.raises(BlockingIOError):
        world["listener"].accept()


# ---------------------------------------------------------------------------------------------------------------
# Refused (errno) calls and the honest path.
# ---------------------------------------------------------------------------------------------------------------

def _errno_of_syscall(nr, *args):
    return _errno_of(lambda: _syscall(nr, *args))


def test_runner_is_locked_down_and_honest_work_still_runs(world):
    """A CPU runner (the job's default device): the namespace stage, the calls that are only refused (errno),
    and the honest path: threads, torch and a Triton kernel under TRITON_INTERPRET=1, its workdir."""
    def runner(rep):
        os.environ["TRITON_INTERPRET"] = "1"
        _lockdown(world, rep)
        # Hostile, merely refused.
        rep["secret_errno"] = _errno_of(lambda: open(world["secret"]).read())
        rep["repo_errno"] = _errno_of(lambda: open(world["repo_file"]).read())
        rep["root_listing_errno"] = _errno_of(lambda: os.listdir(os.path.dirname(REPO)))
        if _ARCH:
            rep["clone_newuser_errno"] = _errno_of_syscall(_ARCH["clone"], 0x10000000 | signal.SIGCHLD, 0, 0, 0, 0)
            rep["perf_event_open_errno"] = _errno_of_syscall(_ARCH["perf_event_open"], 0, 0, -1, -1, 0)
            rep["userfaultfd_errno"] = _errno_of_syscall(_ARCH["userfaultfd"], 0)
            rep["clone3_errno"] = _errno_of_syscall(_SYS_CLONE3, 0, 0)
        rep["pgrp_in_ns"] = os.getpgrp()
        rep["proc_pids"] = sorted(int(d) for d in os.listdir("/proc") if d.isdigit())
        rep["env"] = dict(os.environ)
        rep["uid"] = (os.getuid(), os.geteuid(), os.getgid(), os.getgroups())
        # Honest.
        import threading

        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

        x, y = torch.arange(8, dtype=torch.float32), torch.ones(8)
        out = torch.empty(8)
        add[(1,)](x, y, out, 8, BLOCK=8)
        rep["triton_ok"] = torch.equal(out, x + y)
        seen = []
        threads = [threading.Thread(target=lambda i=i: seen.append(i * i)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rep["threads"] = sorted(seen)
        rep["pthread_kill_errno"] = _errno_of(lambda: signal.pthread_kill(threading.get_ident(), 0))
        path = os.path.join(world["run"], "scratch.txt")
        with open(path, "w") as f:
            f.write("hello")
        rep["workdir_rw"] = open(path).read()
        with tempfile.NamedTemporaryFile() as f:
            rep["tempfile"] = f.name
        rep["kill_self_errno"] = _errno_of(lambda: os.kill(os.getpid(), 0))
        rep["kill_group_errno"] = _errno_of(lambda: os.kill(0, 0))

    rep = _collect(lambda rep: _in_new_pid_ns(runner, rep))
    assert "exception" not in rep, rep["exception"]
    w = world
    # The namespace stage.
    assert rep["unshare_pid"] and rep["pid_in_ns"] == 1 and rep["ns"], rep
    assert sorted(rep["tmp_listing"]) == rep["tmp_kept"] and rep["shm_listing"] == [], rep
    assert not os.path.exists(f"/tmp/{w['probe']}") and not os.path.exists(f"/dev/shm/{w['probe']}")
    assert rep["netns_connect_errno"] in (errno.ENETUNREACH, errno.ECONNREFUSED, errno.EADDRNOTAVAIL), rep
    assert rep["dropped"], rep["warnings"]
    assert any("no new processes or programs (CPU)" in x for x in rep["active"]), rep["active"]
    # Hostile actions that are only refused.
    assert rep["secret_errno"] == errno.EACCES
    # Landlock refuses it; in a checkout under /tmp the private /tmp hides it first (only the harness is bound back).
    in_tmp = sandbox._beneath(os.path.realpath(REPO), "/tmp")
    assert rep["repo_errno"] == (errno.ENOENT if in_tmp else errno.EACCES), rep["repo_errno"]
    assert rep["root_listing_errno"] == errno.EACCES
    if _ARCH:
        assert rep["clone_newuser_errno"] == errno.EPERM
        assert rep["perf_event_open_errno"] == errno.EPERM  # unfiltered, a NULL attr would give EFAULT
        assert rep["userfaultfd_errno"] == errno.EPERM
        assert rep["clone3_errno"] == errno.ENOSYS  # unfiltered: EINVAL
    assert rep["pgrp_in_ns"] == 0  # the group leader is outside
    assert w["parent"] not in rep["proc_pids"] and rep["proc_pids"] == [1], rep["proc_pids"]
    assert rep["ppid_in_ns"] == 0
    assert "KGYM_TOKEN" not in rep["env"] and "MY_API_KEY" not in rep["env"] and "TRITON_DEBUG_TOKEN" not in rep["env"]
    assert rep["env"]["HOME"] == w["run"] and rep["env"]["TMPDIR"] == os.path.join(w["run"], "tmp")
    assert rep["env"].get("TRITON_INTERPRET") == "1"
    assert rep["uid"] == [RUNNER_UID, RUNNER_UID, RUNNER_UID, []]
    # The honest path.
    assert rep["triton_ok"] is True
    assert rep["threads"] == [0, 1, 4, 9] and rep["pthread_kill_errno"] == 0
    assert rep["workdir_rw"] == "hello" and rep["tempfile"].startswith(w["run"])
    assert rep["kill_self_errno"] == 0 and rep["kill_group_errno"] == 0
    assert os.stat(w["run"]).st_uid == RUNNER_UID
    assert not _sandbox_warnings(rep["warnings"]), rep["warnings"]
    # What the runner wrote lay in its own tmpfs: the host's folder under it stays empty.
    assert os.listdir(w["run"]) == []
    for name in ("source_readonly", "import_path", "workdir_limit"):
        assert any(x.startswith(name + ":") for x in rep["active"]), (name, rep["active"])
        assert not any(x.startswith(name + ":") for x in rep["warnings"]), (name, rep["warnings"])


def test_cuda_runner_may_start_processes_and_programs(world):
    """With device "cuda" (Triton's compilers run as subprocesses) fork and threads stay allowed, and the
    compiler toolchain can be executed, but no other program: not a shell, not a script the runner wrote;
    nothing of CUDA is used here."""
    import shutil

    cc = shutil.which("gcc") or shutil.which("cc")

    def runner(rep):
        _lockdown(world, rep, device="cuda")
        child = os.fork()
        if child == 0:
            os._exit(7)
        rep["fork_status"] = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
        import subprocess
        import threading

        # What Triton does for each launcher stub: gcc (cc1, as, collect2, ld) builds a shared object.
        src = os.path.join(world["run"], "stub.c")
        with open(src, "w") as f:
            f.write("int kgym_stub(void) { return 42; }\n")
        so = os.path.join(world["run"], "stub.so")
        built = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", so, src], capture_output=True, text=True) \
            if cc else None
        rep["subprocess"] = "" if not cc else (str(ctypes.CDLL(so).kgym_stub()) if built.returncode == 0
                                                else "failed: " + built.stderr[-500:])
        rep["shell_errno"] = _errno_of(lambda: subprocess.run(["/bin/sh", "-c", "echo shell"]))
        script = os.path.join(world["run"], "mine.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho mine\n")
        os.chmod(script, 0o755)
        rep["own_script_errno"] = _errno_of(lambda: subprocess.run([script]))
        rep["system_status"] = os.system("echo KGATK shell ran")
        t = threading.Thread(target=lambda: rep.__setitem__("thread", "ran"))
        t.start()
        t.join()
        rep["secret_errno"] = _errno_of(lambda: open(world["secret"]).read())

    rep = _collect(lambda rep: _in_new_pid_ns(runner, rep))
    assert rep["ns"] and rep["dropped"] and rep["pid_in_ns"] == 1, rep
    assert not any("no new processes" in x for x in rep["active"]), rep["active"]
    assert any("kill the runner (SIGSYS" in x for x in rep["active"]), rep["active"]
    assert not _sandbox_warnings(rep["warnings"]), rep["warnings"]
    assert rep["fork_status"] == 7 and rep["thread"] == "ran"
    assert not cc or rep["subprocess"] == "42", rep["subprocess"]  # gcc built a stub, which loads and runs
    assert any(x.startswith("landlock: executes only") and "/bin/sh" not in x for x in rep["active"])
    assert rep["shell_errno"] == errno.EACCES and rep["own_script_errno"] == errno.EACCES
    assert rep["system_status"] != 0  # system()'s shell could not be executed
    assert rep["secret_errno"] == errno.EACCES


@pytest.mark.parametrize("landlock", [True, False])
def test_landlock_and_allowed_signals_without_namespaces(world, landlock):
    """apply_runner alone (still root, no namespaces): Landlock holds even for root; the process itself, its
    group and its threads stay reachable by signals (a signal to anything else kills the runner: see
    test_hostile_call_kills_the_runner_by_sigsys, mode "bare"); clone() with namespace flags is refused."""
    def child(rep):
        import sys
        import threading

        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != REPO]
        active, warnings = [], []
        sandbox.apply_runner({"workdir": world["workdir"], "sandbox": {"landlock": landlock}}, active, warnings)
        rep["warnings"], rep["active"] = warnings, active
        rep["secret_errno"] = _errno_of(lambda: open(world["secret"]).read())
        rep["write_outside_errno"] = _errno_of(lambda: open(os.path.join(os.path.dirname(world["secret"]), "x"), "w"))
        rep["kill_self_errno"] = _errno_of(lambda: os.kill(os.getpid(), 0))
        rep["kill_group_errno"] = _errno_of(lambda: os.kill(-os.getpgrp(), 0))
        rep["kill_zero_errno"] = _errno_of(lambda: os.kill(0, 0))
        rep["pthread_kill_errno"] = _errno_of(lambda: signal.pthread_kill(threading.get_ident(), 0))
        if _ARCH:
            rep["tgkill_self_errno"] = _errno_of_syscall(_ARCH["tgkill"], os.getpid(), os.getpid(), 0)
            rep["clone_newuser_errno"] = _errno_of_syscall(_ARCH["clone"], 0x10000000 | signal.SIGCHLD, 0, 0, 0, 0)
        rep["uid"] = os.getuid()

    rep = _collect(child)
    assert not [x for x in rep["warnings"] if ("landlock" in x and landlock) or "seccomp" in x], rep["warnings"]
    assert any(x.startswith("seccomp: signals only to the runner itself") for x in rep["active"]), rep["active"]
    assert rep["uid"] == 0
    if landlock:
        assert rep["secret_errno"] == errno.EACCES and rep["write_outside_errno"] == errno.EACCES
    else:
        assert rep["secret_errno"] == 0
    assert rep["kill_self_errno"] == 0 and rep["kill_group_errno"] == 0 and rep["kill_zero_errno"] == 0
    assert rep["pthread_kill_errno"] == 0
    if _ARCH:
        assert rep["tgkill_self_errno"] == 0
        assert rep["clone_newuser_errno"] == errno.EPERM


@pytest.mark.parametrize("device,drop", [("cuda", True), ("cuda", False), ("cpu", True)])
def test_trusted_triton_modules_are_read_only_for_the_runner(world, device, drop):
    """The machine's Triton C modules (tritoncache.py), root's, 0644 in 0755 directories: a GPU runner (its own uid,
    or still root with Landlock alone) reads and loads them, and can neither add, replace, rename nor change one;
    a CPU runner, which needs none, cannot even read them."""
    import shutil
    import subprocess

    from kgym_harness.shared import tritoncache

    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler to build a module with")
    base = tempfile.mkdtemp(prefix="kgym-modules-", dir="/var/tmp")
    os.chmod(base, 0o755)
    mods, why = tritoncache.safe_dir(os.path.join(base, "triton-modules"), 0o755)
    assert why is None
    key = os.path.join(mods, "KEY")
    os.mkdir(key, 0o755)
    so = os.path.join(key, "__triton_launcher" + tritoncache.SUFFIX)
    src = os.path.join(base, "m.c")
    with open(src, "w") as f:
        f.write("int kgym_trusted(void) { return 7; }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", so, src], check=True)
    os.chmod(so, 0o644)
    with open(so, "rb") as f:
        before = f.read()

    def runner(rep):
        tritoncache._resolved = mods  # as the zygote (or the runner before its sandbox) found it
        if drop:
            _lockdown(world, rep, device=device)
        else:
            active, warnings = [], []
            sandbox.apply_runner({"workdir": world["workdir"], "device": device}, active, warnings)
            rep["active"], rep["warnings"] = active, warnings
        rep["uid"] = os.getuid()
        rep["read_errno"] = _errno_of(lambda: open(so, "rb").read())
        if rep["read_errno"] == 0:
            rep["loaded"] = ctypes.CDLL(so).kgym_trusted()
            # What the runner's Triton asks, in its sandbox: the directory still judged safe, the module served.
            rep["modules_dir"] = tritoncache.modules_dir()
            os.environ["TRITON_CACHE_DIR"] = os.path.join(world["run"], "triton-cache")
            reader = tritoncache.reader_class(mods)("KEY")
            rep["served"] = reader.get_file(os.path.basename(so))
        rep["overwrite_errno"] = _errno_of(lambda: open(so, "r+b").write(b"x"))
        rep["truncate_errno"] = _errno_of(lambda: os.truncate(so, 0))
        rep["plant_errno"] = _errno_of(lambda: open(os.path.join(key, "planted" + tritoncache.SUFFIX), "wb"))
        rep["mkdir_errno"] = _errno_of(lambda: os.mkdir(os.path.join(mods, "NEWKEY")))
        rep["rename_errno"] = _errno_of(lambda: os.rename(so, so + ".old"))
        rep["unlink_errno"] = _errno_of(lambda: os.unlink(so))
        rep["chmod_errno"] = _errno_of(lambda: os.chmod(so, 0o666))

    try:
        rep = _collect(lambda rep: _in_new_pid_ns(runner, rep) if drop else runner(rep))
        assert not _sandbox_warnings(rep["warnings"]), rep["warnings"]
        assert rep["uid"] == (RUNNER_UID if drop else 0)
        landlock_reads = next(x for x in rep["active"] if x.startswith("landlock (ABI"))
        if device == "cuda":
            assert mods in landlock_reads, landlock_reads
            assert rep["read_errno"] == 0 and rep["loaded"] == 7
            assert rep["modules_dir"] == [mods, None] and rep["served"] == so
        else:
            assert mods not in landlock_reads and rep["read_errno"] == errno.EACCES
        for what in ("overwrite", "truncate", "plant", "mkdir", "rename", "unlink"):
            assert rep[f"{what}_errno"] in (errno.EACCES, errno.EPERM), (what, rep)
        assert rep["chmod_errno"] in (errno.EACCES, errno.EPERM) or not drop  # Landlock does not cover chmod
        with open(so, "rb") as f:
            assert f.read() == before
        assert sorted(os.listdir(mods)) == ["KEY"] and os.listdir(key) == [os.path.basename(so)]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_refused_steps_degrade_to_warnings(world):
    """Every step repeated where the kernel refuses it says so in a warning and raises nothing.  The repeats run
    after the uid drop but before seccomp is loaded (once loaded, unshare and mount kill the runner): the
    first apply_runner leaves seccomp off, the second (after the repeats) loads it."""
    def runner(rep):
        job, active, warnings = _lockdown(world, rep, seccomp=False)
        rep["first_warnings"] = warnings
        later_active, later = sandbox.Granted(), []
        rep["unshare_pid_again"] = sandbox.unshare_pid(later)
        rep["ns_again"] = sandbox.enter_runner_namespaces(world["workdir"], ["/nonexistent"], later_active, later)
        rep["drop_again"] = sandbox.drop_privileges(RUNNER_UID + 1, RUNNER_UID + 1, later, later_active)
        job["sandbox"] = {}
        sandbox.apply_runner(job, later_active, later)
        rep["judge"] = sandbox.judge_lockdown(later_active, later)
        rep["later"], rep["later_active"], rep["later_codes"] = later, list(later_active), later_active.codes
        rep["uid_after"] = os.getuid()

    rep = _collect(lambda rep: _in_new_pid_ns(runner, rep))
    later = rep["later"]
    assert "seccomp disabled by the policy" in rep["first_warnings"]
    assert rep["unshare_pid_again"] is False and any(x.startswith("pid namespace not created") for x in later)
    assert rep["ns_again"] is False and any(x.startswith("mount namespace not created") for x in later)
    assert any(x.startswith("network namespace not created") for x in later)
    assert rep["drop_again"] is False and any(x.startswith("privileges not dropped") for x in later)
    assert rep["uid_after"] == RUNNER_UID
    assert any("kill the runner (SIGSYS" in x for x in rep["later_active"]), rep["later_active"]
    assert not [x for x in later if x.startswith("seccomp")], later
    assert rep["judge"] is True  # PR_SET_DUMPABLE stays allowed
    # A refused step grants no code (kgym requires codes: a protection is never assumed); seccomp, off in the first
    # lockdown, is granted only by the second, which loaded it.
    assert "seccomp" not in rep["codes"] and "no_processes" not in rep["codes"], rep["codes"]
    codes = set(rep["later_codes"])
    assert not codes & {"mount_namespace", "network_namespace", "ipc_namespace", "uts_namespace", "own_uid",
                        "fresh_proc", "private_tmp"}, codes
    assert {"seccomp", "seccomp_signals", "judge_not_dumpable", "clean_environment", "rlimits"} <= codes, codes


def test_drop_privileges_refuses_when_the_interpreter_would_be_unreachable(monkeypatch):
    hidden = tempfile.mkdtemp(prefix="kgym-hidden-", dir="/var/tmp")
    inner = os.path.join(hidden, "python")
    os.mkdir(inner)
    os.chmod(hidden, 0o700)

    def child(rep):
        monkeypatch.setattr(sandbox, "python_paths", lambda: [inner])
        warnings, active = [], []
        rep["dropped"] = sandbox.drop_privileges(RUNNER_UID, RUNNER_UID, warnings, active)
        rep["warnings"], rep["uid"] = warnings, os.getuid()
        os.chmod(hidden, 0o711)
        rep["dropped_when_reachable"] = sandbox.drop_privileges(RUNNER_UID, RUNNER_UID, warnings, active)
        rep["uid2"] = os.getuid()

    try:
        rep = _collect(child)
    finally:
        shutil.rmtree(hidden, ignore_errors=True)
    assert rep["dropped"] is False and rep["uid"] == 0
    assert any("privileges not dropped" in x and inner in x for x in rep["warnings"])
    assert rep["dropped_when_reachable"] is True and rep["uid2"] == RUNNER_UID


@pytest.mark.parametrize("lock", [False, True])
def test_judge_lockdown_hides_the_judge_from_its_own_uid(lock):
    """A judge of uid U (made dumpable first) and a prober of the same uid: /proc/<judge>/environ is readable
    unless the judge called judge_lockdown."""
    uid = RUNNER_UID + 100
    r, w = os.pipe()
    judge = os.fork()
    if judge == 0:
        try:
            os.close(r)
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(4, 1, 0, 0, 0)
            out = []
            if lock:
                sandbox.judge_lockdown(out, out)
            os.write(w, (str(libc.prctl(3, 0, 0, 0, 0)) + "\n").encode())
            signal.pause()
        finally:
            os._exit(0)
    os.close(w)
    try:
        dumpable = int(os.read(r, 100).decode())

        def prober(rep):
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            rep["environ_errno"] = _errno_of(lambda: open(f"/proc/{judge}/environ", "rb").read())
            rep["mem_errno"] = _errno_of(lambda: open(f"/proc/{judge}/mem", "rb"))

        rep = _collect(prober)
    finally:
        os.kill(judge, signal.SIGKILL)
        os.waitpid(judge, 0)
        os.close(r)
    if lock:
        assert dumpable == 0
        assert rep["environ_errno"] == errno.EACCES and rep["mem_errno"] == errno.EACCES
    else:
        assert dumpable == 1 and rep["environ_errno"] == 0 and rep["mem_errno"] == 0


def test_environment_allowlist():
    keep = ["PATH", "LANG", "LC_ALL", "TRITON_CACHE_DIR", "CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF",
            "OMP_NUM_THREADS", "LD_LIBRARY_PATH"]
    drop = ["KGYM_TOKEN", "KGYM_ANYTHING", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "TRITON_API_KEY", "DB_PASSWORD",
            "SSH_AUTH_SOCK", "PYTORCH_JIT", "HOME", "USER", "TERM",
            # kgym's zygote sets it for the judge (zygote.c); the candidate's context keeps the driver's default
            "CUDA_DEVICE_MAX_CONNECTIONS"]
    assert all(sandbox._env_allowed(k) for k in keep)
    assert not any(sandbox._env_allowed(k) for k in drop)


def test_workdir_and_cache_under_tmp_stay_reachable(world):
    """A workdir and a shared (Triton) cache under /tmp are bound back at the same paths after /tmp is covered;
    the rest of the host's /tmp is gone; the cache listed in sandbox.writable can be written."""
    from kgym_harness.judge import child

    base = tempfile.mkdtemp(prefix="kgym-tmpcase-", dir="/tmp")
    os.chmod(base, 0o755)
    workdir, cache = os.path.join(base, "work"), os.path.join(base, "triton-cache")
    os.mkdir(workdir)
    child._prepare_workdir({"workdir": workdir, "runner_uid": RUNNER_UID})
    run = os.path.join(workdir, "run")
    os.mkdir(cache, 0o1777)
    os.chmod(cache, 0o1777)
    with open(os.path.join(cache, "entry"), "w") as f:
        f.write("cached")
    other = os.path.join(base, "other.txt")
    with open(other, "w") as f:
        f.write("host tmp")

    def runner(rep):
        active, warnings = [], []
        rep["tmp_kept"] = _kept_in_tmp()
        rep["ns"] = sandbox.enter_runner_namespaces(workdir, [cache], active, warnings)
        rep["cwd"] = os.getcwd()
        rep["base_listing"] = sorted(os.listdir(base))
        rep["other_exists"] = os.path.exists(other)
        rep["tmp_listing"] = os.listdir("/tmp")
        sandbox.prepare_dir_for(run, RUNNER_UID, RUNNER_UID, warnings)
        sandbox.drop_privileges(RUNNER_UID, RUNNER_UID, warnings, active)
        sandbox.apply_runner({"workdir": workdir, "sandbox": {"writable": [cache]}}, active, warnings)
        rep["cache_read"] = open(os.path.join(cache, "entry")).read()
        with open(os.path.join(cache, "new"), "w") as f:
            f.write("x")
        with open(os.path.join(run, "w.txt"), "w") as f:
            f.write("y")
        rep["warnings"] = warnings

    try:
        rep = _collect(lambda rep: _in_new_pid_ns(runner, rep))
        assert "exception" not in rep, rep["exception"]
        assert rep["ns"] and rep["cwd"] == workdir
        assert rep["base_listing"] == ["triton-cache", "work"] and rep["other_exists"] is False
        assert sorted(rep["tmp_listing"]) == sorted({os.path.basename(base), *rep["tmp_kept"]})
        assert rep["cache_read"] == "cached"
        assert os.path.exists(os.path.join(cache, "new")) and os.path.exists(os.path.join(run, "w.txt"))
        assert not [x for x in rep["warnings"] if "landlock" in x or "seccomp" in x or "not" in x], rep["warnings"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_runner_programs_are_the_toolchain_only(tmp_path, monkeypatch):
    """What a runner may execute: nothing on the CPU; on a GPU the compiler toolchain (gcc's real file, its own
    programs' tree, the ELF interpreter), never a shell, never a directory named by TRITON_LIBCUDA_PATH."""
    import shutil

    assert sandbox.runner_programs({"device": "cpu"}) == []
    monkeypatch.setenv("TRITON_LIBCUDA_PATH", str(tmp_path))
    progs = sandbox.runner_programs({"device": "cuda"})
    shells = {os.path.realpath(p) for p in ("/bin/sh", "/bin/bash", "/bin/dash") if os.path.exists(p)}
    assert shells and not shells & set(progs), progs
    assert str(tmp_path) not in progs
    cc = shutil.which("gcc")
    if cc:
        assert os.path.realpath(cc) in progs
    assert any("ld-linux" in p for p in progs), progs


# ---------------------------------------------------------------------------------------------------------------
# Checked bytes = executed bytes: the source folder the judge writes (transport.source_path) cannot be changed by
# the runner, whichever guard stands (sandbox._write_guards); the runner's folder is a limited tmpfs; nothing it
# can write is on its import path; only the descriptors it was meant to get are open.
# ---------------------------------------------------------------------------------------------------------------

def _rewrite_routes(path, scratch):
    """Every way a process can change what ``path`` holds or names: (name, action) pairs; each raises OSError
    when refused."""
    import mmap

    folder = os.path.dirname(path)
    payload = b"REWRITTEN = 1\n"

    def spare():
        p = os.path.join(scratch, "spare.py")
        with open(p, "wb") as f:
            f.write(payload)
        return p

    def write():
        with open(path, "wb") as f:
            f.write(payload)

    def rplus():
        with open(path, "r+b") as f:
            f.write(payload)

    def append():
        with open(path, "ab") as f:
            f.write(payload)

    def os_write():
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, payload)
        finally:
            os.close(fd)

    def truncate():
        os.truncate(path, 1)

    def chmod_write():
        os.chmod(path, 0o666)
        rplus()

    def chmod_folder_create():
        os.chmod(folder, 0o777)
        create()

    def proc_reopen():
        with open(path, "rb") as ro:
            with open(f"/proc/self/fd/{ro.fileno()}", "r+b") as f:
                f.write(payload)

    def mmap_shared():
        fd = os.open(path, os.O_RDWR)
        try:
            with mmap.mmap(fd, 1, mmap.MAP_SHARED, mmap.PROT_WRITE) as m:
                m[:1] = b"#"
        finally:
            os.close(fd)

    def unlink():
        os.unlink(path)

    def replace():
        os.replace(spare(), path)

    def symlink():
        os.symlink(spare(), path + ".link")
        os.replace(path + ".link", path)

    def hardlink_out():
        link = os.path.join(scratch, "hl.py")
        os.link(path, link)
        with open(link, "r+b") as f:
            f.write(payload)

    def create():
        with open(os.path.join(folder, "planted.py"), "wb") as f:
            f.write(payload)

    def pycache():
        os.mkdir(os.path.join(folder, "__pycache__"))

    def rename_folder():
        os.rename(folder, folder + ".old")

    def rename_workdir():
        parent = os.path.dirname(folder)
        os.rename(parent, parent + ".old")

    return [(f.__name__, f) for f in (write, rplus, append, os_write, truncate, chmod_write, chmod_folder_create,
                                      proc_reopen, mmap_shared, unlink, replace, symlink, hardlink_out, create,
                                      pycache, rename_folder, rename_workdir)]


# Which guards each configuration leaves standing: the full runner sequence has all three; each other one
# keeps one alone (the others switched off); "none" keeps none, and there the routes must work (the test could
# fail) and the runner must say so.
_GUARD_MODES = {
    "runner": ("Landlock", "read-only mount", "uid"),
    "landlock": ("Landlock",),
    "uid": ("uid",),
    "mount": ("read-only mount",),
    "none": (),
}


@pytest.mark.parametrize("mode", sorted(_GUARD_MODES))
def test_checked_source_cannot_be_changed_by_the_runner(mode):
    from kgym_harness.judge import child

    # Under /tmp, as kgym's workdirs are: the runner's view binds the workdir back there (a mount point), which
    # is what lets a read-only mount stand alone even for a process left as root.
    workdir = base = tempfile.mkdtemp(prefix="kgym-srccase-", dir="/tmp")
    job = {"workdir": workdir, "runner_uid": RUNNER_UID, "candidate": "candidate.py",
           "sandbox": {"landlock": mode in ("runner", "landlock")}}
    child._prepare_workdir(job)
    original = b"import torch\n\nCHECKED = True\n"
    path = child._write_source(job, original)
    run = os.path.join(workdir, "run")

    def runner(rep):
        import sys

        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != REPO]
        active, warnings = [], []
        if mode in ("runner", "mount", "uid"):
            # (the uid alone still needs the namespace: the interpreter under /root is reachable only there)
            rep["ns"] = sandbox.enter_runner_namespaces(workdir, [], active, warnings)
        if mode in ("runner", "mount"):
            sandbox.mount_workdir(workdir, RUNNER_UID if mode == "runner" else None, job, active, warnings)
        if mode in ("runner", "uid"):
            sandbox.prepare_dir_for(run, RUNNER_UID, RUNNER_UID, warnings)
            rep["dropped"] = sandbox.drop_privileges(RUNNER_UID, RUNNER_UID, warnings, active)
        sandbox.apply_runner(job, active, warnings)
        rep["active"], rep["warnings"] = active, warnings
        scratch = os.environ["TMPDIR"]
        rep["routes"] = {}
        for name, action in _rewrite_routes(path, scratch):
            try:
                action()
                rep["routes"][name] = "landed"
            except OSError as exc:
                rep["routes"][name] = errno.errorcode.get(exc.errno, str(exc.errno))

    try:
        rep = _collect(lambda rep: _in_new_pid_ns(runner, rep) if mode in ("runner", "mount", "uid") else runner(rep))
        said = next((x for x in rep["active"] if x.startswith("source_readonly:")), "")
        warned = [x for x in rep["warnings"] if x.startswith("source_readonly:")]
        if mode == "none":
            # Nothing guards the folder: the runner says so, and the routes do land (so the assertions of the
            # other modes can fail).
            assert warned and not said, rep
            assert "landed" in rep["routes"].values(), rep["routes"]
            return
        assert said and not warned, rep["warnings"]
        for guard in ("Landlock", "read-only mount", "uid"):
            assert (guard in said) == (guard in _GUARD_MODES[mode]), (guard, said)
        assert "landed" not in rep["routes"].values(), rep["routes"]
        # From outside: the bytes, the folder's entries and modes are the judge's.
        with open(path, "rb") as f:
            assert f.read() == original
        assert os.listdir(os.path.dirname(path)) == ["candidate.py"] and sorted(os.listdir(base)) == ["run", "src"]
        if mode != "landlock":  # Landlock does not cover chmod (a runner left as root may change modes, not bytes)
            assert os.stat(path).st_mode & 0o777 == 0o440 and os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o550
    finally:
        for root, dirs, _files in os.walk(base):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o700)
        shutil.rmtree(base, ignore_errors=True)


def test_runner_folder_is_a_limited_tmpfs(world):
    """run/ and /dev/shm are private tmpfs of the job's size and file count: a runner that fills either meets
    ENOSPC, and nothing of it reaches the host's disk."""
    limits = {"workdir_bytes": 4 << 20, "workdir_files": 64}

    def runner(rep):
        active, warnings = [], []
        job = {"workdir": world["workdir"], "sandbox": dict(limits)}
        rep["ns"] = sandbox.enter_runner_namespaces(world["workdir"], [], active, warnings,
                                                    limits=sandbox.workdir_limits(job))
        sandbox.mount_workdir(world["workdir"], RUNNER_UID, job, active, warnings)
        sandbox.drop_privileges(RUNNER_UID, RUNNER_UID, warnings, active)
        sandbox.apply_runner(job, active, warnings)
        rep["active"], rep["warnings"] = active, warnings
        for where in (world["run"], "/dev/shm"):
            written, err = 0, None
            try:
                with open(os.path.join(where, "big"), "wb") as f:
                    while written < (16 << 20):
                        f.write(b"x" * (1 << 20))
                        f.flush()
                        written += 1 << 20
            except OSError as exc:
                err = exc.errno
            made, err_files = 0, None
            try:
                while made < 1000:
                    open(os.path.join(where, f"f{made}"), "wb").close()
                    made += 1
            except OSError as exc:
                err_files = exc.errno
            rep[where] = {"written": written, "errno": err, "files": made, "files_errno": err_files}

    rep = _collect(lambda rep: _in_new_pid_ns(runner, rep))
    assert rep["ns"], rep["warnings"]
    said = next(x for x in rep["active"] if x.startswith("workdir_limit:"))
    assert "4 MiB and 64 files" in said, said
    for where in (world["run"], "/dev/shm"):
        r = rep[where]
        assert r["errno"] == errno.ENOSPC and r["written"] <= (4 << 20), (where, r)
        assert r["files_errno"] == errno.ENOSPC and r["files"] <= 64, (where, r)
    assert os.listdir(world["run"]) == []


def test_import_path_holds_nothing_the_runner_can_write(world):
    """sys.path entries beneath the runner's writable folders, '' and relative entries are taken off; with
    nothing guarding the rest (root, no Landlock) the runner says the import path is open."""
    def child_proc(rep, landlock):
        import sys

        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != REPO]
        sys.path[:0] = ["", "relative/dir", world["run"], os.path.join(world["run"], "tmp")]
        active, warnings = [], []
        sandbox.apply_runner({"workdir": world["workdir"], "sandbox": {"landlock": landlock}}, active, warnings)
        rep["path"], rep["active"], rep["warnings"] = list(sys.path), active, warnings
        rep["dont_write_bytecode"] = sys.dont_write_bytecode

    rep = _collect(lambda rep: child_proc(rep, True))
    assert not any(p in ("", "relative/dir") or p.startswith(world["run"]) for p in rep["path"]), rep["path"]
    said = next(x for x in rep["active"] if x.startswith("import_path:"))
    assert "taken off it" in said and repr(world["run"]) in said, said
    assert rep["dont_write_bytecode"] is True
    rep = _collect(lambda rep: child_proc(rep, False))
    assert any(x.startswith("import_path: not active") for x in rep["warnings"]), rep["warnings"]


def test_close_descriptors_keeps_only_what_is_named():
    """What the runner (and the zygote's intermediate) do first: every descriptor but the named ones and 0-2 is
    closed, whatever its number."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            extra = os.open("/dev/null", os.O_RDONLY)
            high = os.dup2(extra, 200, inheritable=True)
            closed = sandbox.close_descriptors([w])

            def is_open(fd):
                try:
                    os.fstat(fd)
                    return True
                except OSError:
                    return False

            os.write(w, json.dumps({"closed": closed, "open": [fd for fd in (r, extra, high, 0, 1, 2) if is_open(fd)],
                                    "w": is_open(w), "r": r, "extra": extra, "high": high}).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    rep = json.loads(data)
    assert rep["w"] and rep["open"] == [0, 1, 2], rep
    assert rep["closed"] >= 3, rep
