"""Red-team review of the kept answer spare (transport.AnswerSpare, Reader.kept/done_with, RunnerLink.ask/drop_spare).

The claim under review: a kept spare only ever holds what the runner wrote there, which the judge clones out at
once; the judge never writes into a spare and never keeps one across runners.  The tests below are of two kinds:
defences that hold (each would fail if the defence were taken away) and, marked so, weaknesses found."""

import json
import mmap
import os
import socket
import threading

import pytest
import torch

from kgym_harness.judge import child
from kgym_harness.shared import kinds
from kgym_harness.shared import transport as tp


def _open_fds():
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.add((fd, os.readlink(f"/proc/self/fd/{fd}")))
        except OSError:
            pass
    return out


def _link():
    a, b = socket.socketpair()
    a.settimeout(10)  # a runner thread that failed its assertion never answers: the judge's ask fails instead
    b.settimeout(10)
    return child.RunnerLink(a, "cpu", []), b


class HostileRunner:
    """The runner's end, by hand: it keeps every descriptor the judge sends (SCM_RIGHTS), maps the spares shared,
    and answers as the script says."""

    def __init__(self, sock):
        self.sock = sock
        self.reader = tp.Reader(sock, accept_blocks=True)
        self.spares = {}  # key -> a dup of the memfd the judge sent for it (kept open, as a hostile runner may)

    def recv(self):
        msg, values = self.reader.recv()
        spare = self.reader.take_spare()
        if spare is not None and self.reader.kept is not None and spare == self.reader.kept[1]:
            if self.reader.kept[0] not in self.spares:
                self.spares[self.reader.kept[0]] = os.dup(spare)
        return msg, values, spare

    def close(self):
        for fd in self.spares.values():
            os.close(fd)
        self.reader.done_with(self.reader.take_spare())
        if self.reader.kept is not None:
            tp.release(self.reader.kept[1])
        self.sock.close()


def _answer(r, b, n):
    """What a HostileRunner ``r`` on socket ``b`` does to answer honestly: ``n`` ones, into the spare it was given."""
    def answer():
        msg, _v, spare = r.recv()
        tp.send(b, {"type": "ok", "seq": msg["seq"]}, [torch.ones(n)], into=spare)
        r.reader.done_with(spare)

    return answer


def _serve(fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


# ---------------------------------------------------------------------------------------------------------------
# Defences that hold


def test_the_judge_never_writes_into_its_kept_spare():
    """Between answers the kept memfd holds exactly the bytes the runner left there: nothing the judge sends
    (the command's own tensors, its inputs) or takes in lands in it.  A runner filling it with a marker before
    each answer finds the marker untouched the next time."""
    link, b = _link()
    r = HostileRunner(b)
    try:
        marker = None
        for i in range(4):
            secret = torch.full((256,), 1000.0 + i)  # the judge's own data: a command's tensors

            def runner_side(i=i, marker=marker):
                msg, values, spare = r.recv()
                with mmap.mmap(spare, os.fstat(spare).st_size) as m:
                    view = torch.frombuffer(m, dtype=torch.uint8)
                    if marker is not None:
                        assert bool((view == marker).all()), "the judge wrote into the kept spare"
                    assert not (torch.frombuffer(m, dtype=torch.float32) == 1000.0 + i).any()
                    del view
                tp.send(b, {"type": "ok", "seq": msg["seq"]}, [torch.full((256,), float(i))], into=spare)
                r.reader.done_with(spare)
                return os.dup(spare)

            t, out = _serve(runner_side)
            reply, vals = link.ask({"cmd": kinds.CMD_CALL}, [secret], answer_bytes=1024)
            t.join(10)
            assert "error" not in out, out.get("error")
            assert torch.equal(vals[0], torch.full((256,), float(i)))
            # once the judge has its copy: the runner fills the whole spare with a marker
            fd, marker = out["value"], 0x5A + i
            with mmap.mmap(fd, os.fstat(fd).st_size) as m:
                torch.frombuffer(m, dtype=torch.uint8).fill_(marker)
            os.close(fd)
            assert torch.equal(vals[0], torch.full((256,), float(i)))
    finally:
        link.close()
        r.close()


def test_a_runner_racing_the_judges_copy_reaches_only_its_own_answer():
    """A runner thread writing into the kept spare the whole time the judge takes the answer in: what the judge
    compares is a copy that no later write changes; every value in it is one the runner wrote (its own answer
    or its racing marker), never anything of the judge's."""
    link, b = _link()
    r = HostileRunner(b)
    stop = threading.Event()
    try:
        def runner_side():
            msg, _v, spare = r.recv()
            fd = os.dup(spare)

            def scribble():
                with mmap.mmap(fd, os.fstat(fd).st_size) as m:
                    v = torch.frombuffer(m, dtype=torch.float32)
                    while not stop.is_set():
                        v.fill_(-7.0)
                        v.fill_(3.0)
                    del v
                os.close(fd)

            threading.Thread(target=scribble, daemon=True).start()
            tp.send(b, {"type": "ok", "seq": msg["seq"]}, [torch.full((1 << 16,), 3.0)], into=spare)
            r.reader.done_with(spare)

        t, out = _serve(runner_side)
        _reply, vals = link.ask({"cmd": kinds.CMD_CALL}, [torch.zeros(4)], answer_bytes=4 << 16)
        t.join(10)
        snap = vals[0].clone()
        assert bool(((snap == 3.0) | (snap == -7.0)).all())
        import time

        time.sleep(0.05)
        assert torch.equal(vals[0], snap), "the judge's copy changed after it was taken"
    finally:
        stop.set()
        link.close()
        r.close()


def test_an_answer_claimed_in_spare_on_the_cpu_is_refused():
    """On the CPU the kept spare is a memfd: an answer saying "_in_spare" (read from the judge's own device
    block) has nothing to be read from and is a protocol error, never a read of the judge's memory."""
    link, b = _link()
    r = HostileRunner(b)
    try:
        def runner_side():
            msg, _v, _spare = r.recv()
            b.sendall((json.dumps({"type": "ok", "seq": msg["seq"], "values": [{"$t": 0}], "_in_spare": True,
                                   "_tensors": [{"dtype": "float32", "shape": [4], "offset": 0}]}) + "\n").encode())

        t, _out = _serve(runner_side)
        with pytest.raises(child.RunnerLost):
            link.ask({"cmd": kinds.CMD_CALL}, [torch.zeros(4)], answer_bytes=16)
        t.join(10)
    finally:
        link.close()
        r.close()


@pytest.mark.parametrize("forged", [{"keep": 1}, {"host": True, "keep": 1}, {"device": 2 << 20, "keep": 1}, True])
def test_a_forged_spare_from_the_runner_leaves_the_judges_kept_spare_alone(forged):
    """A runner answering with a "_spare" of its own (kept or not, with an fd): refused, its fd closed, and the
    judge's kept spare neither replaced, released nor re-sent; the judge's fd count is back where it was."""
    before = _open_fds()
    link, b = _link()
    r = HostileRunner(b)
    try:
        t, _out = _serve(_answer(r, b, 4))
        link.ask({"cmd": kinds.CMD_CALL}, [torch.zeros(4)], answer_bytes=16)
        t.join(10)
        kept_fd, kept_key = link.answers.spare, link.answers.key
        kept_ino = os.fstat(kept_fd).st_ino

        def forge():
            msg, _v, _spare = r.recv()
            own = tp.spare_for(64)
            data = (json.dumps({"type": "ok", "seq": msg["seq"], "_spare": forged}) + "\n").encode()
            socket.send_fds(b, [data[:1]], [own])
            b.sendall(data[1:])
            os.close(own)

        t, _out = _serve(forge)
        with pytest.raises(child.RunnerLost):
            link.ask({"cmd": kinds.CMD_CALL}, [torch.zeros(4)], answer_bytes=16)
        t.join(10)
        assert link.answers.spare == kept_fd and link.answers.key == kept_key
        assert os.fstat(kept_fd).st_ino == kept_ino
        assert link.reader.fds == []
    finally:
        link.close()
        r.close()
    assert _open_fds() <= before, "a descriptor of this runner outlived its link"


def test_a_closed_link_holds_no_spare_of_its_runner():
    """A judge kept for another job: once the link is closed, no descriptor of the runner's spares is left open
    in the judge (the kept one included); a second link starts from key 1 with its own new memfd."""
    before = _open_fds()
    inos = []
    for _job in range(2):
        link, b = _link()
        r = HostileRunner(b)
        for _i in range(3):
            t, _out = _serve(_answer(r, b, 64))
            link.ask({"cmd": kinds.CMD_CALL}, [torch.zeros(4)], answer_bytes=256)
            t.join(10)
        assert link.answers.key == 1
        inos.append(os.fstat(link.answers.spare).st_ino)
        link.close()
        assert link.answers.spare is None
        r.close()
    assert inos[0] != inos[1]
    assert _open_fds() <= before


def test_drop_spare_sends_a_new_spare_that_the_runner_takes_in_place_of_the_old():
    """After the judge lets its spare go (a stage's end, a re-run alone), the next answer goes into a new memfd,
    sent with its fd under a new key; the old one's key is refused from then on."""
    link, b = _link()
    r = HostileRunner(b)
    try:
        inos = []
        for drop in (False, True, False):
            if drop:
                link.drop_spare()

            def answer():
                msg, _v, spare = r.recv()
                inos.append((r.reader.kept[0], os.fstat(spare).st_ino))
                tp.send(b, {"type": "ok", "seq": msg["seq"]}, [torch.ones(64)], into=spare)
                r.reader.done_with(spare)

            t, _out = _serve(answer)
            link.ask({"cmd": kinds.CMD_CALL}, [torch.zeros(4)], answer_bytes=256)
            t.join(10)
        assert [k for k, _ in inos] == [1, 2, 2] and inos[0][1] != inos[1][1] == inos[2][1]
    finally:
        link.close()
        r.close()


# ---------------------------------------------------------------------------------------------------------------
# Weaknesses found (not breaks of the judge's verdicts), fixed since: the judge's next command after drop_spare
# tells the runner to let go of it ("_forget"), and an answer that is not "ok" makes the judge send the kept
# spare's fd again.


def _honest_answer(runner, sock, n=64):
    """The runner's own reply path (runner.Runner.reply): take_spare, send into it, done_with."""
    msg, _v = runner.recv()
    spare = runner.take_spare()
    try:
        tp.send(sock, {"type": "ok", "seq": msg.get("seq")}, [torch.ones(n)], into=spare)
    finally:
        runner.done_with(spare)
    return msg


def test_drop_spare_frees_the_spares_memory():
    """RunnerLink.drop_spare says the kept spare's "device memory is no longer held between phases", and
    shared_or_alone drops it "before a re-run alone" so that memory is free for the run alone.  But the memory
    is freed only when both ends let go, and the runner's Reader keeps its copy (Reader.kept) until the judge
    sends the next spare with its fd: after the stage's end (and the CMD_CHECK that follows it) the runner still
    holds it, and before a re-run alone the judge makes the new spare (cuMemCreate) while the old one is still
    alive in the runner."""
    link, b = _link()
    runner = tp.Reader(b, accept_blocks=True)
    try:
        t, out = _serve(lambda: _honest_answer(runner, b, 1 << 16))
        link.ask({"cmd": kinds.CMD_CALL}, [torch.zeros(4)], answer_bytes=4 << 16)
        t.join(10)
        assert "error" not in out
        judge_ino = os.fstat(link.answers.spare).st_ino
        link.drop_spare()  # the stage's end
        t, out = _serve(lambda: _honest_answer(runner, b))
        link.ask({"cmd": kinds.CMD_CHECK, "stage": "correctness"})  # what the judge sends after every stage
        t.join(10)
        held = [fd for fd in ([runner.kept[1]] if runner.kept else []) if os.fstat(fd).st_ino == judge_ino]
        assert not held, "the runner still holds the spare the judge dropped (its memory is not freed)"
    finally:
        link.close()
        if runner.kept is not None:
            tp.release(runner.kept[1])
        b.close()


def test_a_command_the_runner_could_not_take_in_does_not_desynchronise_the_kept_spare(monkeypatch):
    """The runner answers a command whose tensors it could not take in (ReceiveError: out of device memory
    copying them) with an error, as runner.Runner.serve does, and carries on.  That command brought the kept
    spare's fd: _take raised before reaching "_spare", the fd was closed, Reader.kept stayed empty.  The judge has
    set AnswerSpare.sent all the same, so its next answer-carrying command only names the spare, and the honest
    runner's Reader raises ProtocolError ("kept spare 1 was never sent"): the runner exits, the judge sees
    RunnerLost.  Masked today because every judge path that goes on after such an error drops the spare first
    (shared_or_alone) or ends the stage; any new path that retries a call on the same link would hit it."""
    link, b = _link()
    runner = tp.Reader(b, accept_blocks=True)
    real = tp._read_tensors
    calls = {"n": 0}

    def flaky(fd, layout, device):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(fd, layout, device)

    monkeypatch.setattr(tp, "_read_tensors", flaky)

    def serve_one():
        try:
            msg, _v = runner.recv()
        except tp.ReceiveError as exc:  # runner.Runner.serve
            spare = runner.take_spare()
            tp.send(b, {"type": "error", "seq": exc.msg.get("seq"), "error": {"type": "OutOfMemoryError"}},
                    into=spare)
            runner.done_with(spare)
            return "error"
        spare = runner.take_spare()
        tp.send(b, {"type": "ok", "seq": msg.get("seq")}, [torch.ones(16)], into=spare)
        runner.done_with(spare)
        return "ok"

    try:
        t, out = _serve(serve_one)
        reply, _ = link.ask({"cmd": kinds.CMD_CALL}, [torch.zeros(4)], answer_bytes=64)
        t.join(10)
        assert out.get("value") == "error" and reply["type"] == "error"
        t, out = _serve(serve_one)
        try:
            reply, _ = link.ask({"cmd": kinds.CMD_CALL}, [torch.zeros(4)], answer_bytes=64)
        except child.RunnerLost:
            reply = None
        t.join(10)
        assert "error" not in out, f"the honest runner died: {out.get('error')!r}"
        assert reply is not None and reply["type"] == "ok"
    finally:
        link.close()
        if runner.kept is not None:
            tp.release(runner.kept[1])
        b.close()
