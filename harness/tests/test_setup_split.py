"""KGYM_SETUP_SPLIT (child._setup_split, on by default on a GPU; =0 turns it off): a cold start's set-up goes to the runner
first with ``context_later`` and no GPU phase held (the driver only: cuInit in both processes), then, inside the
shared phase the caller gives, the runner's ``context`` command and the device-memory probe."""

import contextlib
import os

import pytest

from kgym_harness.judge import child
from kgym_harness.shared import cudashare, kinds


class _Recorder:
    def __init__(self):
        self.events, self.held = [], False

    @contextlib.contextmanager
    def phase(self):
        self.events.append("acquire")
        self.held = True
        try:
            yield
        finally:
            self.held = False
            self.events.append("release")


def _fake_link(rec, answers=None):
    class FakeLink:
        def __init__(self, sock, device, findings):
            self.findings = findings

        def ask(self, msg, meanwhile=None):
            rec.events.append((msg["cmd"], rec.held, bool((msg.get("job") or {}).get("context_later"))))
            if meanwhile is not None:  # the judge's own start, while the runner does its part
                meanwhile()
            return dict((answers or {}).get(msg["cmd"], {"type": kinds.REPLY_OK, "sandbox": {}})), None

        def share_probe(self):
            rec.events.append(("share_probe", rec.held, False))
            return None

    return FakeLink


@pytest.fixture
def rec(monkeypatch):
    r = _Recorder()
    monkeypatch.setattr(child, "RunnerLink", _fake_link(r))
    monkeypatch.setattr(child, "_prepare_workdir", lambda job: None)
    # The judge's side: cuInit and flags only (blocking_sync), or its CUDA context (start_context), and whether a
    # phase was held meanwhile.
    monkeypatch.setattr(cudashare, "blocking_sync", lambda device: r.events.append(("judge_driver", r.held, False)))
    monkeypatch.setattr(cudashare, "start_context", lambda device: r.events.append(("judge_context", r.held, False)))
    return r


def test_split_set_up_holds_the_phase_only_for_the_contexts_and_the_probe(rec):
    link, reply = child._start_runner(None, {"device": "cuda:0"}, "cuda:0", [], phase=rec.phase)
    assert rec.events == [(kinds.CMD_SETUP, False, True), ("judge_driver", False, False), "acquire",
                          (kinds.CMD_CONTEXT, True, False), ("judge_context", True, False),
                          ("share_probe", True, False), "release"]
    assert reply["sandbox"]["active"][-1].startswith("tensors cross in device memory")


def test_without_the_split_the_caller_holds_the_phase_and_no_context_command_goes(rec):
    child._start_runner(None, {"device": "cuda:0"}, "cuda:0", [])
    assert rec.events == [(kinds.CMD_SETUP, False, False), ("judge_context", False, False),
                          ("share_probe", False, False)]


def test_a_runner_that_fails_its_context_is_lost_and_the_phase_is_given_back(monkeypatch, rec):
    monkeypatch.setattr(child, "RunnerLink", _fake_link(rec, {kinds.CMD_CONTEXT: {"type": kinds.REPLY_ERROR}}))
    with pytest.raises(child.RunnerLost, match="CUDA context"):
        child._start_runner(None, {"device": "cuda:0"}, "cuda:0", [], phase=rec.phase)
    assert rec.events[-1] == "release" and rec.held is False


def test_the_switch_is_read_only_on_a_gpu(monkeypatch):
    monkeypatch.delenv("KGYM_SETUP_SPLIT", raising=False)
    assert child._setup_split("cuda:0") and not child._setup_split("cpu")  # the default: split on a GPU
    monkeypatch.setenv("KGYM_SETUP_SPLIT", "1")
    assert child._setup_split("cuda:0") and not child._setup_split("cpu")
    monkeypatch.setenv("KGYM_SETUP_SPLIT", "0")
    assert not child._setup_split("cuda:0")


def _setup_job(monkeypatch, rec, device="cuda:0", job=None):
    sent = []
    base = _fake_link(rec)

    class Recording(base):
        def ask(self, msg, meanwhile=None):
            sent.append(msg)
            return super().ask(msg, meanwhile)

    monkeypatch.setattr(child, "RunnerLink", Recording)
    child._start_runner(None, dict(job or {"device": device, "sandbox": {"landlock": True}}), device, [])
    return next(m["job"] for m in sent if m["cmd"] == kinds.CMD_SETUP)


def test_the_runner_keeps_one_work_queue_by_default(monkeypatch, rec):
    """child._runner_connections: on a GPU the runner's clean environment keeps the zygote's
    CUDA_DEVICE_MAX_CONNECTIONS (KGYM_RUNNER_CONNECTIONS=1 or unset); with KGYM_RUNNER_CONNECTIONS=0, or on the
    CPU, or with no value to keep, the sandbox is as kgym sent."""
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1")
    kept = {"landlock": True, "env_keep": ["CUDA_DEVICE_MAX_CONNECTIONS"]}
    monkeypatch.delenv("KGYM_RUNNER_CONNECTIONS", raising=False)
    assert _setup_job(monkeypatch, rec)["sandbox"] == kept
    monkeypatch.setenv("KGYM_RUNNER_CONNECTIONS", "0")
    assert _setup_job(monkeypatch, rec)["sandbox"] == {"landlock": True}
    monkeypatch.setenv("KGYM_RUNNER_CONNECTIONS", "1")
    assert _setup_job(monkeypatch, rec)["sandbox"] == kept
    assert _setup_job(monkeypatch, rec, device="cpu")["sandbox"] == {"landlock": True}
    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS")
    assert _setup_job(monkeypatch, rec)["sandbox"] == {"landlock": True}


def test_the_kept_variable_survives_the_clean_environment(monkeypatch, tmp_path):
    import tempfile

    from kgym_harness.runner import sandbox

    saved, saved_tmp = dict(os.environ), tempfile.tempdir
    try:
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
        sandbox.clean_environment(str(tmp_path), ("CUDA_DEVICE_MAX_CONNECTIONS",))
        assert os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1"
        sandbox.clean_environment(str(tmp_path))
        assert "CUDA_DEVICE_MAX_CONNECTIONS" not in os.environ
    finally:  # this process's own environment, as it was
        os.environ.clear()
        os.environ.update(saved)
        tempfile.tempdir = saved_tmp


class _Ending:
    """What Evaluation.hold_until_exit reads of its evaluation, and the phases it asks for."""

    def __init__(self, device="cuda:0"):
        self.arbiter, self.device, self.gpu_mode, self.asked = True, device, None, []

    def _acquire(self, mode, purpose=None):
        self.asked.append((mode, purpose))


def test_the_wind_down_holds_a_shared_phase_unless_switched_off(monkeypatch):
    # A teardown outside any phase let runners that ended holding 8 GiB put a neighbour's speedup 3.6% off on an
    # H200 (child._exit_phased; test_gpu_timing.sh keeps the victims' check): phased unless KGYM_EXIT_PHASE=0.
    for value in (None, "1", "yes"):
        if value is None:
            monkeypatch.delenv("KGYM_EXIT_PHASE", raising=False)
        else:
            monkeypatch.setenv("KGYM_EXIT_PHASE", value)
        ev = _Ending()
        child.Evaluation.hold_until_exit(ev)
        assert ev.asked == [("shared", "exit")] and ev.gpu_mode == "shared"
    monkeypatch.setenv("KGYM_EXIT_PHASE", "0")
    ev = _Ending()
    child.Evaluation.hold_until_exit(ev)
    assert ev.asked == [] and ev.gpu_mode is None
    monkeypatch.delenv("KGYM_EXIT_PHASE", raising=False)
    ev = _Ending(device="cpu")  # no GPU, no phase
    child.Evaluation.hold_until_exit(ev)
    assert ev.asked == []
