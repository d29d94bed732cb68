"""Does one machine's CUDA driver serialise its GPUs?  How fast it makes contexts and device blocks, one GPU vs two.

    python3 bench/driver_probe.py [--gpus 0,1] [--procs 6] [--seconds 6] [--kinds context,torch,vmm]
                                  [--env NAME=VALUE]...

Issue 38: on `nvidia-h200-x2` two GPUs give ×1.41-1.49 of one, and each evaluation's set-up (a runner's CUDA
context, and a judge's where none is kept) takes twice as long while the other GPU works (fleet.sh's means: 0.97 →
2.0 s), though neither GPU nor the host's cores are busy.  Here PROCS processes per GPU loop over one kind of work
for SECONDS, first on the first GPU of --gpus alone, then on every GPU listed at once, and the rate of each GPU is
printed for both: a GPU's rate that falls when another GPU works at the same thing is a resource the GPUs share
(the driver's locks).  Kinds:
  context  a new process that makes a CUDA context through the driver API (ctypes, no torch), maps 1 MB and exits
           (bench/contention_probe.py's child): a context's creation and teardown
  torch    a new process that imports torch and runs a kernel (a judge's or runner's start, torch included)
  vmm      in a long-lived process, a device block made, exported, touched and released (cudashare.Block, what
           the judge does for a command's tensors and the runner maps)
--env NAME=VALUE (repeatable) sets a variable in every worker (e.g. CUDA_DEVICE_MAX_CONNECTIONS=1: fewer
hardware channels a context makes), so a driver setting's effect shows in the same table.
Printed: one line per kind and run: per GPU the cycles per second and the median cycle (ms) (the context kind: with
the median of each of its steps, cuInit, the context's creation and its first allocation; the rest of a cycle is
the interpreter's start and the exit, which tears the context down), and for the run on
every GPU the ratio of its total rate to the one-GPU rate (2.0: the GPUs do not wait for each other; 1.0: one
lock for the machine).
"""

import argparse
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import contention_probe  # noqa: E402 — its children and the harness path, not copied

HARNESS = contention_probe.HARNESS


# contention_probe's context child with its steps timed: it prints the seconds cuInit, the primary context's
# retain (the context made) and the first 1 MB allocation took; the rest of a cycle is the interpreter's start and
# the exit (the context torn down with the process).
_TIMED_CONTEXT_CHILD = """
import ctypes, sys, time
cu = ctypes.CDLL("libcuda.so.1")
ctx, ptr = ctypes.c_void_p(), ctypes.c_uint64()
t = [time.perf_counter()]
ok = cu.cuInit(0) == 0
t.append(time.perf_counter())
ok = ok and cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0 and cu.cuCtxSetCurrent(ctx) == 0
t.append(time.perf_counter())
ok = ok and cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20)) == 0 and cu.cuCtxSynchronize() == 0
t.append(time.perf_counter())
print(*(b - a for a, b in zip(t, t[1:])), flush=True)
sys.exit(0 if ok else 1)
"""
STEPS = ("init", "context", "alloc")


def _cycle_child(kind):
    return _TIMED_CONTEXT_CHILD if kind == "context" else contention_probe._TORCH_CHILD


def worker(q, kind, gpu, env, seconds, start):
    os.environ.update(env)
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    sys.path.insert(0, HARNESS)
    if kind == "vmm":
        import torch

        torch.cuda.init()
        torch.ones(1, device="cuda")
        for _ in range(3):
            contention_probe._vmm_step(64)
    start.wait()
    lat, steps, end = [], [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        if kind == "vmm":
            contention_probe._vmm_step(64)
        else:
            out = subprocess.run([sys.executable, "-c", _cycle_child(kind)], check=True, env=os.environ,
                                 capture_output=True, text=True).stdout.split()
            if kind == "context" and len(out) == len(STEPS):
                steps.append([float(v) for v in out])
        lat.append(time.perf_counter() - t0)
    q.put((gpu, lat, steps))


def run(kind, gpus, procs, seconds, env):
    """{gpu: (cycles per second, median ms, {step: median ms})} with ``procs`` workers on each of ``gpus`` at
    once (steps: the context kind's, else empty)."""
    ctx = mp.get_context("spawn")
    q, start = ctx.Queue(), ctx.Event()
    ps = [ctx.Process(target=worker, args=(q, kind, g, env, seconds, start)) for g in gpus for _ in range(procs)]
    for p in ps:
        p.start()
    time.sleep(6 if kind != "vmm" else 10)  # the vmm workers' torch and contexts up first
    start.set()
    got = [q.get(timeout=seconds + 300) for _ in ps]
    for p in ps:
        p.join()
    out = {}
    for g in gpus:
        lat = [x for gg, ls, _s in got if gg == g for x in ls]
        steps = [row for gg, _l, ss in got if gg == g for row in ss]
        med = {name: statistics.median(r[i] for r in steps) * 1e3 for i, name in enumerate(STEPS)} if steps else {}
        out[g] = (len(lat) / seconds, statistics.median(lat) * 1e3 if lat else float("nan"), med)
    return out


def _steps(med):
    return "" if not med else "  (" + ", ".join(f"{k} {v:.1f}" for k, v in med.items()) + " ms)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", default="0,1")
    ap.add_argument("--procs", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--kinds", default="context,torch,vmm")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    a = ap.parse_args()
    gpus = [g for g in a.gpus.split(",") if g]
    kinds = [k for k in a.kinds.split(",") if k]
    if not gpus or any(not g.isdigit() for g in gpus):
        ap.error("--gpus: a comma-separated list of GPU numbers, e.g. 0,1")
    if a.procs < 1 or a.seconds <= 0:
        ap.error("--procs must be at least 1 and --seconds above 0")
    bad = [k for k in kinds if k not in ("context", "torch", "vmm")]
    if bad or not kinds:
        ap.error(f"--kinds: context, torch or vmm (not {', '.join(bad) or 'nothing'})")
    env = {}
    for item in a.env:
        name, eq, value = item.partition("=")
        if not eq or not name:
            ap.error(f"--env wants NAME=VALUE, not {item!r}")
        env[name] = value
    print(f"driver_probe: {a.procs} processes a GPU, {a.seconds:g} s a run, GPUs {','.join(gpus)}"
          f"{'' if not env else ', env ' + ' '.join(f'{k}={v}' for k, v in env.items())}", flush=True)
    for kind in kinds:
        one = run(kind, gpus[:1], a.procs, a.seconds, env)
        r1, m1, s1 = one[gpus[0]]
        print(f"{kind:8s} GPU {gpus[0]} alone:  {r1:7.1f}/s  median {m1:8.1f} ms{_steps(s1)}", flush=True)
        if len(gpus) > 1:
            both = run(kind, gpus, a.procs, a.seconds, env)
            parts = "  ".join(f"GPU {g} {r:7.1f}/s median {m:8.1f} ms{_steps(st)}" for g, (r, m, st) in both.items())
            total = sum(r for r, _m, _s in both.values())
            print(f"{kind:8s} GPUs {','.join(gpus)} at once: {parts}  total ×{total / r1:.2f} of one GPU",
                  flush=True)


if __name__ == "__main__":
    main()
