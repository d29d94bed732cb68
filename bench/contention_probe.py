"""What slows a GPU shared by many processes: kernels from other contexts, or device-memory mapping calls?

    python3 bench/contention_probe.py [--procs 6] [--seconds 3] [--mb 64]

kgym runs two processes with a CUDA context each per evaluation (the judge, the runner), and hands every command's
tensors over in device blocks made with the driver's virtual memory calls (cuMemCreate/Map/SetAccess, then
Unmap/Release: shared/cudashare.py).  Here one "victim" process measures the latency of a small step (an
elementwise op on MB megabytes, then a synchronize: what a correctness call does around its kernels) for SECONDS,
alone and beside PROCS other processes that each loop over one kind of work:
  kernels   the same small step (other contexts' kernels: the GPU time-slices between contexts)
  vmm       a block made, touched and released (cudashare.Block.create, a fill, close)
  malloc    torch.empty of MB megabytes then torch.cuda.empty_cache (cudaMalloc / cudaFree)
  idle      nothing but a CUDA context each
  contexts  a new process each time that makes a CUDA context (the driver's own, through ctypes), maps a little
            memory and exits: what a fresh runner (one per evaluation) or judge costs the others at start and exit
            (--context-child start: a runner's own start, kgym's start_context after `import torch` and no kernel,
            then --hold seconds idle and its exit; with --victim events the victim's steps are sorted by what
            overlapped them: a context being made, one being torn down, neither)
and, with one other process only, taking turns as the judge and the runner do (each step waits for the other's):
  pingpong  victim step, then the other's step, then the victim's...: the victim's figure is a whole turn
  pipe      the same turns with no GPU work on the other side (the handoff alone)
Printed per mode: the victim's median and p90 latency (us) and its steps per second, and the others' rate.
--victim events times the victim's steps on the GPU's clock (CUDA events around each step's kernels, as kgym's
timing rounds do) instead of the host's: whether the others disturb the kernels themselves, not the launches.
"""

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time

HARNESS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "harness")


_BURST = 1  # kernels a step launches before its synchronize (--burst)
# --gap-us: a busy-wait of this many microseconds after each kernel a step launches (a judge's Python between its
# operators), passed to the spawned processes in their environment.
_GAP_US = float(os.environ.get("KGYM_PROBE_GAP_US", "0") or 0)


_VICTIM = "kernels"  # --victim: what the victim's step is


def _vmm_step(mb):
    """A block made, exported, touched and released, as the judge does for every command's tensors."""
    from kgym_harness.shared import cudashare

    b = cudashare.Block.create(mb << 20)
    os.close(b.export())
    b.bytes()[:1].fill_(0)
    b.close()


# A CUDA context made and torn down, as a process starting and ending does (the driver API through ctypes: no torch
# import, so the loop is dominated by the driver's own work, not Python's).
_CONTEXT_CHILD = """
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
ctx, ptr = ctypes.c_void_p(), ctypes.c_uint64()
ok = (cu.cuInit(0) == 0 and cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0 and
      cu.cuCtxSetCurrent(ctx) == 0 and cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20)) == 0 and
      cu.cuCtxSynchronize() == 0)
sys.exit(0 if ok else 1)
"""


# The same through torch, as a runner or judge starts: its context (the primary one), its allocator's first
# segment and its first kernel (--context-child torch).
_TORCH_CHILD = "import torch; torch.ones(1 << 18, device='cuda').add_(1); torch.cuda.synchronize()"
# A runner's own start (runner.py's setup ends with cudashare.start_context, before any candidate byte): torch
# imported first (host work only), then the context on the monotonic clock, idle for _HOLD seconds, then the exit;
# it prints "t0 t1 t2" (context asked for, made, exit begun) for the others' spans (--context-child start).
_START_CHILD = """
import sys, time
sys.path.insert(0, %r)
import torch
from kgym_harness.shared import cudashare
t0 = time.monotonic()
cudashare.start_context("cuda:0")
t1 = time.monotonic()
time.sleep(float(sys.argv[1]))
print(t0, t1, time.monotonic(), flush=True)
""" % HARNESS
_CHILD = _CONTEXT_CHILD
_HOLD = 0.3  # --hold


def _context_cycle(spans=None):
    """One child started and waited for; with ``spans`` its (made from, made to, exit from, exit to) monotonic
    times are added to it (the start child only)."""
    import subprocess

    if spans is None or _CHILD is not _START_CHILD:
        subprocess.run([sys.executable, "-c", _CHILD], check=True)
        return
    out = subprocess.run([sys.executable, "-c", _CHILD, str(_HOLD)], check=True, capture_output=True, text=True)
    t0, t1, t2 = (float(v) for v in out.stdout.split()[-3:])
    spans.append((t0, t1, t2, time.monotonic()))


def _step(x):
    import torch

    if _VICTIM == "events":
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(_BURST):
            x.mul_(1.0000001)
        b.record()
        b.synchronize()
        return a.elapsed_time(b) * 1e3
    if _VICTIM == "vmm":
        return _vmm_step(max(1, x.numel() >> 18))
    for _ in range(_BURST):
        x.mul_(1.0000001)
        if _GAP_US > 0:
            until = time.perf_counter() + _GAP_US / 1e6
            while time.perf_counter() < until:
                pass
    torch.cuda.synchronize()


def _context(blocking):
    """The process's CUDA context, made with kgym's blocking waits where ``blocking`` (cudashare.blocking_sync)."""
    import torch

    if blocking:
        sys.path.insert(0, HARNESS)
        from kgym_harness.shared import cudashare

        why = cudashare.blocking_sync("cuda:0")
        if why:
            print(f"contention_probe: blocking_sync: {why}", file=sys.stderr)
    torch.cuda.init()


def _measure(seconds, mb, start, turn=None, when=None):
    """The victim's latencies (us) of a step (and, with ``turn``, the other side's turn after it); --victim events:
    each step's time on the GPU's clock.  ``when`` (a list) gets each step's (start, end) monotonic times."""
    import torch

    _context(_BLOCKING)

    x = torch.ones(mb << 18, device="cuda")  # mb MB of float32
    for _ in range(20):
        _step(x)
    start.wait()
    lat, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0, m0 = time.perf_counter(), time.monotonic()
        gpu_us = _step(x)
        if turn is not None:
            turn()
        lat.append(gpu_us if _VICTIM == "events" else (time.perf_counter() - t0) * 1e6)
        if when is not None:
            when.append((m0, time.monotonic()))
    return lat


_BLOCKING = False  # --blocking


def _configure(burst, blocking, victim_kind="kernels", gpu=None, child=None, hold=None):
    """A spawned process starts with this module's defaults: the options are set again in each (and the GPU it
    sees, before CUDA starts in it)."""
    global _BURST, _BLOCKING, _VICTIM, _CHILD, _HOLD
    _BURST, _BLOCKING, _VICTIM = burst, blocking, victim_kind
    if child is not None:
        _CHILD = _START_CHILD if child == "start" else child
    if hold is not None:
        _HOLD = hold
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    sys.path.insert(0, HARNESS)


def victim(q, seconds, mb, start, burst=1, blocking=False, victim_kind="kernels"):
    _configure(burst, blocking, victim_kind)
    when = []
    lat = _measure(seconds, mb, start, when=when)
    q.put(("victim", lat))
    q.put(("when", when))


def other(q, kind, seconds, mb, start, burst=1, blocking=False, gpu=None, child=None, hold=None):
    import torch

    _configure(burst, blocking, gpu=gpu, child=child, hold=hold)
    sys.path.insert(0, HARNESS)
    from kgym_harness.shared import cudashare

    _context(blocking)
    x = torch.ones(mb << 18, device="cuda")
    start.wait()
    n, end, spans = 0, time.perf_counter() + seconds + 0.5, []
    while time.perf_counter() < end:
        if kind == "kernels":
            _step(x)
        elif kind == "vmm":
            b = cudashare.Block.create(mb << 20)
            b.bytes().fill_(0)
            b.close()
        elif kind == "contexts":
            _context_cycle(spans)
        elif kind == "malloc":
            y = torch.empty(mb << 18, device="cuda")
            y.fill_(0)
            del y
            torch.cuda.empty_cache()
        else:
            time.sleep(0.01)
            continue
        n += 1
    q.put(("other", n / (seconds + 0.5)))
    q.put(("spans", spans))


def victim_turns(conn, q, seconds, mb, start):
    def turn():
        conn.send(1)
        conn.recv()

    lat = _measure(seconds, mb, start, turn)
    conn.send(0)
    q.put(("victim", lat))


def other_turns(conn, q, gpu, mb):
    import torch

    x = torch.ones(mb << 18, device="cuda")
    n = 0
    while conn.recv():
        if gpu:
            _step(x)
        conn.send(1)
        n += 1
    q.put(("other", n))


def run_turns(kind, seconds, mb):
    ctx = mp.get_context("spawn")
    q, start = ctx.Queue(), ctx.Event()
    a, b = ctx.Pipe()
    ps = [ctx.Process(target=victim_turns, args=(a, q, seconds, mb, start)),
          ctx.Process(target=other_turns, args=(b, q, kind == "pingpong", mb))]
    for p in ps:
        p.start()
    time.sleep(8)
    start.set()
    got = [q.get(timeout=120) for _ in ps]
    for p in ps:
        p.join()
    lat = sorted(next(v for k, v in got if k == "victim"))
    print(f"{kind:8s} victim turn median {lat[len(lat) // 2]:8.0f} us  p90 {lat[int(0.9 * (len(lat) - 1))]:8.0f} us  "
          f"{len(lat) / seconds:7.0f} turns/s", flush=True)


def _figures(lat):
    """median, p90, max and mean (us) of a list of latencies, as printed."""
    lat = sorted(lat)
    return (f"median {lat[len(lat) // 2]:8.1f} us  p90 {lat[int(0.9 * (len(lat) - 1))]:8.1f} us  "
            f"max {lat[-1]:8.1f} us  mean {statistics.fmean(lat):8.1f} us  n {len(lat):5d}")


def _by_overlap(lat, when, spans):
    """The victim's steps split by what overlapped them: a context being made (t0..t1 of a start child), one being
    torn down (t2..end), neither."""
    groups = {"made": [], "torn down": [], "neither": []}
    for v, (a, b) in zip(lat, when):
        made = any(a < t1 and b > t0 for t0, t1, _, _ in spans)
        torn = any(a < t3 and b > t2 for _, _, t2, t3 in spans)
        groups["made" if made else "torn down" if torn else "neither"].append(v)
    return groups


def run(kind, procs, seconds, mb, burst=1, blocking=False, victim_kind="kernels", other_gpu=None, child=None,
        hold=None):
    if kind in ("pingpong", "pipe"):
        return run_turns(kind, seconds, mb)
    ctx = mp.get_context("spawn")
    q, start = ctx.Queue(), ctx.Event()
    ps = [ctx.Process(target=victim, args=(q, seconds, mb, start, burst, blocking, victim_kind))]
    ps += [ctx.Process(target=other, args=(q, kind, seconds, mb, start, burst, blocking, other_gpu, child, hold))
           for _ in range(procs if kind != "alone" else 0)]
    for p in ps:
        p.start()
    time.sleep(8)  # contexts made
    start.set()
    got = [q.get(timeout=120) for _ in range(2 * len(ps))]
    for p in ps:
        p.join()
    lat = next(v for k, v in got if k == "victim")
    when = next(v for k, v in got if k == "when")
    rates = [v for k, v in got if k == "other"]
    spans = [s for k, v in got if k == "spans" for s in v]
    clock = "GPU" if victim_kind == "events" else "host"
    print(f"{kind:8s} victim ({clock}) {_figures(lat)}  {len(lat) / seconds:7.0f} steps/s   "
          f"others {statistics.fmean(rates) if rates else 0:7.1f} ops/s each", flush=True)
    if spans:
        made = statistics.median(t1 - t0 for t0, t1, _, _ in spans) * 1e3
        torn = statistics.median(t3 - t2 for _, _, t2, t3 in spans) * 1e3
        print(f"         {len(spans)} starts: context made in {made:.0f} ms, exit {torn:.0f} ms (medians)", flush=True)
        for name, part in _by_overlap(lat, when, spans).items():
            if part:
                print(f"         steps overlapping {name:9s} {_figures(part)}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--modes", default="alone,idle,kernels,vmm,malloc,pingpong,pipe")
    ap.add_argument("--burst", type=int, default=1,
                    help="kernels a step launches before its synchronize, in the victim and in the others' "
                         "kernels mode (default 1): whether a context pays a turn per synchronize or per kernel")
    ap.add_argument("--gap-us", type=float, default=0.0,
                    help="a busy-wait of this many microseconds after each kernel of a step (default 0), in the "
                         "victim and the others' kernels mode: whether host work between a context's kernels costs "
                         "the shared GPU turns (H200, 8 processes of 20-kernel steps: 8.8 us a kernel at 0 and 20 us, "
                         "15.6 us at 60 us; docs/PERFORMANCE.md, thirty-seventh session)")
    ap.add_argument("--blocking", action="store_true",
                    help="contexts made with kgym's blocking waits (cudashare.blocking_sync), not the driver's spin")
    ap.add_argument("--victim", choices=("kernels", "vmm", "events"), default="kernels",
                    help="the victim's step: kernels (default) or vmm (a block made, exported, touched and released: "
                         "whether the driver's memory-mapping calls wait for each other across processes), or events "
                         "(the kernels step timed on the GPU's clock: what a timing round would measure)")
    ap.add_argument("--other-gpu", type=int, default=None,
                    help="run the others on this GPU (CUDA_VISIBLE_DEVICES) and the victim on the first: what two "
                         "GPUs of one machine share")
    ap.add_argument("--context-child", choices=("driver", "torch", "start"), default="driver",
                    help="what each process of the contexts mode does: driver (default: a context made through the "
                         "driver API and a 1 MB allocation), torch (import torch, a tensor and a kernel, as a "
                         "runner or judge starts) or start (a runner's set-up: kgym's start_context and no kernel, "
                         "--hold seconds idle, then exit; the victim's steps are sorted by what overlapped them)")
    ap.add_argument("--hold", type=float, default=0.3,
                    help="seconds a start child stays after its context is made (default 0.3)")
    a = ap.parse_args()
    if a.burst < 1:
        ap.error("--burst must be at least 1")
    if not 0 <= a.gap_us <= 1e6:
        ap.error("--gap-us must be from 0 to 1000000 microseconds")
    os.environ["KGYM_PROBE_GAP_US"] = repr(a.gap_us)  # the spawned processes read it (_GAP_US)
    if a.hold < 0:
        ap.error("--hold must be 0 or more seconds")
    if a.victim != "kernels" and {"pingpong", "pipe"} & set(a.modes.split(",")):
        ap.error("the pingpong and pipe modes time the kernels step on the host's clock: leave --victim out there")
    print(f"contention_probe: {a.procs} others{'' if a.other_gpu is None else f' on GPU {a.other_gpu}'}, victim "
          f"{a.victim}, {a.mb} MB steps of {a.burst} kernel(s){f' {a.gap_us:g} us apart' if a.gap_us else ''}, "
          f"{'blocking' if a.blocking else 'spinning'} waits",
          flush=True)
    for kind in a.modes.split(","):
        run(kind, a.procs, a.seconds, a.mb, a.burst, a.blocking, a.victim, a.other_gpu,
            {"torch": _TORCH_CHILD, "start": "start"}.get(a.context_child, _CONTEXT_CHILD), a.hold)


if __name__ == "__main__":
    main()
