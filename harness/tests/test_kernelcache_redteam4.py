"""Fourth red team of the trusted compile cache: the worker's private tmpfs and its entry sent over its socket
(c75c417: ``_private_folder``, ``_collect``, ``_file(key, sent, ...)``, ``_recv(worker, ANSWER_LIMIT)``).

Each test is one attack, asserting the SAFE behaviour: it fails where the attack works.  A subverted worker is
simulated by a skeleton that does what such a worker may do once it runs (arbitrary code as the worker, inside its
Landlock: here root with uid=None, as test_kernelcache.py's worker tests).  CPU only, as test_kernelcache.py."""

import os
import signal
import tempfile
import threading
import time

import pytest

from kgym_harness.judge import kernelcache

from test_kernelcache import (ADD, TARGET, cache_dirs, compiled_not_interpreted, kernel_of, load,  # noqa: F401
                              service_for, spec_for)

# The worker's end of its socket, found by a subverted worker (the only socket it holds).
_SOCK = ("import os\n"
         "def _sock():\n"
         "    for n in os.listdir('/proc/self/fd'):\n"
         "        try:\n"
         "            if os.readlink('/proc/self/fd/' + n).startswith('socket:'):\n"
         "                return int(n)\n"
         "        except OSError:\n"
         "            pass\n")


@pytest.fixture
def own_helper():
    """A helper of this test's own: an attack that spoils the helper's protocol must not spoil other tests."""
    h = kernelcache.start(fresh=True)
    assert h is not None
    yield h
    h.sock.close()
    os.waitpid(h.pid, 0)


def _pids(test):
    """The pids for which ``test(pid)`` holds; a process gone while it is read (OSError, IndexError) does not."""
    pids = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                if test(p):
                    pids.append(int(p))
            except (OSError, IndexError):
                pass
    return pids


def _read(pid, name):
    with open(f"/proc/{pid}/{name}") as f:
        return f.read()


def _stray(comm):
    """The pids whose name is ``comm`` (a name this test's subverted worker gave its descendant); a zombie holds
    nothing."""
    return _pids(lambda p: _read(p, "comm").strip() == comm and _read(p, "stat").rsplit(")", 1)[1].split()[0] != "Z")


def _kill_stray(comm):
    for pid in _stray(comm):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _tmpfs_holders(out):
    """The pids that still have a tmpfs mounted at ``out`` (the worker's private folder) in their namespace."""
    return _pids(lambda p: any(line.split()[4] == out and " - tmpfs " in line
                               for line in _read(p, "mountinfo").splitlines()))


def _allocated(top):
    """Bytes of disk the tree ``top`` holds (blocks, not sizes: a file's size says nothing of what is allocated)."""
    total = 0
    for root_, dirs, files in os.walk(top):
        for n in dirs + files:
            total += os.lstat(os.path.join(root_, n)).st_blocks * 512
    return total


@pytest.mark.skipif(os.geteuid() != 0, reason="a private tmpfs needs a mount namespace (root)")
def test_the_workers_log_is_no_way_onto_the_hosts_disk(tmp_path, own_helper):
    """The worker opens ``worker.log`` in its folder and makes it its stdout and stderr *before* its tmpfs is
    mounted there: the descriptor stays on the host's disk.  RLIMIT_FSIZE bounds where a write ends, not what
    fallocate(FALLOC_FL_KEEP_SIZE) reserves beyond the end, and Landlock has no right for fallocate: a subverted
    worker reserves any amount of the disk the job store shares (here 256 MiB; 50 GiB takes a second) for as long as
    it lives, which the private tmpfs was to stop."""
    out = tmp_path / "work"
    out.mkdir()
    skeleton = ("import ctypes\n"
                "libc = ctypes.CDLL(None, use_errno=True)\n"
                "for fd in (1, 2):\n"
                "    libc.fallocate(fd, 1, ctypes.c_longlong(0), ctypes.c_longlong(256 << 20))  # KEEP_SIZE\n")
    answer = own_helper.compile({"skeleton": skeleton, "qualname": "k", "spec": "{}", "target": TARGET,
                                 "out": str(out), "uid": None}, 30)
    assert "error" in answer, answer
    used = _allocated(out)
    assert used <= kernelcache.MAX_BYTES, \
        f"the worker reserved {used >> 20} MiB of the host's disk through a descriptor opened before its tmpfs"


@pytest.mark.parametrize("payload", [
    # a length past ANSWER_LIMIT: _recv raises ValueError
    "os.write(s, b'[' * 64)\n",
    # within the limit, not JSON: json.loads raises ValueError
    "os.write(s, struct.pack('!I', 5) + b'nope!')\n",
    # within the limit, nested past Python's recursion limit: json.loads raises RecursionError
    "os.write(s, struct.pack('!I', 200000) + b'[' * 200000)\n",
], ids=["too-long", "not-json", "too-deep"])
def test_a_workers_bad_answer_does_not_spoil_the_helper_for_later_evaluations(cache_dirs, own_helper, payload):
    """Helper.compile reads the worker's answer, then the helper's word on how the worker ended.  Where reading the
    answer raises (a length past the limit, text that is not JSON, JSON nested past the recursion limit: the last is
    not even a ValueError, and leaves Helper.compile as an exception), the helper's word is never read: it stays in
    the judge's socket and every later exchange with the helper is one message behind (the next request is told
    "the helper is gone"; after it, each request is sent to the previous request's idle worker, whose budget ran
    from its fork).  One subverted worker so spoils the cache of every later evaluation of that judge."""
    skeleton = _SOCK + "import struct\ns = _sock()\n" + payload + "os._exit(0)\n"
    out = tempfile.mkdtemp(prefix="r4-")
    try:
        answer = own_helper.compile({"skeleton": skeleton, "qualname": "k", "spec": "{}", "target": TARGET,
                                     "out": out, "uid": None}, 30)
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"Helper.compile raised {type(exc).__name__} on a worker's answer (it returns facts)")
    finally:
        kernelcache._remove_tree(out, 10)
    assert "error" in answer, answer
    # Another evaluation, honest, on the same judge and helper.
    svc = service_for(ADD, own_helper)
    spec, _ = spec_for(kernel_of(load(ADD, "/kgym-test/r4-honest.py"), "add"), block=512)
    assert svc.ensure("add", spec) and svc.facts["compiled"] == 1, svc.reasons


def test_a_workers_descendant_cannot_keep_the_judge_waiting(tmp_path, own_helper):
    """The helper kills the worker's process group past its budget; a descendant in a session of its own
    (fork, setsid: no seccomp or PID namespace stops it) survives and holds the worker's socket.  The judge's
    timeout (budget + 30 s) is per recv: a byte every 2 s keeps it reading for as long as the descendant likes
    (here 80 s; the evaluation's 60 s budget of compiles and waits says nothing)."""
    comm = f"r4hang{os.getpid() % 100000}"
    skeleton = (_SOCK + "import ctypes, struct, time\n"
                "s = _sock()\n"
                "if os.fork() == 0:\n"
                "    os.setsid()\n"
                f"    ctypes.CDLL(None).prctl(15, {comm.encode()!r}, 0, 0, 0)\n"
                "    os.write(s, struct.pack('!I', 1000))\n"
                "    for _ in range(40):\n"
                "        time.sleep(2)\n"
                "        os.write(s, b' ')\n"
                "    os._exit(0)\n"
                "while True:\n"
                "    time.sleep(1)\n")
    out = tmp_path / "work"
    out.mkdir()
    budget = 1.0
    got = []
    t = threading.Thread(target=lambda: got.append(own_helper.compile(
        {"skeleton": skeleton, "qualname": "k", "spec": "{}", "target": TARGET, "out": str(out), "uid": None},
        budget)), daemon=True)
    t0 = time.monotonic()
    try:
        t.start()
        t.join(budget + 30 + 10)
        waited = time.monotonic() - t0
        assert not t.is_alive(), \
            f"the judge still waits on a killed worker's descendant after {waited:.0f} s (budget {budget:.0f} s)"
    finally:
        _kill_stray(comm)
        t.join(60)


@pytest.mark.skipif(os.geteuid() != 0, reason="a private tmpfs needs a mount namespace (root)")
def test_nothing_of_a_worker_outlives_its_compile(tmp_path, own_helper):
    """The private tmpfs "goes with the worker, so nothing is left to remove": it goes with the last process of the
    worker's mount namespace.  A descendant in a session of its own survives the helper's kill of the worker's
    process group, and keeps the tmpfs (up to WORK_BYTES of RAM, not counted in RLIMIT_DATA; it is not on any disk
    the judge's rm reaches) for as long as it likes: one per request, 64 requests an evaluation.  (Where kgym drops
    the worker to the runner's uid, kgym's sweep of that uid ends it with the evaluation, not with the compile.)"""
    comm = f"r4pin{os.getpid() % 100000}"
    skeleton = (_SOCK + "import ctypes, time\n"
                "if os.fork() == 0:\n"
                "    os.setsid()\n"
                f"    ctypes.CDLL(None).prctl(15, {comm.encode()!r}, 0, 0, 0)\n"
                "    os.close(_sock())  # the judge is not kept waiting: only the tmpfs is held\n"
                "    for i in range(8):  # 64 MiB, 8 MiB a file (RLIMIT_FSIZE)\n"
                "        with open(os.path.join(os.environ['HOME'], f'pinned{i}'), 'wb') as f:\n"
                "            f.write(b'x' * (8 << 20))\n"
                "    time.sleep(60)\n"
                "    os._exit(0)\n"
                "while True:\n"
                "    time.sleep(1)\n")
    out = tmp_path / "work"
    out.mkdir()
    try:
        answer = own_helper.compile({"skeleton": skeleton, "qualname": "k", "spec": "{}", "target": TARGET,
                                     "out": str(out), "uid": None}, 3.0)
        assert "longer than" in answer.get("error", ""), answer
        time.sleep(0.5)
        left = _tmpfs_holders(str(out))
        assert not left and not _stray(comm), \
            f"processes {left or _stray(comm)} outlived the compile, holding the worker's tmpfs"
    finally:
        _kill_stray(comm)
