"""Red team of KGYM_SETUP_SPLIT (child._setup_split, _start_runner, the runner's ``context`` command): what the
judge takes from the split set-up's second exchange, whether a warm pair mixes the two orders, and what the
runner's ``context`` command can do when it comes again (a candidate that replays it in its own process:
tests/fixtures/attacks/c2_runner_setup_replay.py).  No GPU: the device is faked as in test_setup_split.py."""

import json
import socket
import threading

import pytest

from kgym_harness.judge import child
from kgym_harness.runner import runner as runner_mod
from kgym_harness.runner import sandbox
from kgym_harness.shared import cudashare, kinds


class _Recorder:
    def __init__(self):
        self.events, self.held = [], False

    def phase(self):
        rec = self

        class _Phase:
            def __enter__(self):
                rec.events.append("acquire")
                rec.held = True

            def __exit__(self, *exc):
                rec.held = False
                rec.events.append("release")

        return _Phase()


def _fake_link(rec, answers):
    class FakeLink:
        def __init__(self, sock, device, findings):
            self.findings = findings

        def ask(self, msg, meanwhile=None):
            rec.events.append((msg["cmd"], bool((msg.get("job") or {}).get("context_later"))))
            if meanwhile is not None:
                meanwhile()
            return json.loads(json.dumps(answers[msg["cmd"]])), None

        def share_probe(self):
            rec.events.append(("share_probe", False))
            return None

    return FakeLink


_SETUP = {"type": kinds.REPLY_OK, "pid": 1, "uid": 61000,
          "sandbox": {"active": ["the runner's own"], "warnings": ["a refused step"], "protections": ["pid_namespace"]}}
# What a runner could put in its ``context`` answer: a report of every protection, another pid and uid.
_FORGED = {"type": kinds.REPLY_OK, "pid": 0, "uid": 0,
           "sandbox": {"active": ["forged"], "warnings": [],
                       "protections": ["seccomp", "landlock", "descriptors", "source_readonly", "uid"]}}


@pytest.fixture
def rec(monkeypatch):
    r = _Recorder()
    monkeypatch.setattr(child, "_prepare_workdir", lambda job: None)
    monkeypatch.setattr(cudashare, "blocking_sync", lambda device: None)
    monkeypatch.setattr(cudashare, "start_context", lambda device: None)
    return r


def test_the_context_answer_cannot_change_the_sandbox_report(monkeypatch, rec):
    monkeypatch.setattr(child, "RunnerLink", _fake_link(rec, {kinds.CMD_SETUP: _SETUP, kinds.CMD_CONTEXT: _FORGED}))
    _link, reply = child._start_runner(None, {"device": "cuda:0"}, "cuda:0", [], phase=rec.phase)
    assert (reply["pid"], reply["uid"]) == (1, 61000)
    report = child._sandbox_report(reply, sandbox.Granted(), [])
    assert report["protections"] == ["pid_namespace"]
    assert "forged" not in report["active"] and report["warnings"] == ["a refused step"]
    assert (report["runner_pid"], report["runner_uid"]) == (1, 61000)


@pytest.mark.parametrize("answer", [{"type": kinds.REPLY_ERROR}, {"type": "compiling"}, {}, {"cmd": "context"}])
def test_a_context_answer_that_is_not_ok_loses_the_runner_inside_the_phase(monkeypatch, rec, answer):
    monkeypatch.setattr(child, "RunnerLink", _fake_link(rec, {kinds.CMD_SETUP: _SETUP, kinds.CMD_CONTEXT: answer}))
    with pytest.raises(child.RunnerLost, match="CUDA context"):
        child._start_runner(None, {"device": "cuda:0"}, "cuda:0", [], phase=rec.phase)
    assert ("share_probe", False) not in rec.events and rec.events[-1] == "release" and not rec.held


def test_a_warm_pair_keeps_the_old_order_whatever_the_switch(monkeypatch, rec):
    """_warm_start (kgym's pair.c prelude) runs under kgym's warmer's phase: the runner makes its context in
    ``setup``, no ``context`` command goes, and the switch changes nothing of it."""
    monkeypatch.setenv("KGYM_SETUP_SPLIT", "1")
    monkeypatch.setattr(child, "_enable_fused_compare", lambda: None)
    monkeypatch.setattr(child, "RunnerLink", _fake_link(rec, {kinds.CMD_SETUP: _SETUP}))
    a, b = socket.socketpair()
    try:
        early = child._warm_start(a.detach(), {"device": "cuda:0", "workdir": None}, "cuda:0")
        early.result()
    finally:
        b.close()
    assert rec.events == [(kinds.CMD_SETUP, False), ("share_probe", False)]


def _serve(device, commands, monkeypatch):
    """A real Runner serving ``commands`` (then exit) over a socketpair; returns its answers."""
    calls = []
    monkeypatch.setattr(cudashare, "start_context", lambda device: calls.append(device))
    judge_end, runner_end = socket.socketpair()
    r = runner_mod.Runner(runner_end, device)
    cls = object()
    r.cls = cls  # as after load
    t = threading.Thread(target=r.serve, daemon=True)
    t.start()
    answers = []
    f = judge_end.makefile("rb")
    for seq, cmd in enumerate(commands + [{"cmd": kinds.CMD_EXIT}], 1):
        judge_end.sendall(json.dumps(dict(cmd, seq=seq)).encode() + b"\n")
        answers.append(json.loads(f.readline()))
    t.join(10)
    judge_end.close()
    runner_end.close()
    return r, answers, calls, cls


def test_a_context_command_again_only_makes_the_context_again(monkeypatch):
    """``context`` twice, and after the candidate's class is in place: each is answered once, with its own
    number, makes the context (idempotent in the driver) and touches nothing the set-up or load made."""
    ctx = {"cmd": kinds.CMD_CONTEXT}
    r, answers, calls, cls = _serve("cuda:0", [ctx, ctx, ctx], monkeypatch)
    assert [(a.get("type"), a.get("seq")) for a in answers] == [(kinds.REPLY_OK, i) for i in range(1, 5)]
    assert calls == ["cuda:0"] * 3
    assert r.cls is cls and r.guards is None and r.models == {}
