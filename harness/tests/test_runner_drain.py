"""No device work of the runner outlives the command that queued it (runner.py Runner.reply, _drain_device): the
judge hands its GPU phase back once it has the answer, so work still queued then (ModelNew.__init__ may queue
seconds of it) would run inside another evaluation's exclusive timing window (red team 6; the GPU check is
tests/integration/test_gpu_timing.sh's "work queued in __init__" group)."""

import socket

import pytest

from kgym_harness.shared import transport as tp


@pytest.fixture
def cuda_runner(monkeypatch):
    torch = pytest.importorskip("torch")
    from kgym_harness.runner import runner as rn

    events = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(rn.Runner, "_device_peak", lambda self: 0)
    a, b = socket.socketpair()
    r = rn.Runner(b, "cuda")
    r.seq = 3
    yield r, tp.Reader(a), events, monkeypatch, torch
    a.close()
    b.close()


def test_every_answer_waits_for_the_device_first(cuda_runner):
    r, judge, events, monkeypatch, torch = cuda_runner
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: events.append("sync"))
    real_send = tp.send
    monkeypatch.setattr(tp, "send", lambda *a, **k: (events.append("send"), real_send(*a, **k))[1])
    r.reply({"type": "ok"})
    r.reply({"type": "error", "message": "the candidate raised"})
    assert events == ["sync", "send", "sync", "send"]
    msg = judge.recv()[0]
    assert (msg["type"], msg["seq"]) == ("ok", 3)
    assert judge.recv()[0]["type"] == "error"


def test_a_fault_in_queued_work_is_the_answer(cuda_runner):
    r, judge, _events, monkeypatch, torch = cuda_runner

    def fault(*_a, **_k):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.cuda, "synchronize", fault)
    r.reply({"type": "ok"}, [torch.zeros(4)])
    msg, values = judge.recv()
    assert msg["type"] == "error" and msg["seq"] == 3 and not values
    assert "illegal memory access" in msg["error"]["message"]


def test_no_context_no_wait(monkeypatch):
    """A reply never makes the CUDA context (it comes after the sandbox, in setup), and off CUDA there is
    nothing to wait for."""
    torch = pytest.importorskip("torch")
    from kgym_harness.runner import runner as rn

    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: calls.append(1))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    rn._drain_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    rn._drain_device("cpu")
    assert calls == []
    rn._drain_device("cuda:0")
    assert calls == [1]


def test_a_phased_answer_gives_cached_memory_back_before_it_goes(cuda_runner):
    """Giving cached memory back unmaps it, at a cost the candidate decides (what its forward allocated and let go):
    done before the answer of a command the judge sends inside a GPU phase, never after an answer (then outside the
    phase, where another evaluation's exclusive window may be open: red team 39b), and not for the timing loop's
    commands or those the judge sends outside any phase."""
    from kgym_harness.runner import runner as rn

    r, judge, events, monkeypatch, torch = cuda_runner
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(rn.Runner, "trim_cache", lambda self: events.append("trim"))
    real_send = tp.send
    monkeypatch.setattr(tp, "send", lambda *a, **k: (events.append("send"), real_send(*a, **k))[1])
    for cmd in ("construct", "call", "drop", "exit", "timed", "fetch", "clock_block", "check", "load", "launchers",
                "setup"):
        events.clear()
        r.cmd = cmd
        r.reply({"type": "ok"})
        judge.recv()
        assert events == (["trim", "send"] if cmd in ("construct", "call", "drop", "exit") else ["send"]), cmd


def test_the_command_loop_trims_nothing_after_an_answer(cuda_runner):
    from kgym_harness.runner import runner as rn

    r, judge, events, monkeypatch, torch = cuda_runner
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(rn.Runner, "trim_cache", lambda self: events.append("trim"))
    real_send = tp.send
    monkeypatch.setattr(tp, "send", lambda *a, **k: (events.append("send"), real_send(*a, **k))[1])
    for seq, cmd in enumerate(("launchers", "launchers", "exit")):
        real_send(judge.sock, {"cmd": cmd, "seq": seq})
    r.serve()
    assert events == ["send", "send", "trim", "send"]
    assert [judge.recv()[0]["seq"] for _ in range(3)] == [0, 1, 2]
