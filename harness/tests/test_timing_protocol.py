"""The timing stage's judge ↔ runner wiring, end to end on the CPU: a real Runner (runner.py) serving the judge's
RunnerLink over a socket, the judge's CrossTimer drawing a new set for every call into the call block the runner
maps (here a shared memfd: on a GPU it is a device block), the runner's description of every timed output and its
output checks, and the canaries read back after every call.  Only what needs a GPU is replaced: CUDA events
(timing.event_timed, timing.clock_block) and synchronize."""

import socket
import threading

import pytest
import torch
import triton
import triton.language as tl

from kgym_harness.judge import child, policy
from kgym_harness.runner import guards, runner
from kgym_harness.shared import timing, transport


@triton.jit
def _affine(x_ptr, out_ptr, n, spill, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x * 3.0 + 1.0, mask=offs < n)
    tl.store(x_ptr + n + offs, x, mask=offs < spill)  # `spill` values past the input's end


class Model(torch.nn.Module):
    """y = 3x + 1 in a Triton kernel; from call ``alias_from`` on it computes into its input and returns it, from
    call ``spill_from`` on it also writes past the input's end."""

    def __init__(self, alias_from=10**9, spill_from=10**9):
        super().__init__()
        self.calls, self.alias_from, self.spill_from = 0, alias_from, spill_from

    def forward(self, x):
        self.calls += 1
        out = x if self.calls >= self.alias_from else torch.empty_like(x)
        _affine[(1,)](x, out, x.numel(), 4 if self.calls >= self.spill_from else 0, BLOCK=64)
        return out


@pytest.fixture
def link(monkeypatch):
    """(the judge's RunnerLink, a RemoteModel factory, the runner): the runner serves in a thread."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(timing, "event_timed", lambda model, args, flusher=None, l2=None: (1.0, 1.5, model(*args)))
    monkeypatch.setattr(timing, "clock_block", lambda model, args, calls: ([1.0] * calls, model(*args)))
    a, b = socket.socketpair()
    r = runner.Runner(b, "cpu")
    r.guards = guards.Guards(policy.load_default())
    r.guards.install()
    t = threading.Thread(target=r.serve, daemon=True)
    t.start()
    findings = []
    ln = child.RunnerLink(a, "cpu", findings)

    def remote(model):
        r.models[len(r.models) + 1] = model
        return child.RemoteModel(ln, len(r.models))

    yield ln, remote, findings
    ln.ask({"cmd": "exit"})
    t.join(5)


def make_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(48, generator=g)]


def start(ln, cand, block_on=True, **kw):
    """The judge's side of timing_inputs (child.Evaluation.timing's call_block) and its CrossTimer."""
    block, views = transport.InPlace.make(make_inputs(1)) if block_on else (None, None)
    reply, _ = ln.ask({"cmd": "timing_inputs", "flush": False, "variant": ln.label("base")}, views, in_place=block)
    assert reply["type"] == "ok" and reply["l2"] is None
    return timing.CrossTimer(None, cand, make_inputs, block=block, flush=False,
                             ref_untimed=lambda x: x * 3.0 + 1.0, **kw)


@pytest.mark.parametrize("block_on", [True, False])
def test_every_timed_call_runs_on_the_set_the_judge_drew(link, block_on):
    ln, remote, findings = link
    cand = remote(Model())
    seen = []

    def on_pair(call, args, ref_out, rem, meta):
        seen.append((torch.equal(rem.fetch(), ref_out), meta))

    timer = start(ln, cand, block_on, check_every=1, on_pair=on_pair)
    timer.warm(2)
    timer.round(4)
    assert len(seen) == 4 and all(ok for ok, _m in seen), seen
    # a timed call's description leaves the non-finite count out (the checked calls get it with their sample)
    desc = {"type": "torch.Tensor", "shape": [48], "dtype": "float32", "stride": [1], "nonfinite": None}
    assert seen[0][1] == [desc]
    timer.clock_block_prepare()
    times = timer.clock_block(3)
    args, meta, prof = timer.clock_block_finish()  # after kgym's clock: the description of the kept output
    assert times == [1.0] * 3 and torch.equal(cand.fetch(), args[0] * 3.0 + 1.0)
    assert meta == [dict(desc, nonfinite=0)]  # the block's output is counted: one pass, outside the clock
    assert prof is None  # no profile asked for
    assert findings == []


class FakeRecording:
    """profile.Recording's stand-in (no CUDA here): says when it started and stopped in ``log``."""

    log = []

    def __init__(self):
        FakeRecording.log.append("start")

    def stop(self):
        FakeRecording.log.append("stop")
        return "prof"


@pytest.fixture
def fake_profiler(monkeypatch):
    from kgym_harness.shared import profile

    FakeRecording.log = []
    monkeypatch.setattr(profile, "Recording", FakeRecording)
    monkeypatch.setattr(profile, "summarize", lambda prof, calls, names, stream=None: {
        "prof": prof, "calls": calls, "launched": sorted(set(names)), "kernels": [], "total_device_us": 1.0})
    return FakeRecording.log


def test_the_clock_blocks_calls_are_the_profile(link, fake_profiler, monkeypatch):
    """The profile is of the clock block's own calls: started once the block's arguments are in (clock_prepare),
    with the launch hook recording the block's Triton launches, and stopped after kgym's clock, before the output is
    described (the description's own kernels are not the candidate's)."""
    ln, remote, findings = link
    cand = remote(Model())
    r_described = runner.Runner._described

    def described(self, out, args, model, nonfinite=True):
        fake_profiler.append("describe")
        return r_described(self, out, args, model, nonfinite)

    monkeypatch.setattr(runner.Runner, "_described", described)
    timer = start(ln, cand)
    timer.round(2)
    assert fake_profiler == ["describe", "describe"]  # timed calls: no profiler
    fake_profiler.clear()
    timer.clock_block_prepare(profile=True)
    assert fake_profiler == ["start"] and guards.LOG.active
    timer.clock_block(3)
    assert fake_profiler == ["start"]  # still running through the block
    args, meta, prof = timer.clock_block_finish()
    assert fake_profiler == ["start", "stop", "describe"]
    assert prof == {"prof": "prof", "calls": 3, "launched": ["_affine"], "kernels": [], "total_device_us": 1.0}
    assert not guards.LOG.active and findings == []


def test_a_failed_clock_block_stops_its_profiler(link, fake_profiler, monkeypatch):
    ln, remote, _findings = link

    class Raises(torch.nn.Module):
        def forward(self, x):
            raise ValueError("no")

    cand = remote(Raises())
    timer = start(ln, cand)
    timer.clock_block_prepare(profile=True)
    with pytest.raises(child.RemoteError):
        timer.clock_block(2)
    assert fake_profiler == ["start", "stop"] and not guards.LOG.active
    # the next block starts a profiler of its own (none is left running from the failed one)
    cand2 = remote(Model())
    timer2 = start(ln, cand2)
    timer2.clock_block_prepare(profile=True)
    timer2.clock_block(2)
    _args, _meta, prof = timer2.clock_block_finish()
    assert fake_profiler == ["start", "stop", "start", "stop"] and prof["calls"] == 2


class Poked(torch.nn.Module):
    """y = 3x + 1, then ``poke`` (an in-place function of the output) on it."""

    def __init__(self, poke):
        super().__init__()
        self.poke = poke

    def forward(self, x):
        out = torch.empty_like(x)
        _affine[(1,)](x, out, x.numel(), 0, BLOCK=64)
        self.poke(out)
        return out


@pytest.mark.parametrize("poke, expected", [
    (lambda out: None, True),
    (lambda out: out[7].add_(1.0), False),  # one wrong value: every position of a 48-element output is sampled
    (lambda out: out[5].fill_(float("nan")), None),  # non-finite, counted by the runner: compared in full
])
def test_a_checked_timed_output_is_sampled_at_positions_from_the_judges_seed(link, poke, expected):
    ln, remote, findings = link
    cand = remote(Poked(poke))
    got = []

    def on_pair(call, args, ref_out, rem, meta):
        from kgym_harness.judge import compare

        tol = compare.variant_tolerance(ref_out, 1e-5, 1e-5)
        got.append(child._sample_agrees(rem, ref_out, tol, 12345))

    timer = start(ln, cand, check_every=1, on_pair=on_pair)
    timer.round(2)
    assert got == [expected, expected]


def test_sample_positions_are_the_same_on_both_sides():
    a = timing.sample_positions([10, 1 << 17, 1 << 20], 99, "cpu")
    b = timing.sample_positions([10, 1 << 17, 1 << 20], 99, "cpu")
    assert a[0] is None and all(torch.equal(x, y) for x, y in zip(a[1:], b[1:]))
    assert a[1].numel() == timing.SAMPLES and int(a[2].max()) < 1 << 20
    assert not torch.equal(a[1], timing.sample_positions([1 << 17], 100, "cpu")[0])


def test_a_timed_output_that_is_its_input_is_output_alias(link):
    ln, remote, findings = link
    timer = start(ln, remote(Model(alias_from=3)))
    timer.warm(4)
    hits = [f for f in findings if f["type"] == "output_alias"]
    assert hits and hits[0]["stage"] == "timing" and hits[0]["variant"] == "base" and hits[0]["source"] == "runner"


def test_a_timed_call_that_writes_past_its_input_is_seen_in_the_call_block(link):
    ln, remote, findings = link
    seen = []
    timer = start(ln, remote(Model(spill_from=3)), on_overwrite=lambda call, hits: seen.append((call, hits)))
    timer.warm(2)
    assert seen == []
    timer.warm(1)
    assert seen and seen[0][0] == 2 and seen[0][1][0]["input"] == 0 and seen[0][1][0]["offset"] == 48 * 4


class _Clock:
    """A warm-up clock that moves ``step_ms`` every time it is read."""

    def __init__(self, step_ms=10.0):
        self.t, self.step = 0.0, step_ms / 1e3

    def __call__(self):
        self.t += self.step
        return self.t


class _State:
    """A GpuState stand-in: settled() answers from ``answers`` in turn (the last one from then on)."""

    def __init__(self, *answers):
        self.answers, self.asked = list(answers), 0

    def settled(self):
        self.asked += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def facts(self):
        return {"clock_mhz": 1980, "max_mhz": 1980, "reasons": 0}


@pytest.mark.parametrize("answers, ended, lo, hi", [
    ((True,), "settled", timing.SETTLE_FROM_MS + timing.SETTLE_FOR_MS, 250.0),
    ((False,), "time", 250.0, 270.0),  # a power limit met (or a clock below its maximum): the whole warm_ms
    ((True, True, False, True), "settled", timing.SETTLE_FROM_MS + timing.SETTLE_FOR_MS + 20.0, 250.0),
    (None, "time", 250.0, 270.0),  # no reading of the GPU: the whole warm_ms, as before
])
def test_a_warm_up_ends_early_only_on_the_judges_reading_that_the_gpu_settled(link, answers, ended, lo, hi):
    ln, remote, findings = link
    timer = start(ln, remote(Model()))
    timer.clock = _Clock(10.0)
    state = _State(*answers) if answers else None
    ran, ms = timer.warm(10, warm_ms=250.0, state=state)
    assert timer.warm_facts["ended"] == ended and lo <= ms <= hi, (timer.warm_facts, ms)
    assert ran == timer.warm_facts["calls"] >= 2
    if state is not None:
        # asked only from SETTLE_FROM_MS on, never before (a heavy kernel needs time to meet its limit)
        assert state.asked <= (ms - timing.SETTLE_FROM_MS) / 10.0 + 2
        assert timer.warm_facts["gpu"] == state.facts()
    assert findings == []


class _CallClock:
    """A clock that moves only when a call runs (``step``), by ``call_ms`` (the first call by ``first_ms``)."""

    def __init__(self, call_ms, first_ms=None):
        self.t, self.call_ms, self.first_ms, self.calls = 0.0, call_ms, first_ms, 0

    def __call__(self):
        return self.t

    def step(self):
        self.t += (self.first_ms if self.calls == 0 and self.first_ms is not None else self.call_ms) / 1e3
        self.calls += 1


@pytest.mark.parametrize("call_ms, first_ms, answers, calls, ended", [
    (92.0, None, (True,), 2, "settled"),  # read after the first call (92 ms) and the second: two calls, not three
    (92.0, None, None, 3, "time"),  # no reading of the GPU: at_least and warm_ms as before (3 x 92 >= 250)
    (92.0, None, (False, True), 3, "time"),  # not settled at the first reading: warm_ms comes before a second
    (30.0, None, (True,), 3, "settled"),  # a first call under SETTLE_FROM_MS: first read at 60 ms, as before
    (300.0, None, (False,), 2, "time"),  # past warm_ms after one call: ending by time keeps at_least (2)
    (5.0, 45.0, (True,), 6, "settled"),  # a slow first call: read at 45 ms, settled 20 ms later at 70
])
def test_a_long_first_call_is_read_at_its_end(link, call_ms, first_ms, answers, calls, ended):
    ln, remote, findings = link
    timer = start(ln, remote(Model()))
    clock = _CallClock(call_ms, first_ms)
    timer.clock = clock
    state = _State(*answers) if answers else None
    ran, ms, how = timer._warm_loop(clock.step, 0, 250.0, 2, state)
    assert (ran, how) == (calls, ended), (ran, ms, how)
    assert ran >= 2  # a settled end needs two readings SETTLE_FOR_MS apart, so two calls at the least


def test_later_rounds_warm_up_with_no_calls(link):
    ln, remote, findings = link
    timer = start(ln, remote(Model()))
    assert timer.warm(0) == (0, timer.warm_facts["ms"]) and timer.warm_facts["ended"] == "calls"


class _Read(timing.GpuState):
    def __init__(self, clock, reasons, max_mhz=1980):
        self.max_mhz, self._clock, self._r = max_mhz, clock, reasons

    def clock_mhz(self):
        return self._clock

    def reasons(self):
        return self._r


@pytest.mark.parametrize("clock, reasons, settled", [
    (1980, 0x0, True),
    (1980, 0x1, True),  # idle between two short calls is not a limit
    (1930, 0x0, True),  # within 3% of the maximum
    (1900, 0x0, False),  # below it: the clock is still rising, or held
    (1980, 0x4, False),  # software power cap: the heavy kernel's clock is about to come down
    (1980, 0x2, False),  # application clocks set below the maximum
    (1980, 0x20, False), (1980, 0x40, False), (1980, 0x80, False), (1980, 0x8, False),
    (-1, 0x0, False), (1980, -1, False),  # a failed read is never "settled"
])
def test_gpu_state_settled_means_at_its_clock_with_nothing_holding_it(clock, reasons, settled):
    assert _Read(clock, reasons).settled() is settled


class _ProcessList:
    """NVML's nvmlDeviceGetComputeRunningProcesses_v3 with ``rows`` (pid, bytes) on the device: "insufficient size"
    (7) with the count needed where the caller's array is too small, as NVML answers; ``rc`` any other answer."""

    def __init__(self, rows, rc=0):
        self.rows, self.rc, self.calls = rows, rc, 0

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle, count, infos):
        self.calls += 1
        if self.rc:
            return self.rc
        n = count._obj.value
        count._obj.value = len(self.rows)
        if n < len(self.rows):
            return 7
        for i, (pid, used) in enumerate(self.rows):
            infos[i].pid, infos[i].usedGpuMemory = pid, used
        return 0


def test_gpu_state_lists_the_device_memory_of_each_process():
    # The judge's wind-down reads the runner's and its own device memory from it (judge/child.py _wind_down_plan).
    state = _Read(1980, 0)
    state.handle = None
    state.lib = _ProcessList([(11, 5 << 20), (12, 2 << 30)])
    assert state.processes() == {11: 5 << 20, 12: 2 << 30}
    state.lib = _ProcessList([(100 + i, i) for i in range(100)])  # more than its first array holds: asked again
    assert state.processes() == {100 + i: i for i in range(100)} and state.lib.calls == 2
    # a pid listed twice: the sum; NVML's "not available" (2**64 - 1): None, whatever else that pid is listed with
    state.lib = _ProcessList([(11, 5), (11, 7), (12, (1 << 64) - 1), (13, 1), (13, (1 << 64) - 1), (14, 1 << 63)])
    assert state.processes() == {11: 12, 12: None, 13: None, 14: None}
    state.lib = _ProcessList([(11, 1)], rc=3)  # NVML_ERROR_NOT_SUPPORTED: no list, never an empty one
    assert state.processes() is None
    state.lib = object()  # neither call in this driver's library
    assert state.processes() is None


def test_gpu_state_is_none_without_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert timing.GpuState.open() is None


class _Reasons:
    """A watch whose reasons() answers from ``answers`` call by call (the last one from then on)."""

    def __init__(self, *answers):
        self.answers = list(answers)

    def reasons(self):
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@pytest.mark.parametrize("answers, held", [
    ((0,), False),
    ((0x1,), False),  # idle is not a limit
    ((0, 0, 0x4, 0), True),  # the power cap met once, mid-round: the round was timed before the steady state
    ((0, -1, 0), True),  # a failed read is never "still settled"
])
def test_a_round_under_watch_ors_the_clock_limit_reasons_after_every_call(link, answers, held):
    ln, remote, findings = link
    timer = start(ln, remote(Model()))
    timer.watch = _Reasons(*answers)
    timer.round(4)
    assert bool(timer.round_reasons & timing.HELD_BELOW) is held
    timer.watch = None
    timer.round(2)
    assert timer.round_reasons == 0  # no watch: nothing read, nothing kept from the last round
    assert findings == []


@pytest.mark.parametrize("iters, round_ms, per_call, n", [
    (50, 75.0, 0.5, 50),  # a fast kernel: the round's budget holds more than iters
    (50, 75.0, 10.0, 7),  # as many as fit
    (50, 75.0, 30.0, timing.MIN_ROUND_CALLS),  # a slow kernel: the floor (two calls would not fill the budget)
    (50, 75.0, 37.5, timing.MIN_LONG_ROUND_CALLS),  # two calls fill it: two a round
    (50, 75.0, 92.0, timing.MIN_LONG_ROUND_CALLS),
    (50, 150.0, 60.0, timing.MIN_ROUND_CALLS),  # the budget of a round of pairs: 60 ms calls still get three
    (1, 75.0, 92.0, 1),  # never above iters
    (2, 75.0, 92.0, 2),  # never above iters
    (50, 0.0, 10.0, 50), (50, 75.0, 0.0, 50),  # no budget, or no cost measured yet
])
def test_round_calls_fit_the_budget_between_the_floor_and_iters(iters, round_ms, per_call, n):
    assert timing.round_calls(iters, round_ms, per_call) == n


class _Watch(_State):
    """A GpuState stand-in for the reference-alone rounds: settled() as _State, and reasons() from ``reasons`` in
    turn (the last one from then on)."""

    def __init__(self, settled, reasons):
        super().__init__(*settled)
        self.reasons_left, self.reads = list(reasons), 0

    def reasons(self):
        self.reads += 1
        return self.reasons_left.pop(0) if len(self.reasons_left) > 1 else self.reasons_left[0]


def _alone_timer(monkeypatch):
    """A CrossTimer whose reference call takes 10 ms on its clock (each call's stream time is its index)."""
    clock = _Clock(0.0)
    calls = []

    def event_timed(model, args, flusher=None, l2=None):
        clock.t += 0.010
        calls.append(len(calls))
        return float(len(calls)), float(len(calls)) + 0.5, model(*args)

    monkeypatch.setattr(timing, "event_timed", event_timed)
    timer = timing.CrossTimer(lambda x: x * 3.0 + 1.0, None, make_inputs, flush=False)
    timer.clock = clock
    return timer, calls


@pytest.mark.parametrize("settled, max_broken, ended, lo, hi", [
    ((True,), 2, "settled", timing.SETTLE_FROM_MS + timing.SETTLE_FOR_MS, 100.0),
    ((False,), 2, "time", 250.0, 270.0),  # held below its clock: the whole warm_ms
    ((True,), 0, "time", 250.0, 270.0),  # rounds not watched: no early end either (fail closed)
    (None, 2, "time", 250.0, 270.0),  # no reading of the GPU (a CPU, MIG, no NVML): as before
])
def test_the_reference_alone_warms_up_by_the_candidates_rule(monkeypatch, settled, max_broken, ended, lo, hi):
    timer, calls = _alone_timer(monkeypatch)
    state = _Watch(settled, [0]) if settled else None
    stream, device = timer.reference_alone(3, 250.0, 45.0, 50, state=state, max_broken=max_broken)
    (warm,) = timer.alone_facts["warm"]
    assert warm["ended"] == ended and lo <= warm["ms"] <= hi and warm["calls"] >= 2, warm
    assert timer.alone_facts["lost"] == 0
    # three rounds of 45 ms at 10 ms a call (round_calls: 4 each), the warm-up's calls not among them
    assert len(stream) == 12 and stream == [float(i) for i in range(warm["calls"] + 1, warm["calls"] + 13)]
    assert device == [t + 0.5 for t in stream]  # the same calls' device-wide times, in order
    assert len(calls) == warm["calls"] + 12


@pytest.mark.parametrize("reasons, lost", [
    # the power cap appears in the first round after a warm-up that settled without it: that round is lost, the
    # next warm-up takes the whole warm_ms (unwatched for settling), and from it on the cap is the base
    ([0, 0, 0x4], 1),
    ([0, 0, -1, 0], 1),  # a failed read during a round counts as a limit
    ([0x4], 0),  # a cap the warm-up ended with is its steady state, not news
    # a reference that meets the cap in every round after every warm-up: max_broken rounds lost, then unwatched
    ([0, 0x4, 0x4, 0x4, 0x4, 0, 0x4], 2),
    ([0x1], 0),  # idle between calls is not a limit
])
def test_a_clock_limit_met_in_a_reference_round_costs_that_round(monkeypatch, reasons, lost):
    timer, calls = _alone_timer(monkeypatch)
    state = _Watch((True,), reasons)
    stream, device = timer.reference_alone(3, 250.0, 45.0, 50, state=state, max_broken=2)
    facts = timer.alone_facts
    assert facts["lost"] == lost, facts
    assert [w["ended"] for w in facts["warm"]] == ["settled"] + ["time"] * lost
    # only counted rounds' samples: three rounds of 4, never a lost round's (device-wide times alike)
    assert len(stream) == 12 and device == [t + 0.5 for t in stream]
    assert len(calls) == sum(w["calls"] for w in facts["warm"]) + 4 * (3 + lost)


def test_checked_positions_cover_short_rounds_and_one_in_check_every_of_long_ones():
    import random
    rng = random.Random(7)
    # A round of up to MIN_ROUND_CHECKS calls: every call; 5 to 15: three; 50 at one in five: ten.
    for calls, k in [(1, 1), (2, 2), (3, 3), (5, 3), (15, 3), (16, 4), (37, 8), (50, 10)]:
        drawn = timing.checked_positions(rng, calls, 5)
        assert len(drawn) == k and all(0 <= i < calls for i in drawn)
    assert timing.checked_positions(rng, 50, 0) == frozenset()
    # Positions differ from round to round: each of a 5-call round's calls is drawn in about 3 rounds of 5.
    hits = [0] * 5
    for _ in range(3000):
        for i in timing.checked_positions(rng, 5, 5):
            hits[i] += 1
    assert all(abs(h / 3000 - 0.6) < 0.05 for h in hits)


class SkipFirst(Model):
    """Right on every call but the first of each 3-call round, where it returns its input set's values unchanged
    (red team 27's skip_one_in_three: rounds of 3 calls, so the candidate knows which calls open a round)."""

    def forward(self, x):
        if self.calls % 3 == 0:
            self.calls += 1
            return x.clone()
        return super().forward(x)


def test_a_skipped_call_in_a_three_call_round_is_always_checked(link):
    ln, remote, findings = link
    cand = remote(SkipFirst())
    wrong = []

    def on_pair(call, args, ref_out, rem, meta):
        if not torch.equal(rem.fetch(), ref_out):
            wrong.append(call)

    timer = start(ln, cand, check_every=5, on_pair=on_pair)
    for _ in range(20):
        timer.round(3)
    # Every round's skipped call was compared (and seen wrong), whichever positions were drawn.
    assert wrong == list(range(0, 60, 3))


class _TimedClock:
    """A clock that moves only when the runner answers a call (by ``call_ms``, the first call by ``first_ms``) or a
    call's output is checked (by ``check_ms``: the reference's own run on a cache hit, and the comparison)."""

    def __init__(self, timer, call_ms, first_ms=None, check_ms=0.0):
        self.t, self.call_ms, self.first_ms, self.check_ms, self.calls = 0.0, call_ms, first_ms, check_ms, 0
        remote_timed = timer._remote_timed

        def timed(send, call):
            first = self.calls == 0 and self.first_ms is not None
            self.t += (self.first_ms if first else self.call_ms) / 1e3
            self.calls += 1
            return remote_timed(send, call)

        timer._remote_timed = timed
        timer.clock = self

    def __call__(self):
        return self.t

    def on_pair(self, call, args, ref_out, rem, meta):
        self.t += self.check_ms / 1e3


@pytest.mark.parametrize("warm_call, first_ms, timed_call, first_n, next_n", [
    # red team 28 (pad_two_call_gemm.py): two light warm-up calls of 42 ms (their outputs are never checked) make
    # rounds of MIN_LONG_ROUND_CALLS; the timed calls cost 12 ms (a ~10 ms GEMM and the judge's draw), each checked
    # one followed by a 20-ms reference run.  The warm-up's pace alone gave every round 2 calls: three short rounds,
    # six heavy calls.  The next round fills the 75-ms budget at the round's own pace, checks left out (with them,
    # 64 ms for 2 calls still said 2).
    (42.0, None, 12.0, 2, 6),
    (42.0, None, 1.0, 2, 50),  # a timed call 40 times faster than the pace: the next round holds iters
    (42.0, None, 42.0, 2, 2),  # an honest 42 ms candidate: 2 calls a round throughout, checks notwithstanding
    (10.0, None, 10.0, 7, 7),  # an honest 10 ms candidate: as many as fit, throughout
    (10.0, None, 15.0, 7, 7),  # a round slower than its warm-up: the pace is the fastest seen, never raised
    # an honest 25 ms candidate with a 60-ms first call (one-time costs): read at 60 and 85 ms, its warm-up ends
    # after two calls at 42.5 ms a call, so its first round holds 2 calls where its pace fills 3; the next holds 3
    (25.0, 60.0, 25.0, 2, 3),
])
def test_a_round_that_outruns_its_warm_ups_pace_sizes_the_next(link, warm_call, first_ms, timed_call, first_n,
                                                                next_n):
    ln, remote, findings = link
    timer = start(ln, remote(Model()), check_every=5)
    clock = _TimedClock(timer, warm_call, first_ms, check_ms=20.0)
    timer.on_pair = clock.on_pair
    timer.warm(0, warm_ms=250.0, state=_State(True))
    n = timer.round_size(50, 75.0)
    assert n == first_n, (timer.warm_facts, timer.pace_ms)
    clock.call_ms = timed_call
    timer.round(n)
    assert timer.round_size(50, 75.0) == next_n, timer.pace_ms
    assert findings == []
