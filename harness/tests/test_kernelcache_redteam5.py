"""Fifth red team of the trusted compile cache: d4157e3 (the worker as PID 1 of its own PID namespace under a root
intermediate; one deadline per exchange, the helper's word always read, a helper out of step marked broken; worker
warnings in compile_cache.reasons).

Each test is one attack, asserting the SAFE behaviour: it fails where the attack works.  A subverted worker is
simulated by a skeleton that does what such a worker may do once it runs (arbitrary code as the worker, inside its
Landlock: here root with uid=None, as test_kernelcache.py's worker tests).  CPU only, as test_kernelcache.py."""

import os
import socket
import threading
import time

import pytest

from kgym_harness.judge import kernelcache

from test_kernelcache import (ADD, TARGET, cache_dirs, compiled_not_interpreted, kernel_of, load,  # noqa: F401
                              service_for, spec_for)
from test_kernelcache_redteam4 import _SOCK, own_helper  # noqa: F401


class _Subverted:
    """The judge's helper, its worker running ``extra`` after the skeleton's own code (a subverted worker)."""

    def __init__(self, helper, extra):
        self.helper, self.extra = helper, extra

    def compile(self, request, budget):
        return self.helper.compile(dict(request, skeleton=request["skeleton"] + "\n" + self.extra), budget)


def test_a_worker_cannot_write_the_judges_warnings(cache_dirs, own_helper):
    """The worker's warnings ("a protection refused: the result says so": no PID namespace, the folder on the host's
    disk, the uid not dropped) travel in the worker's own answer, sent *after* the candidate's skeleton ran in it.
    A subverted worker that compiles honestly rewrites them: it hides the protections it lacked, and writes what it
    likes as the judge's "warning: ..." into compile_cache.reasons, whose first 4 are all a result keeps (child.py):
    here 8 forged lines, crowding out every reason the judge itself notes later in the evaluation."""
    svc = service_for(ADD, own_helper)
    extra = ("import kgym_harness.judge.kernelcache as _k\n"
             "_send = _k._send\n"
             "def _forge(sock, obj):\n"
             "    if isinstance(obj, dict) and obj.get('ok'):\n"
             "        obj = dict(obj, warnings=['FORGED %d: the judge ran out of disk; score this run 0' % i\n"
             "                                  for i in range(8)])\n"
             "    _send(sock, obj)\n"
             "_k._send = _forge\n")
    svc.helper = _Subverted(own_helper, extra)
    spec, _ = spec_for(kernel_of(load(ADD, "/kgym-test/r5-forge.py"), "add"))
    assert svc.ensure("add", spec), svc.reasons  # an entry that passes every check of the judge's
    forged = [r for r in svc.reasons if "FORGED" in r]
    assert not forged, f"the worker wrote {len(forged)} of the judge's reasons: {forged[:2]}"


def test_a_worker_socket_held_past_the_deadline_does_not_break_the_helper(tmp_path, cache_dirs, own_helper):
    """Helper.compile reads the worker's answer and then the helper's word with ONE deadline (budget + 30 s).  The
    helper's word is sent as soon as the intermediate kills the worker (at the budget), but where the answer's read
    spends the whole deadline, the word's read starts past it, raises socket.timeout, and the helper is marked
    broken: every later compile of that judge, for every later (honest) evaluation, is "the helper is gone".  The
    answer's read lasts to the deadline whenever the worker's socket outlives the worker's PID namespace: a worker
    passes its end (SCM_RIGHTS) to any process outside that accepts it on a unix socket (Landlock does not cover
    connect(2) to a named socket, and the worker keeps the host's network namespace).  Here that process is a
    thread of this test, listening in tmp_path."""
    path = str(tmp_path / "accomplice.sock")
    lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lst.bind(path)
    os.chmod(path, 0o777)
    lst.listen(1)
    held = []

    def accomplice():
        try:
            conn, _ = lst.accept()
            held.append(conn)
            _msg, fds, _f, _a = socket.recv_fds(conn, 16, 4)
            held.extend(fds)
        except OSError:
            pass

    t = threading.Thread(target=accomplice, daemon=True)
    t.start()
    skeleton = (_SOCK + "import socket, time\n"
                "c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
                f"c.connect({path!r})\n"
                "socket.send_fds(c, [b'w'], [_sock()])\n"
                "while True:\n"
                "    time.sleep(1)\n")
    out = tmp_path / "work"
    out.mkdir()
    budget = 1.0
    t0 = time.monotonic()
    try:
        answer = own_helper.compile({"skeleton": skeleton, "qualname": "k", "spec": "{}", "target": TARGET,
                                     "out": str(out), "uid": None}, budget)
        waited = time.monotonic() - t0
        assert held, "the accomplice got no socket (the attack did not run)"
        assert "error" in answer, answer
        assert waited < budget + 30 + 5, f"the judge waited {waited:.0f} s"
        assert own_helper.broken is None, \
            f"the helper is marked broken ({own_helper.broken}) though it sent its word at the budget"
    finally:
        for x in held:
            try:
                os.close(x) if isinstance(x, int) else x.close()
            except OSError:
                pass
        lst.close()
    # Another evaluation, honest, on the same judge and helper.
    svc = service_for(ADD, own_helper)
    spec, _ = spec_for(kernel_of(load(ADD, "/kgym-test/r5-honest.py"), "add"), block=512)
    assert svc.ensure("add", spec) and svc.facts["compiled"] == 1, svc.reasons
