#!/usr/bin/env python3
"""How much CPU work the machine really does at once: N processes each run the same fixed task (a pure-Python loop,
or a compression of a buffer in C), for N = each of --procs; printed per N: the wall time, tasks per second in all
and per process, and the speed-up over one process.  A machine with C real cores scales ~linearly to N = C and then
flattens; a virtual machine whose vCPUs share physical cores (or a turbo budget) flattens earlier than its vCPU
count says.  kgym's evaluations are host-heavy (Triton's compiles, the judge's and runner's Python): where this
flattens is the most evaluations the host can carry, whatever the GPU does.

    python3 bench/cpu_probe.py [--procs 1,2,4,8,12,16] [--task python|zlib] [--rounds N]
"""
import argparse
import multiprocessing as mp
import os
import time
import zlib


def _python(rounds):
    x = 0
    for i in range(rounds * 1_000_000):
        x = (x + i * 7) % 1_000_003
    return x


def _zlib(rounds):
    buf = os.urandom(1 << 20) + bytes(1 << 20)
    for _ in range(rounds * 4):
        zlib.compress(buf, 6)
    return 0


def _one(args):
    task, rounds, start = args
    while time.monotonic() < start:  # every process starts its task at the same moment
        pass
    t0 = time.monotonic()
    (_python if task == "python" else _zlib)(rounds)
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", default=f"1,2,4,8,{os.cpu_count()}",
                    help="comma-separated process counts (default 1,2,4,8,<cpu_count>)")
    ap.add_argument("--task", choices=("python", "zlib"), default="python")
    ap.add_argument("--rounds", type=int, default=8, help="size of one task (default 8: ~0.5-1 s on one core)")
    args = ap.parse_args()
    try:
        counts = [int(p) for p in args.procs.split(",")]
    except ValueError:
        ap.error(f"--procs is a comma-separated list of numbers, not {args.procs!r}")
    if any(n < 1 for n in counts):
        ap.error("--procs: every count must be at least 1")
    print(f"cpu_probe: task {args.task} x{args.rounds}, os.cpu_count() {os.cpu_count()}, "
          f"affinity {len(os.sched_getaffinity(0))} cpus")
    base = None
    for n in counts:
        with mp.get_context("fork").Pool(n) as pool:
            start = time.monotonic() + 0.2
            times = pool.map(_one, [(args.task, args.rounds, start)] * n)
        wall = max(times)
        rate = n / wall
        base = base or rate / n
        print(f"  {n:3d} processes: wall {wall:6.2f} s, one task median {sorted(times)[n // 2]:6.2f} s, "
              f"{rate:6.2f} tasks/s ({rate / n:5.2f} per process), x{rate / base:5.2f} of one process")


if __name__ == "__main__":
    main()
