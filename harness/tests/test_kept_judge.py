"""A judge kept between evaluations (judge/child.py _serve, _clean_for_next; docs/protocol.md): what it checks before
it stays, and how its next runner's socket reaches it."""
import os
import socket
import threading

import pytest
import torch

from kgym_harness.judge import child


def test_the_fingerprint_sees_what_a_task_could_leave_changed():
    before = child._process_fingerprint()
    assert child._fingerprint_changes(before, child._process_fingerprint()) == []
    old_dtype, old_relu = torch.get_default_dtype(), torch.relu
    try:
        torch.set_default_dtype(torch.float64)
        assert "default_dtype" in " ".join(child._fingerprint_changes(before, child._process_fingerprint()))
    finally:
        torch.set_default_dtype(old_dtype)
    try:
        torch.relu = lambda x: x  # a task that replaces a function every later reference would call
        assert "torch: relu" in " ".join(child._fingerprint_changes(before, child._process_fingerprint()))
    finally:
        torch.relu = old_relu
    os.environ["KGYM_TEST_KEPT_JUDGE"] = "1"
    try:
        assert "environ" in child._fingerprint_changes(before, child._process_fingerprint())
    finally:
        del os.environ["KGYM_TEST_KEPT_JUDGE"]
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert any(c.startswith("threads") for c in child._fingerprint_changes(before, child._process_fingerprint()))
    finally:
        stop.set()
        t.join()
    torch.kgym_test_added_name = 1  # names added (a module's lazy imports) are not counted
    try:
        assert child._fingerprint_changes(before, child._process_fingerprint()) == []
    finally:
        del torch.kgym_test_added_name


def test_a_cpu_judge_stays_only_after_a_job_that_changed_nothing():
    before = child._process_fingerprint()
    assert child._clean_for_next("cpu", before)
    assert not child._clean_for_next("cpu", None)  # never fingerprinted: not kept
    old = torch.is_grad_enabled()
    torch.set_grad_enabled(not old)
    try:
        assert not child._clean_for_next("cpu", before)
    finally:
        torch.set_grad_enabled(old)


def test_the_random_generators_start_each_job_as_in_a_new_process():
    import random

    state = child._process_state()
    first = (torch.rand(3), random.random())
    torch.manual_seed(7)  # a task that seeds at import
    torch.rand(5), random.random()  # a job's draws
    child._restore_process_state(state)
    again = (torch.rand(3), random.random())
    assert torch.equal(first[0], again[0]) and first[1] == again[1]


def _channel():
    a, b = socket.socketpair()
    return a, child.Channel(os.dup(b.detach()))


def test_the_next_runner_socket_comes_with_the_job():
    kgym, chan = _channel()
    r, w = os.pipe()
    socket.send_fds(kgym, [b'{"type": "job"'], [r])
    kgym.sendall(b'}\n')
    os.close(r)
    assert chan.recv() == {"type": "job"}
    fd = chan.take_fd()
    os.write(w, b"x")
    assert os.read(fd, 1) == b"x"
    os.close(fd)
    os.close(w)
    # None, or two: kgym's error, every descriptor that came closed.
    kgym.sendall(b'{"type": "job"}\n')
    chan.recv()
    with pytest.raises(RuntimeError, match="0 descriptors"):
        chan.take_fd()
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    socket.send_fds(kgym, [b'{"type": "job"}\n'], [r1, r2])
    os.close(r1)
    os.close(r2)
    chan.recv()
    with pytest.raises(RuntimeError, match="2 descriptors"):
        chan.take_fd()
    for w_ in (w1, w2):  # the read ends are closed: writing finds no reader
        with pytest.raises(BrokenPipeError):
            os.write(w_, b"x")
        os.close(w_)


def test_giving_memory_back_waits_only_when_asked(monkeypatch):
    """Between the reference and the call the judge gives cached memory back without waiting for the device (the
    inputs' seal reads it back right after: each wait is a turn between contexts on a shared GPU); after a phase
    it waits, so that no queued work outlives the phase."""
    import torch

    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: calls.append("sync"))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a: 3 << 30)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: 0)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty"))
    child._give_back_device_memory("cuda:0", collect=False, wait=False)
    assert calls == ["empty"]
    calls.clear()
    child._give_back_device_memory("cuda:0", collect=False)
    assert calls == ["sync", "empty"]
    calls.clear()
    child._give_back_device_memory("cpu")
    assert calls == []
