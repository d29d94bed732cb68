"""A command sent ahead of another (RunnerLink.ask's ``ahead``; RunnerLink.model, KGYM_PIPELINE_CALLS): the runner
gets both before the judge reads either answer, the answers are read in order, an error in the first is what the
judge raises with the conversation still in step, and a compile inside the second is answered as in any command."""

import socket
import threading

import pytest

from kgym_harness.judge import child
from kgym_harness.shared import kinds
from kgym_harness.shared import transport as tp


def _link():
    a, b = socket.socketpair()
    a.settimeout(10)  # a runner that waits for an answer the judge never sends fails the test, not hangs it
    b.settimeout(10)
    return child.RunnerLink(a, "cpu", []), b


def _runner(sock, answers, compile_in=None):
    """Reads len(answers) commands before answering any, then answers each in turn (``answers``: "ok", or an
    error), with a compile's lines inside command number ``compile_in``."""
    reader = tp.Reader(sock, accept_blocks=True)
    seen, resumed = [], []

    def serve():
        for _ in answers:
            seen.append(reader.recv()[0])
        for i, (msg, what) in enumerate(zip(seen, answers)):
            if i == compile_in:
                tp.send(sock, {"type": kinds.REPLY_COMPILING, "phase": "begin", "seq": msg["seq"]})
                tp.send(sock, {"type": kinds.REPLY_COMPILING, "phase": "end", "seq": msg["seq"]})
                resumed.append(reader.recv()[0])
            reply = {"type": kinds.REPLY_OK} if what == "ok" else {"type": kinds.REPLY_ERROR, "error": what}
            tp.send(sock, dict(reply, seq=msg["seq"], findings=[{"type": "probe", "variant": None}]))

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t, seen, resumed


def test_the_runner_gets_the_construct_and_the_call_before_either_answer():
    link, b = _link()
    t, seen, resumed = _runner(b, ["ok", "ok"], compile_in=1)
    model = link.model([3], 7, None, sizes={"N": 8})
    model._ok({"cmd": kinds.CMD_CALL, "stage": "correctness"}, [1.5])
    t.join(5)
    assert [m["cmd"] for m in seen] == [kinds.CMD_CONSTRUCT, kinds.CMD_CALL]
    assert seen[1]["seq"] == seen[0]["seq"] + 1 == link.seq and seen[1]["model"] == seen[0]["id"] == model.id
    assert seen[0]["sizes"] == {"N": 8} and model.pending is None
    assert resumed and resumed[0]["cmd"] == kinds.CMD_RESUME and resumed[0]["seq"] == seen[1]["seq"]
    assert [f["type"] for f in link.findings] == ["probe", "probe"]  # both answers' evidence taken


def test_a_construct_that_raises_is_the_error_and_the_conversation_stays_in_step():
    link, b = _link()
    err = {"type": "ValueError", "message": "__init__ failed at these sizes"}
    t, seen, _ = _runner(b, [err, {"type": "KeyError", "message": "no model 1"}])
    model = link.model([], 1, None)
    with pytest.raises(child.RemoteError) as got:
        model._ok({"cmd": kinds.CMD_CALL}, [])
    assert got.value.facts["message"] == "__init__ failed at these sizes"
    t.join(5)
    t, seen, _ = _runner(b, ["ok"])  # the next command's answer is its own
    reply, _ = link.ask({"cmd": kinds.CMD_CHECK})
    assert reply["seq"] == link.seq == seen[0]["seq"]


def test_without_pipelining_the_construct_is_answered_first():
    """RunnerLink.construct, the default: the call goes only after the construct's answer."""
    link, b = _link()
    reader = tp.Reader(b, accept_blocks=True)
    order = []

    def serve():
        for _ in range(2):
            msg, _ = reader.recv()
            order.append(msg["cmd"])
            tp.send(b, {"type": kinds.REPLY_OK, "seq": msg["seq"]})

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    model = link.construct([], 1, None)
    assert model.pending is None and order == [kinds.CMD_CONSTRUCT]
    model._ok({"cmd": kinds.CMD_CALL}, [])
    t.join(5)
    assert order == [kinds.CMD_CONSTRUCT, kinds.CMD_CALL]
