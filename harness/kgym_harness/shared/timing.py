"""GPU timing of a reference and a candidate: raw per-call times, nothing derived.

The protocol (docs/evaluation-protocol.md, "Timing"):
  - both models are timed in this one process, on the current stream, interleaved call by call
    (A B, then B A, ...: the order alternates so neither always runs right after the L2 flush of the other);
  - ``warmup`` calls of each first (compilation, caches, allocator), then rounds of ``iters`` timed calls of
    each; the child runs each round inside an exclusive GPU window granted by kgym's arbiter;
  - before every timed call the L2 cache is flushed by writing a buffer at least twice its size
    (not timed), so no call profits from the previous call's data in L2, and lines a persisting-L2 set-aside
    would keep through that flush are reset first (PersistingL2);
  - every call gets fresh input values (``fresh``: generated on the GPU for that call, untimed), or rotates
    among several pre-generated sets; either way no call sees the inputs of the previous one (CrossTimer,
    the judge's timer of a candidate in the runner, draws a whole new set from the task for every call);
  - each call is bracketed by CUDA events: the stream time (start to an end event recorded right after the
    call) and the device-wide time (to an event recorded after a device-wide synchronize), so work the
    candidate left on side streams can be counted (kgym decides which one applies).
The C side computes every statistic from the lists returned here, and stamps the begin/end messages of
each round with its own clock (a lower bound on real elapsed time the child cannot fake).
"""

import os
import random
import time

import torch


# The fewest calls a timing round holds, and a clock block (child.py): a round is cut to about round_ms, but a slow
# kernel still gets this many calls a round.  A call of tens of milliseconds varies by well under 1% from one call
# to the next, so three a round (nine over the planned rounds) measure it as precisely as fifty measure a 20 us
# kernel; a floor of five gave a 90 ms candidate 3 s of exclusive GPU time, a third of a GRPO mix's.
MIN_ROUND_CALLS = 3
# A clock block of one call where one call is 10 ms or more of work (int(20 ms / median) < 2): kgym's clock bounds a
# 10 ms call as well as two (its slack is 2 ms a block and 0.1 ms a call, timing.c), and the profile of one call is
# the forward's share as well as two identical ones; a second call gave level2/22 (~90 ms) 95 ms of exclusive GPU
# time for nothing (was 2 until the thirty-first session).  The block's input set is fresh as before, so its one
# call has never seen its inputs (red team 30 pads only on repeated ones).
MIN_CLOCK_BLOCK_CALLS = 1
# The most calls a clock block holds (~20 ms of the candidate's work; child.py).  The block is also the profile, so
# this bounds the events the runner's profiler sums inside the exclusive window.  Below ~0.1 ms a call, the calls'
# own time is smaller than kgym's slack for them (0.1 ms a call: timing.c), and no number of calls bounds anything.
MAX_CLOCK_BLOCK_CALLS = 200
# ... except where two calls already fill the round's budget (a call of half round_ms or more: 25 ms and up with
# the reference timed apart): then two a round.  Such a round lasts its whole budget or more (a floor of three made
# a 92 ms candidate's round 276 ms against a 75 ms budget, at 150 ms rounds), its two calls are both checked (MIN_ROUND_CHECKS), and a
# call that long varies by ~0.1% from the next (PERFORMANCE, twenty-eighth session, for what it moved).
MIN_LONG_ROUND_CALLS = 2

# The fewest timed calls of a round whose outputs are compared with the reference's (all of a shorter round's).
# A candidate that skips its work on some timed calls gains only from samples the trimmed mean keeps, and rounds of
# a few calls keep all of them (two rounds of 3: floor(0.1 * 6) = 0 trimmed): with one call in five checked, and the
# last only where none was, a candidate that padded its warm-up to get 3-call rounds, knew the timed calls, and
# skipped the first of each went unseen 64% of the time for x1.5 (red team 27).  Now a round of n calls checks
# max(n / check_every, 3) of them (all of n <= 3), at positions drawn for the round from the operating system's
# randomness: skipping s of n calls goes unseen with probability C(n - s, k) / C(n, k).
MIN_ROUND_CHECKS = 3


def checked_positions(rng, calls, check_every):
    """Which of a round's ``calls`` timed calls have their outputs compared: max(ceil(calls / check_every),
    MIN_ROUND_CHECKS) of them (every call where that is all of them), drawn without replacement by ``rng`` (the
    judge's generator, seeded from the operating system); none when ``check_every`` is 0.  The runner cannot know
    them: they live in the judge's process, and nothing about a call tells whether it was drawn."""
    if not check_every or calls <= 0:
        return frozenset()
    k = min(calls, max(-(-calls // check_every), MIN_ROUND_CHECKS))
    return frozenset(rng.sample(range(calls), k))


def round_calls(iters, round_ms, per_call_ms):
    """How many calls a round holds: as many as fit ``round_ms`` at ``per_call_ms`` each, at most ``iters`` and at
    least MIN_ROUND_CALLS, or MIN_LONG_ROUND_CALLS where that many calls fill ``round_ms`` (never above ``iters``);
    ``iters`` where there is no budget or no cost yet."""
    if round_ms <= 0 or per_call_ms <= 0:
        return iters
    floor = MIN_LONG_ROUND_CALLS if MIN_LONG_ROUND_CALLS * per_call_ms >= round_ms else MIN_ROUND_CALLS
    return max(min(iters, floor), min(iters, int(round_ms / per_call_ms)))


def l2_bytes(device=None) -> int:
    props = torch.cuda.get_device_properties(device or torch.cuda.current_device())
    return int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)


# GPU cycles the device is kept busy for before a timed call's start event (about 0.3 ms on an H100): the
# host launches the call's kernels meanwhile, so the events time the kernels, not Python's launch overhead.
# Measured on an H100 without it: kgym's times were 2-8% above triton.testing.do_bench's, and 58% above on a
# 0.18 ms kernel (level1/88), where the flush alone (tens of microseconds) hid too little of the launch.
LAUNCH_COVER_CYCLES = 600_000


class PersistingL2:
    """Resets, before each timed call of this process, what the L2 flush cannot evict: lines marked persisting
    (cudashare.reset_persisting_l2: the context's persisting set-aside back to 0, every persisting line back to
    normal).  Without it a candidate that sets an access-policy window on its stream (or marks loads with
    eviction hints) keeps its data in a set-aside part of L2 that the flush's normal stores do not use, and
    its next timed call reads it from L2.

    Where it runs: in the process whose calls are timed, the runner for the candidate (the judge for the
    reference).  The set-aside is a limit of the CUDA context that set it, and the reset is documented as
    acting through the calling context only ("resets all persisting lines in cache to normal status", with no
    word on other contexts): a reset in the judge's context is not known to clear lines the runner's context
    marked, so it cannot be relied on (bench/l2_persist_probe.py measures it on a GPU).  The runner's harness
    is trusted as far as the candidate cannot reach it (the candidate language refuses ctypes and torch.cuda's
    internals, the only roads to the driver); the judge cannot check it was done.

    No-op off CUDA.  A driver without the API, or a reset that fails, is a fact (``facts()``), never an
    exception: kgym (C) decides what a missing reset means (result.c: a warning where the device can set L2
    aside, nothing where it cannot)."""

    def __init__(self, device="cuda"):
        self.max_bytes = 0
        self.error = None  # why resets are not done (the first failure), None while they are
        self.active = False
        self.resets = 0
        self.found = 0  # resets that found a non-zero set-aside: something in this process had set one
        if not str(device).startswith("cuda"):
            self.error = "not a CUDA device"
            return
        from . import cudashare

        try:
            self.max_bytes = cudashare.persisting_l2_max()
        except Exception as exc:  # noqa: BLE001 — no driver API: a fact for kgym
            self.error = f"{type(exc).__name__}: {exc}"[:300]
            return
        self.active = self.max_bytes > 0

    def __call__(self):
        if not self.active:
            return
        from . import cudashare

        try:
            if cudashare.reset_persisting_l2():
                self.found += 1
            self.resets += 1
        except Exception as exc:  # noqa: BLE001 — reported, and no more attempts (each would fail alike)
            self.error = f"{type(exc).__name__}: {exc}"[:300]
            self.active = False

    def facts(self) -> dict:
        """{"max_bytes": the device's largest set-aside (0: nothing can persist), "reset": "ok" | "not_needed"
        | why not, "resets": how many were done, "set_aside_found": how many found a set-aside}."""
        if self.error is not None:
            state = self.error
        else:
            state = "ok" if self.max_bytes > 0 else "not_needed"
        return {"max_bytes": self.max_bytes, "reset": state, "resets": self.resets, "set_aside_found": self.found}


def event_timed(model, args, flusher=None, l2=None):
    """One call of ``model(*args)``: (stream ms, device ms, output).  ``l2`` (a PersistingL2) resets persisting
    L2 lines first, on the host before anything is queued (a driver call that waited for the device must not
    eat the launch cover).  A GPU sleep and then the flush are queued,
    not waited for, so the model's launches are queued behind them (LAUNCH_COVER_CYCLES) instead of leaving the
    GPU idle behind the start event.  ``end`` is recorded on the current stream right after the call returns;
    then a device-wide synchronize and ``after``: work the call left on other streams shows as a gap between the
    two, which kgym compares with the reference's own gap (a reference never leaves work behind) and counts
    when it is larger.  Host work a call does beyond the cover is still timed, and kgym's own clock bounds a
    block of calls (clock_block) besides."""
    if l2 is not None:
        l2()
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:
        sleep(LAUNCH_COVER_CYCLES)
    if flusher:
        flusher()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    after = torch.cuda.Event(enable_timing=True)
    start.record()
    out = model(*args)
    end.record()
    torch.cuda.synchronize()  # side streams included
    after.record()
    after.synchronize()
    return start.elapsed_time(end), start.elapsed_time(after), out


class L2Flusher:
    """Writes a buffer of at least twice the L2 size: whatever a call left in L2 is evicted."""

    def __init__(self):
        self.nbytes = 2 * l2_bytes()
        self.buf = torch.empty(self.nbytes // 4, dtype=torch.int32, device="cuda")

    def __call__(self):
        self.buf.fill_(0x5A5A)


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if torch.is_tensor(t))


def _clone(args):
    return [x.clone() if torch.is_tensor(x) else x for x in args]


# Positions a checked timed output is sampled at, per output tensor (all of a smaller one).
SAMPLES = 1 << 16


def sample_positions(numels, seed, device, samples=SAMPLES):
    """The positions a checked timed output is compared at: one index tensor per output of ``numels`` elements
    (None: all of a tensor of at most ``samples``), drawn from ``seed`` on ``device`` by a generator of their own.
    The judge and the runner compute them alike from the seed the judge draws after the call (so the runner
    could not know them while it computed), and only the seed crosses, not a block of positions.  (Measured on an
    H200: the answer through host memory or a device block makes no difference, 11.4 against 10.6 ms a check's
    exchange; that time was the runner's first kernel launches and its non-finite count: runner._warm_checks.)"""
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    return [torch.randint(int(n), (samples,), device=device, generator=gen) if int(n) > samples else None
            for n in numels]


def input_set_count(inputs, wanted: int = 3) -> int:
    """How many input sets fit: each set is held twice (reference and candidate copies), and half the
    free memory is left for the models' own work."""
    need = 2 * max(1, _nbytes(inputs))
    free, _total = torch.cuda.mem_get_info()
    return max(1, min(wanted, int(0.5 * free) // need))


class PairTimer:
    """Times ``ref`` and ``cand`` call by call.

    ``make_inputs(k)`` returns the k-th input set (a list) created on the GPU from its own seed; the
    candidate always gets its own copy, so a candidate that writes into its inputs cannot change what the
    reference sees.  ``ref`` may be None (the reference's times come from kgym's cache): only the
    candidate is timed then, and ``on_pair`` gets a reference output computed untimed.
    ``on_pair(call, ref_args, ref_out, cand_out)`` is called for the pairs checked_positions draws (about one in
    ``check_every``, at least MIN_ROUND_CHECKS a round), right after the pair ran and before the next call can reuse
    the candidate's output buffer.  They are drawn from the operating system's randomness: a candidate that
    counts its calls cannot tell a checked call from an unchecked one and do the work only on those.
    """

    def __init__(self, ref, cand, make_inputs, fresh=True, sets=3, flush=True, check_every=0, on_pair=None,
                 ref_untimed=None):
        self.ref, self.cand, self.make_inputs = ref, cand, make_inputs
        self.ref_untimed = ref_untimed or ref
        self.fresh = fresh
        self.flusher = L2Flusher() if flush else None
        self.l2 = PersistingL2() if flush else None
        self.check_every, self.on_pair = check_every, on_pair
        self.random = random.Random(int.from_bytes(os.urandom(8), "little"))
        self.calls = 0
        self.seed_calls = 0
        # Host time spent outside the timed calls (generating inputs, re-checking outputs): where a round's
        # wall time goes besides the calls themselves.
        self.overhead = {"inputs_ms": 0.0, "checks_ms": 0.0}
        if fresh:
            self.sets = []
        else:
            first = make_inputs(0)
            n = input_set_count(first, sets)
            self.sets = [first] + [make_inputs(k) for k in range(1, n)]
        self.input_sets = len(self.sets)

    def _inputs(self):
        t0 = time.perf_counter()
        try:
            return self._make()
        finally:
            self.overhead["inputs_ms"] += (time.perf_counter() - t0) * 1e3

    def _make(self):
        if self.fresh:
            self.seed_calls += 1
            args = self.make_inputs(self.seed_calls)
            return args, _clone(args)
        args = self.sets[self.calls % len(self.sets)]
        return args, _clone(args)

    def _timed(self, model, args):
        return event_timed(model, args, self.flusher, self.l2)

    def warm(self, calls, warm_ms=0.0, at_least=2):
        """Untimed pairs.  Without ``warm_ms``: ``calls`` of them.  With it: for ``warm_ms`` of wall time,
        whatever ``calls`` says, and at least ``at_least`` pairs: a GPU raises its clocks over the first
        ~100-200 ms of load, so a 20 us kernel needs far more than 10 calls to be measured warm, and a 40 ms
        GEMM far fewer.  Returns (pairs run, milliseconds they took)."""
        t0 = time.perf_counter()
        ran = 0
        with torch.no_grad():
            while True:
                if warm_ms <= 0 and ran >= calls:
                    break
                if warm_ms > 0 and ran >= at_least:
                    torch.cuda.synchronize()
                    if (time.perf_counter() - t0) * 1e3 >= warm_ms:
                        break
                ref_args, cand_args = self._inputs()
                if self.ref is not None:
                    self.ref(*ref_args)
                self.cand(*cand_args)
                ran += 1
            torch.cuda.synchronize()
        return ran, (time.perf_counter() - t0) * 1e3

    def round(self, iters):
        """One round: ``iters`` timed calls of each model.  Returns (reference_ms, candidate_ms,
        reference_device_ms, candidate_device_ms): stream times and device-wide times, call by call."""
        ref_ms, cand_ms, ref_dev, cand_dev = [], [], [], []
        drawn = checked_positions(self.random, iters, self.check_every) if self.on_pair else frozenset()
        with torch.no_grad():
            for i in range(iters):
                ref_args, cand_args = self._inputs()
                call = self.calls
                self.calls += 1
                ref_out = None
                if self.ref is None:
                    t, d, cand_out = self._timed(self.cand, cand_args)
                    cand_ms.append(t)
                    cand_dev.append(d)
                elif call % 2 == 0:
                    t, d, ref_out = self._timed(self.ref, ref_args)
                    ref_ms.append(t)
                    ref_dev.append(d)
                    t, d, cand_out = self._timed(self.cand, cand_args)
                    cand_ms.append(t)
                    cand_dev.append(d)
                else:
                    t, d, cand_out = self._timed(self.cand, cand_args)
                    cand_ms.append(t)
                    cand_dev.append(d)
                    t, d, ref_out = self._timed(self.ref, ref_args)
                    ref_ms.append(t)
                    ref_dev.append(d)
                if i in drawn:
                    t0 = time.perf_counter()
                    if ref_out is None:
                        ref_out = self.ref_untimed(*ref_args)
                    self.on_pair(call, ref_args, ref_out, cand_out)
                    self.overhead["checks_ms"] += (time.perf_counter() - t0) * 1e3
                del ref_out, cand_out, ref_args, cand_args
        return ref_ms, cand_ms, ref_dev, cand_dev


def clock_block(model, args, calls):
    """``calls`` calls of ``model(*args)`` back to back, each bracketed by events, no flush and no checks in
    between: the supervisor's clock around this block bounds the real time they took.  Returns (times, the
    last call's output)."""
    times, out = [], None
    with torch.no_grad():
        torch.cuda.synchronize()
        for _ in range(calls):
            out = None  # the previous output goes first: two multi-GB outputs at once are above the reservation
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            out = model(*args)
            torch.cuda.synchronize()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return times, out


def time_pair(ref, cand, make_inputs, warmup: int = 10, rounds: int = 3, iters: int = 50,
              sets: int = 3, flush: bool = True, fresh: bool = False, on_round=None):
    """Times ``ref`` and ``cand`` in ``rounds`` rounds (a convenience over PairTimer for checks and
    benchmarks).  ``on_round(i, "begin"|"end")`` is called around each round.
    Returns {"rounds": [{"reference_ms": [...], "candidate_ms": [...]}], "input_sets": n,
    "flush_bytes": b, "warmup": w, "iters": i}."""
    timer = PairTimer(ref, cand, make_inputs, fresh=fresh, sets=sets, flush=flush)
    result = {"rounds": [], "input_sets": timer.input_sets,
              "flush_bytes": timer.flusher.nbytes if timer.flusher else 0, "warmup": warmup, "iters": iters}
    timer.warm(warmup)
    for r in range(rounds):
        if on_round:
            on_round(r, "begin")
        ref_ms, cand_ms, ref_dev, cand_dev = timer.round(iters)
        if on_round:
            on_round(r, "end")
        result["rounds"].append({"reference_ms": ref_ms, "candidate_ms": cand_ms, "reference_device_ms": ref_dev,
                                 "candidate_device_ms": cand_dev})
    return result


# A warm-up may end before warm_ms once the GPU has been "settled" this long, checked from SETTLE_FROM_MS on
# (GpuState.settled; CrossTimer.warm): at the earliest SETTLE_FROM_MS + SETTLE_FOR_MS into the candidate's load.
# Measured on an H200 (bench/gpu_clock_probe.py, docs/evaluation-protocol.md "Rounds"): from idle the SM clock is
# at its maximum within the first call; a heavy kernel (an fp16 GEMM 8192 at 865 W) meets the 700 W limit ~80 ms
# into a load of back-to-back calls, when the clock drops and the power-cap reason appears.  kgym's calls are not
# back to back (a timed fp16 GEMM call every ~4 ms, 1.8 ms of it the GEMM: it settled at ~125 ms with no reason and
# met none in its rounds, red team 7's a_light_warm control on an H200), and a limit first met in the rounds is
# caught there: the round does not count and the next warms up for the whole warm_ms (child.py, timer.watch).  So
# the check starts at 40 ms and needs 20 ms: a warm-up ends at ~60 ms where it ended at ~125 ms (was 80 + 40 ms).
SETTLE_FROM_MS = 40.0
SETTLE_FOR_MS = 20.0

# NVML's clock-limit reasons that mean the GPU is held below its clock by something that changes with the load or
# over time (nvmlClocksEventReasons): software power cap 0x4, hardware slowdown 0x8, sync boost 0x10, software
# thermal 0x20, hardware thermal 0x40, power brake 0x80, and application clocks 0x2.  Idle (0x1) is not one: a
# GPU between two short calls may say it.
HELD_BELOW = 0x2 | 0x4 | 0x8 | 0x10 | 0x20 | 0x40 | 0x80


def watched_reasons(state) -> int:
    """A watch's reading of ``state`` (GpuState) after a timed call: its clock-limit reasons, a failed read
    counting as HELD_BELOW (a limit cannot be ruled out).  Rounds OR these; ``new_limit`` says whether they break
    one (the candidate's rounds: child.py; the reference's alone: CrossTimer.reference_alone)."""
    r = state.reasons()
    return r if r >= 0 else HELD_BELOW


def new_limit(seen: int, base: int) -> bool:
    """Whether the reasons ``seen`` in a round hold a HELD_BELOW one that the warm-up did not end with (``base``):
    the round ran before the load's own steady state and does not count."""
    return bool(seen & HELD_BELOW & ~base)


class GpuState:
    """The GPU's SM clock and clock-limit reasons, read by the judge through NVML (``libnvidia-ml.so.1`` with
    ctypes; about a microsecond a read).  The judge's own reading: nothing of it passes through the runner.

    ``settled()``: the SM clock is within 3% of its maximum and no reason in HELD_BELOW holds it down, i.e. the
    candidate's load neither needs the clock to rise nor has met a power or thermal limit that will bring it down.
    ``open(device)`` returns None where NVML or the device cannot be read (no NVIDIA driver, CPU runs, MIG, a
    failed call): the warm-up then runs its whole time, as it did before (fail closed)."""

    def __init__(self, lib, handle):
        self.lib, self.handle = lib, handle
        self.max_mhz = self._read(lib.nvmlDeviceGetMaxClockInfo, 1)  # NVML_CLOCK_SM
        # the older name of the same call, for drivers before it was renamed
        self._reasons = (getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None)
                         or lib.nvmlDeviceGetCurrentClocksThrottleReasons)

    @classmethod
    def open(cls, device=None):
        import ctypes

        try:
            if not torch.cuda.is_available():
                return None
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return None
            props = torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device())
            handle = ctypes.c_void_p()
            uuid = str(getattr(props, "uuid", "") or "")
            if not uuid:
                return None
            name = uuid if uuid.startswith(("GPU-", "MIG-")) else "GPU-" + uuid
            if lib.nvmlDeviceGetHandleByUUID(name.encode(), ctypes.byref(handle)) != 0:
                return None
            state = cls(lib, handle)
            if state.max_mhz <= 0 or state.clock_mhz() <= 0 or state.reasons() < 0:
                return None
            return state
        except Exception:  # noqa: BLE001 — no NVML here: the warm-up keeps its whole time
            return None

    def _read(self, fn, kind):
        import ctypes

        v = ctypes.c_uint()
        return int(v.value) if fn(self.handle, kind, ctypes.byref(v)) == 0 else -1

    def clock_mhz(self):
        return self._read(self.lib.nvmlDeviceGetClockInfo, 1)  # NVML_CLOCK_SM

    def reasons(self):
        import ctypes

        v = ctypes.c_ulonglong()
        if self._reasons(self.handle, ctypes.byref(v)) != 0:
            return -1
        return int(v.value)

    def settled(self):
        clock, reasons = self.clock_mhz(), self.reasons()
        return clock > 0 and reasons >= 0 and clock >= 0.97 * self.max_mhz and not reasons & HELD_BELOW

    def facts(self):
        return {"clock_mhz": self.clock_mhz(), "max_mhz": self.max_mhz, "reasons": self.reasons()}

    def processes(self):
        """The device memory NVML counts for each process with a CUDA context on this GPU, {pid: bytes} (pids as
        the driver gives them to this process; a pid listed twice, the sum), or None where the list cannot be read.
        A process whose figure NVML cannot give (NVML_VALUE_NOT_AVAILABLE, 2**64 - 1) is listed with None: that
        value is no JSON integer kgym's parser takes (over 2**63 - 1), and no figure is more than any bound."""
        import ctypes

        class Info(ctypes.Structure):  # nvmlProcessInfo_t (v2 and v3 share the layout)
            _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                        ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]

        try:
            fn = (getattr(self.lib, "nvmlDeviceGetComputeRunningProcesses_v3", None)
                  or self.lib.nvmlDeviceGetComputeRunningProcesses_v2)
            size = 64
            for _ in range(4):  # the list may grow between the count and the read: NVML says so (7, too small)
                count = ctypes.c_uint(size)
                infos = (Info * size)()
                rc = fn(self.handle, ctypes.byref(count), infos)
                if rc == 0:
                    used = {}
                    for i in range(count.value):
                        pid, n = int(infos[i].pid), int(infos[i].usedGpuMemory)
                        known = n < (1 << 63) and used.get(pid, 0) is not None
                        used[pid] = used.get(pid, 0) + n if known else None
                    return used
                if rc != 7:  # NVML_ERROR_INSUFFICIENT_SIZE
                    return None
                size = max(2 * size, int(count.value) + 16)
        except Exception:  # noqa: BLE001 — an old driver without either call
            return None
        return None


class CrossTimer:
    """PairTimer's protocol with the candidate in another process (the runner, runner.py).

    The reference is timed here, the candidate in the runner, each with CUDA events in its own context, one call
    after the other (A B, then B A), each after an L2 flush and a persisting-L2 reset of its own.

    Inputs: every call draws a whole new input set from the task, ``make_inputs(seed)`` with a seed from the
    operating system's randomness, made here, untimed.  A call's inputs share nothing with any other call's but
    their distribution and the structure the task's ``get_inputs`` gives them (triangular, symmetric, indices,
    masks, probabilities: all kept, since the task itself draws them): there is no ratio, offset or permutation
    of earlier inputs for a candidate to fingerprint and undo on a result it computed before (docs/threat-model.md,
    "Replaying timed calls").  The runner holds no input set.  ``block`` (a transport.InPlace the judge made,
    which the runner maps since ``timing_inputs``) is filled here with each call's values before the call, and
    its canaries are read back after every call (``on_overwrite(call, hits)`` when some changed); without a block
    the values go with each command through host memory.  The reference runs on this process's own tensors of
    the same values (the runner can write the block at any time).

    Outputs: the runner describes every timed output (``meta``: type, shape, dtype, strides, non-finite count,
    guards.describe_outputs) and reports aliasing with the inputs or parameters as findings.  Whether a call's
    output is checked: the calls checked_positions draws for the round (about one in ``check_every``, at least
    MIN_ROUND_CHECKS, from the operating system's randomness), and every call whose ``meta`` ``must_check``
    objects to (another shape or dtype than the reference's, non-finite values); ``on_pair(call, args, ref_out,
    remote, meta)`` samples or fetches the output the runner kept.  The runner cannot know which calls count.
    """

    def __init__(self, ref, remote, make_inputs, block=None, flush=True, check_every=0, on_pair=None,
                 ref_untimed=None, on_overwrite=None, must_check=None):
        self.ref, self.remote = ref, remote
        self.ref_untimed = ref_untimed or ref
        self.make_inputs = make_inputs
        self.block = block
        self.input_sets = 1  # one set for each call: none is reused (the result's timing.input_sets)
        self.fresh = True
        self.flusher = L2Flusher() if flush else None
        self.l2 = PersistingL2() if flush else None
        self.check_every, self.on_pair = check_every, on_pair
        self.on_overwrite, self.must_check = on_overwrite, must_check
        self.random = random.Random(int.from_bytes(os.urandom(8), "little"))
        self.calls = 0
        # Host milliseconds a round spends besides the timed work: drawing and loading inputs, checking outputs
        # (of which the sampled comparison's exchange with the runner), reading canaries back; ``calls_ms`` is the
        # wall time of the timed calls themselves as seen here (events, flushes, the runner's exchange), and
        # ``describe_ms`` the runner's share of it spent describing the outputs (guards.check_timed).
        self.overhead = {"inputs_ms": 0.0, "checks_ms": 0.0, "canaries_ms": 0.0, "sample_ms": 0.0,
                         "calls_ms": 0.0, "describe_ms": 0.0}
        self.meta = None  # the runner's description of the last timed output
        self.clock = time.perf_counter  # the warm-up's and the rounds' pace clock, checks' too (tests give it another)
        self.warm_facts = None  # how the last warm() ended
        # A GpuState read after every timed call of round() while set (child.py sets it after each warm-up):
        # round_reasons ORs what it read, a failed read counting as HELD_BELOW (child.py: a limit the warm-up had
        # not met means the round was timed before the candidate's own steady state, and does not count).
        self.watch = None
        self.watch_base = 0  # the HELD_BELOW reasons the warm-up ended with (child.py: only new ones break a round)
        self.round_reasons = 0
        # The cost of a call (a pair with the reference) that sizes the next round (round_size): the fastest seen in
        # a warm-up or a round on the judge's clock, a round's checks left out (warm-ups have none).  Not the last
        # warm-up's alone: the candidate sets that pace, and one that pads its warm-up calls (light work; their
        # outputs are never checked) got every round of MIN_LONG_ROUND_CALLS, six heavy calls in three short rounds
        # (red team 28).  A round that outruns the pace sizes the next from its own; an honest round, whose calls
        # cost what its warm-up's did, changes nothing.
        self.pace_ms = 0.0
        self._block_args = None  # clock_block_prepare's arguments, for clock_block

    def _next(self):
        """(the reference's arguments for the next call, the values to send with the call or None): a new set
        from a seed nobody else knows, loaded into the runner's block when there is one."""
        t0 = time.perf_counter()
        args = self.make_inputs(self.random.getrandbits(62))
        send = args
        if self.block is not None and self.block.load(args):
            send = None
        self.overhead["inputs_ms"] += (time.perf_counter() - t0) * 1e3
        return args, send

    def _after(self, call):
        """After the runner answered: its block's canaries read back (every call, timed or not)."""
        if self.block is None:
            return
        t0 = time.perf_counter()
        hits = self.block.overwritten()
        self.overhead["canaries_ms"] += (time.perf_counter() - t0) * 1e3
        if hits and self.on_overwrite is not None:
            self.on_overwrite(call, hits)

    def _remote_timed(self, send, call):
        t0 = time.perf_counter()
        t, d, self.meta = self.remote.timed(send)
        self.overhead["calls_ms"] += (time.perf_counter() - t0) * 1e3
        self.overhead["describe_ms"] += float(getattr(self.remote, "describe_ms", 0.0) or 0.0)
        self._after(call)
        return t, d

    def _ref_timed(self, args):
        t0 = time.perf_counter()
        try:
            return event_timed(self.ref, args, self.flusher, self.l2)
        finally:
            self.overhead["calls_ms"] += (time.perf_counter() - t0) * 1e3

    def _warm_loop(self, step, calls, warm_ms, at_least, state):
        """The one warm-up rule, for paired calls (warm) and the reference's alone (reference_alone): ``step()``
        run ``calls`` times (no ``warm_ms``), or for ``warm_ms`` of wall time and at least ``at_least`` times,
        or shorter where ``state`` (GpuState) has said "settled" at every check for SETTLE_FOR_MS, checking
        from SETTLE_FROM_MS on.  Returns (calls run, milliseconds they took, how it ended: "calls", "time" or
        "settled")."""
        t0 = self.clock()
        ran = 0
        ended = "calls"
        settled_since = None
        while True:
            if warm_ms <= 0 and ran >= calls:
                break
            # The GPU is read from the first call's end on where that call alone reached SETTLE_FROM_MS (a 92 ms
            # call: read at 92 and 184 ms, two calls where at_least made it three); a settled end still needs
            # two readings SETTLE_FOR_MS apart, so never fewer than two calls.  Ending by time keeps at_least.
            if warm_ms > 0 and (ran >= at_least or (state is not None and ran >= 1)):
                el = (self.clock() - t0) * 1e3
                if el >= warm_ms and ran >= at_least:
                    ended = "time"
                    break
                if state is not None and el >= SETTLE_FROM_MS:
                    if not state.settled():
                        settled_since = None
                    elif settled_since is None:
                        settled_since = el
                    elif el - settled_since >= SETTLE_FOR_MS:
                        ended = "settled"
                        break
            step()
            ran += 1
        return ran, (self.clock() - t0) * 1e3, ended

    def warm(self, calls, warm_ms=0.0, at_least=2, state=None):
        """Untimed calls (pairs with a reference), by _warm_loop's rule.  ``self.warm_facts`` says how it ended:
        "calls", "time" or "settled", and the GPU's state at the end where ``state`` was given.  Returns (calls
        run, milliseconds they took)."""

        def pair():
            args, send = self._next()
            call = self.calls
            self.calls += 1
            if self.ref is not None:
                self._ref_timed(args)
            self._remote_timed(send, call)
            del args, send  # before the next call's are made: two sets of multi-GB inputs do not fit the reservation

        with torch.no_grad():
            ran, ms, ended = self._warm_loop(pair, calls, warm_ms, at_least, state)
        if ran:
            self._paced(ms / ran)
        self.warm_facts = {"calls": ran, "ms": ms, "ended": ended}
        if state is not None:
            self.warm_facts["gpu"] = state.facts()
        return ran, ms

    def reference_alone(self, rounds, warm_ms, round_ms, iters, state=None, max_broken=0):
        """The reference timed alone: no call of the candidate's between its calls (a candidate's load after its
        own calls slows the reference calls that follow: power, clocks; docs/threat-model.md).  A warm-up by
        _warm_loop's rule (``warm_ms``, at least 2 calls, shorter where ``state`` says the GPU settled), then
        ``rounds`` rounds of as many calls as fit ``round_ms`` (round_calls: at most ``iters``, at least
        MIN_ROUND_CALLS, or MIN_LONG_ROUND_CALLS where two fill it),
        each on a new input set of its own, after the same L2 flush and persisting-L2 reset as a paired call.

        A warm-up that ended early is watched as the candidate's is (child.py, one_round): with ``state``, the
        GPU's clock-limit reasons are read after every timed call, and a round in which a reason in HELD_BELOW
        appeared that the warm-up had not ended with (a heavy reference meeting its power limit after a short
        warm-up) does not count: the next round warms up for the whole ``warm_ms`` first, up to ``max_broken``
        such rounds (then no more reading).  With ``max_broken`` 0 nothing is watched, and so no warm-up ends
        early.  ``self.alone_facts`` says how it went: every warm-up's facts, and
        the rounds lost.

        Returns (stream ms, device-wide ms) of every counted call, the same calls in the same order.  A reference
        leaves no work on other streams: its device-wide times are its stream times plus the synchronize's
        latency, which kgym needs where a candidate is timed on the device-wide clock against these samples (the
        cache keeps both).  The runner is not called: its block is not loaded, and it learns nothing of these
        inputs."""
        stream, device = [], []
        facts = self.alone_facts = {"warm": [], "lost": 0}

        def step():
            self._ref_timed(self.make_inputs(self.random.getrandbits(62)))

        def warm_up(settle):
            """Returns (calls, ms, the HELD_BELOW reasons the warm-up ended with, or -1: rounds not watched)."""
            ran, ms, ended = self._warm_loop(step, 0, warm_ms, 2, state if settle and max_broken > 0 else None)
            facts["warm"].append({"calls": ran, "ms": ms, "ended": ended})
            if state is None:
                return ran, ms, -1
            facts["warm"][-1]["gpu"] = state.facts()
            base = state.reasons() if facts["lost"] < max_broken else -1
            return ran, ms, base & HELD_BELOW if base >= 0 else -1

        with torch.no_grad():
            ran, ms, base = warm_up(True)
            n = round_calls(iters, round_ms, max(ms / max(ran, 1), 1e-6))
            done = 0
            while done < rounds:
                seen = 0
                times, device_times = [], []
                for _ in range(n):
                    args = self.make_inputs(self.random.getrandbits(62))
                    t, d, out = self._ref_timed(args)
                    times.append(t)
                    device_times.append(d)
                    del out, args
                    if base >= 0:
                        seen |= watched_reasons(state)
                if base >= 0 and new_limit(seen, base):
                    facts["lost"] += 1
                    _ran, _ms, base = warm_up(False)
                    continue
                stream.extend(times)
                device.extend(device_times)
                done += 1
        return stream, device

    def _paced(self, per_call_ms):
        if per_call_ms > 0 and (self.pace_ms <= 0 or per_call_ms < self.pace_ms):
            self.pace_ms = per_call_ms

    def round_size(self, iters, round_ms):
        """How many calls the next round holds: round_calls at ``pace_ms`` (the fastest pace seen so far)."""
        return round_calls(iters, round_ms, self.pace_ms)

    def round(self, iters):
        ref_ms, cand_ms, ref_dev, cand_dev = [], [], [], []
        drawn = checked_positions(self.random, iters, self.check_every) if self.on_pair else frozenset()
        self.round_reasons = 0
        t_round, checks = self.clock(), 0.0
        with torch.no_grad():
            for i in range(iters):
                args, send = self._next()
                call = self.calls
                self.calls += 1
                ref_out = None
                if self.ref is not None and call % 2 == 0:
                    t, d, ref_out = self._ref_timed(args)
                    ref_ms.append(t)
                    ref_dev.append(d)
                t, d = self._remote_timed(send, call)
                cand_ms.append(t)
                cand_dev.append(d)
                if self.watch is not None:
                    self.round_reasons |= watched_reasons(self.watch)
                if self.ref is not None and call % 2 == 1:
                    t, d, ref_out = self._ref_timed(args)
                    ref_ms.append(t)
                    ref_dev.append(d)
                check = self.on_pair and (
                    i in drawn or (self.must_check is not None and self.must_check(self.meta)))
                if check:
                    t0 = self.clock()
                    if ref_out is None:
                        ref_out = self.ref_untimed(*args)
                    self.on_pair(call, args, ref_out, self.remote, self.meta)
                    spent = self.clock() - t0
                    self.overhead["checks_ms"] += spent * 1e3
                    checks += spent
                del ref_out, args, send
        if iters:
            self._paced((self.clock() - t_round - checks) * 1e3 / iters)
        return ref_ms, cand_ms, ref_dev, cand_dev

    def clock_block_prepare(self, profile=False):
        """The next input set made ready on both sides for clock_block: called before kgym's clock starts, so
        the block's window holds the candidate's calls and not copies of gigabytes of inputs (a copy inside
        it made an honest kernel on 8.6 GB inputs look like a tampered timer, measured on an H100).  With
        ``profile`` the runner profiles the block's calls (clock_block_finish returns the profile)."""
        args, send = self._next()
        self.calls += 1
        self.remote.clock_prepare(send, profile=profile)
        torch.cuda.synchronize()
        self._block_args = args

    def clock_block(self, calls):
        """``calls`` candidate calls back to back in the runner on the input set clock_block_prepare made ready
        (timing.clock_block there); returns their times.  Nothing else happens inside kgym's clock around it:
        clock_block_finish reads the canaries back and asks for the output's description."""
        return self.remote.clock_block(calls)

    def clock_block_finish(self):
        """After the block (and kgym's clock): the canaries read back, and (the block's arguments, the runner's
        description of its last output, the runner's profile of the block's calls or None), so the caller can
        check the output the runner kept."""
        args, self._block_args = self._block_args, None
        self._after("clock_block")
        self.meta, prof = self.remote.clock_describe()
        return args, self.meta, prof
