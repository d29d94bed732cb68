"""How much CPU a process spends waiting for the GPU, by how its CUDA context waits (GPU only).

    python3 bench/sync_probe.py [--rounds N] [--size N]

In a new process each: the driver's default (a process with one context spins), kgym's judge and runner contexts
(cudashare.blocking_sync: a waiting thread sleeps), and the same context inside cudashare.spinning() (an exclusive
window's waits).  Each queues N rounds of ten SIZE x SIZE float32 matmuls and synchronises after each round; printed:
the context's flags, wall and CPU seconds.  Measured on an H200 (2026-11-26, with this script's first form, the same
loop): 20 rounds, default 4.41 s wall and 4.38 s CPU, blocking 4.38 s and 0.09 s; 10 rounds, blocking 2.29 s and
0.10 s, inside spinning() 2.15 s and 2.15 s (docs/PERFORMANCE.md, "What two GPUs share").
"""

import argparse
import ctypes
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "harness"))


def measure(mode, rounds, size):
    import torch

    from kgym_harness.shared import cudashare

    if mode != "default":
        why = cudashare.blocking_sync("cuda:0")
        if why:
            print(f"sync_probe: blocking_sync: {why}", file=sys.stderr)
    x = torch.randn(size, size, device="cuda")
    torch.cuda.synchronize()
    lib = ctypes.CDLL("libcuda.so.1")

    def run(tag):
        flags = ctypes.c_uint()
        lib.cuCtxGetFlags(ctypes.byref(flags))
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for _ in range(rounds):
            for _ in range(10):
                x @ x
            torch.cuda.synchronize()
        wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        print(f"{tag:<36} flags {flags.value:#04x}  wall {wall:6.3f} s  CPU {cpu:6.3f} s")

    if mode == "spinning":
        with cudashare.spinning():
            run("blocking context, inside spinning()")
    else:
        run("driver's default" if mode == "default" else "blocking_sync (judge and runner)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20, help="synchronised rounds (20)")
    ap.add_argument("--size", type=int, default=8192, help="matrix side (8192)")
    ap.add_argument("--mode", choices=("default", "blocking", "spinning"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.mode:
        measure(a.mode, a.rounds, a.size)
        return 0
    rc = 0
    for mode in ("default", "blocking", "spinning"):  # a process each: the flags count before the context exists
        rc |= subprocess.call([sys.executable, __file__, "--mode", mode, "--rounds", str(a.rounds),
                               "--size", str(a.size)])
    return rc


if __name__ == "__main__":
    sys.exit(main())
