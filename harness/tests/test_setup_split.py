"""KGYM_SETUP_SPLIT (child._setup_split, on by default on a GPU; =0 turns it off): a cold start's set-up goes to the runner
first with ``context_later`` and no GPU phase held (the driver only: cuInit in both processes), then, inside the
shared phase the caller gives, the runner's ``context`` command and the device-memory probe."""

import contextlib
import json
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
    """What Evaluation.wind_down and hold_until_exit read of their evaluation, what they send and the phases they
    ask for."""

    def __init__(self, device="cuda:0", gpu_mode=None):
        self.arbiter, self.device, self.gpu_mode, self.asked, self.sent = True, device, gpu_mode, [], []
        self.chan = self

    def send(self, msg):
        self.sent.append(msg)

    def _acquire(self, mode, purpose=None):
        self.asked.append((mode, purpose))

    def hold_until_exit(self):
        child.Evaluation.hold_until_exit(self)


class _Nvml:
    """GpuState's processes(), as NVML lists them."""

    def __init__(self, used):
        self.used = used

    def processes(self):
        return self.used


_GIB = 1 << 30
_CENSUS = {"type": "census", "processes": 0, "counted": True, "runner_pid": 4101, "judge_pid": 4100}


def _plan(monkeypatch, used, census=_CENSUS, setting="auto", reserved=0):
    """_wind_down_plan with NVML listing ``used`` and this judge's allocator holding ``reserved``."""
    import torch

    if setting is None:
        monkeypatch.delenv("KGYM_EXIT_PHASE", raising=False)
    else:
        monkeypatch.setenv("KGYM_EXIT_PHASE", setting)
    monkeypatch.setattr(child, "_gpu_state", lambda device: None if used is None else _Nvml(used))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: reserved)
    return child._wind_down_plan("cuda:0", census)


def test_the_wind_down_is_phased_by_default_with_its_figures(monkeypatch):
    # A teardown outside any phase let runners that ended holding 8 GiB put a neighbour's speedup 3.6% off on an
    # H200, and the bounded form gained nothing measurable (child._wind_down_plan): phased unless switched, and
    # NVML's figures for both processes said in every case.
    small = {4100: _GIB, 4101: int(1.5 * _GIB), 9: 100 * _GIB}
    for setting in (None, "1"):
        p = _plan(monkeypatch, small, setting=setting)  # None: unset
        assert p["phased"] is True and p["why"] == "phased by default" and p["bound_bytes"] is None
        assert p["runner_bytes"] == int(1.5 * _GIB) and p["judge_bytes"] == _GIB
    p = _plan(monkeypatch, None, setting=None)
    assert p["phased"] is True and p["runner_bytes"] is None and p["why"] == "phased by default"


def test_the_wind_down_leaves_the_phases_under_auto_only_where_nvml_counts_little(monkeypatch):
    # KGYM_EXIT_PHASE=auto: it leaves the phases only where NVML, by the pids kgym gave, counts each process at most
    # the bound (test_gpu_timing.sh keeps the victims' check under it); phased wherever that cannot be read.
    small = {4100: _GIB, 4101: int(1.5 * _GIB), 9: 100 * _GIB}  # another evaluation's process may hold much
    p = _plan(monkeypatch, small)
    assert p["phased"] is False and p["runner_bytes"] == int(1.5 * _GIB) and p["judge_bytes"] == _GIB
    assert p["bound_bytes"] == child._EXIT_UNPHASED_MAX == 2 * _GIB
    # the candidate's runner holds more (hog_exit.py: 8 GiB), or the judge does (a large task's references)
    p = _plan(monkeypatch, {4100: _GIB, 4101: 8 * _GIB})
    assert p["phased"] is True and "the runner holds more" in p["why"] and p["runner_bytes"] == 8 * _GIB
    p = _plan(monkeypatch, {4100: 3 * _GIB, 4101: _GIB})
    assert p["phased"] is True and "the judge holds more" in p["why"]
    assert "the runner and the judge hold more" in _plan(monkeypatch, {4100: 3 * _GIB, 4101: 3 * _GIB})["why"]
    # NVML's "not available" is more than any bound
    assert _plan(monkeypatch, {4100: _GIB, 4101: (1 << 64) - 1})["phased"] is True
    # a bound given for a measurement
    p = _plan(monkeypatch, small, setting="auto:1024")
    assert p["phased"] is True and p["bound_bytes"] == _GIB and "the runner holds more" in p["why"]
    assert "than 1024 MiB" in p["why"]
    # what cannot be read is phased: no NVML, no pids, pids NVML does not list (another pid namespace's figures)
    assert "NVML cannot list" in _plan(monkeypatch, None)["why"] and _plan(monkeypatch, None)["phased"] is True
    assert "no pids" in _plan(monkeypatch, small, census={})["why"]
    assert _plan(monkeypatch, small, census=dict(_CENSUS, runner_pid="4101"))["phased"] is True
    p = _plan(monkeypatch, {77: _GIB, 4101: _GIB})
    assert p["phased"] is True and "this judge" in p["why"]
    p = _plan(monkeypatch, {4100: _GIB})
    assert p["phased"] is True and "the runner" in p["why"]
    # red team 40: a figure NVML cannot give is no figure (None: 2**64 - 1 is no integer kgym's JSON parser takes),
    # a judge NVML counts below its own allocator's reservation is not this judge, and processes the census counted
    # besides the runner (or could not count) may hold device memory under pids of their own
    for bad in (None, (1 << 64) - 1, 1 << 63, -1, 1.5 * _GIB):
        p = _plan(monkeypatch, {4100: _GIB, 4101: bad})
        assert p["phased"] is True and "no figure" in p["why"] and p["runner_bytes"] is None, bad
        assert json.loads(json.dumps(p)) == p  # a line kgym's parser takes: no integer past 2**63 - 1
    assert _plan(monkeypatch, {4100: None, 4101: _GIB}, setting=None)["judge_bytes"] is None
    p = _plan(monkeypatch, small, reserved=int(1.5 * _GIB))
    assert p["phased"] is True and "below its own allocator" in p["why"]
    assert _plan(monkeypatch, small, reserved=_GIB)["phased"] is False
    for census in (dict(_CENSUS, processes=1), dict(_CENSUS, counted=False), {k: v for k, v in _CENSUS.items()
                                                                               if k != "processes"}):
        p = _plan(monkeypatch, small, census=census)
        assert p["phased"] is True and "census" in p["why"], census
    # the switches for paired measurements: "0" never, anything else but auto always
    assert _plan(monkeypatch, {4100: 9 * _GIB, 4101: 9 * _GIB}, setting="0")["phased"] is False
    for setting in ("yes", "auto:x", "auto:inf", "auto:nan", ""):
        p = _plan(monkeypatch, small, setting=setting)
        assert p["phased"] is True and "KGYM_EXIT_PHASE" in p["why"], setting


def test_the_wind_down_says_its_plan_and_holds_a_phase_when_phased(monkeypatch):
    monkeypatch.setenv("KGYM_EXIT_PHASE", "auto")
    for used, phased in (({4100: _GIB, 4101: _GIB}, False), ({4100: _GIB, 4101: 8 * _GIB}, True)):
        monkeypatch.setattr(child, "_gpu_state", lambda device, used=used: _Nvml(used))
        ev = _Ending()
        child.Evaluation.wind_down(ev, _CENSUS)
        assert [m["type"] for m in ev.sent] == ["wind_down"] and ev.sent[0]["phased"] is phased
        assert ev.sent[0]["runner_pid"] == 4101 and ev.sent[0]["judge_pid"] == 4100
        assert ev.asked == ([("shared", "exit")] if phased else []) and ev.gpu_mode == ("shared" if phased else None)
    # a plan that breaks is phased, said, and the finally block it runs in goes on (the runner told to exit)
    def broken(device, census):
        raise OverflowError("a bound too large")

    monkeypatch.setattr(child, "_wind_down_plan", broken)
    ev = _Ending()
    child.Evaluation.wind_down(ev, _CENSUS)
    assert ev.sent[0]["phased"] is True and "the plan failed: OverflowError" in ev.sent[0]["why"]
    assert ev.asked == [("shared", "exit")]
    monkeypatch.undo()
    # no GPU (or no arbiter), or a phase still held (hold_until_exit never asks again then): said, nothing asked
    for ev in (_Ending(device="cpu"), _Ending(gpu_mode="exclusive")):
        child.Evaluation.wind_down(ev, _CENSUS)
        assert ev.asked == [] and ev.sent[0]["phased"] is False and ev.sent[0]["runner_pid"] == 4101
