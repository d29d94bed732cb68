#!/usr/bin/env python3
"""What the runner's launch-argument check (guards._jit_arguments on JITFunction.run, guards._interpreter_arguments
on the interpreter's GridExecutor.__call__) costs per Triton launch: the check alone, best and median of N rounds,
for a small kernel (2 tensors, 2 numbers, 1 tl.constexpr) and a matmul-like one (3 tensors, 9 numbers,
3 tl.constexpr), beside a whole launch.  On the CPU the whole launch is the interpreter's; with --device cuda it is
JITFunction.run with the check (the runner's wrapper) and without it (Triton's own run), timed back to back.

    python3 bench/launch_args_overhead.py [--device cpu|cuda] [--rounds 15] [--calls 2000]

Prints one JSON line per kernel and path ({"kernel", "path", "check_us", "launch_us"}: medians, microseconds per
launch).  Run it on an idle machine: a busy one adds more noise than the check costs.
"""

import argparse
import json
import os
import statistics
import sys
import time

if "--device" not in sys.argv or "cpu" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # the interpreter's launch, timed whole below
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "harness"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

from kgym_harness.runner import guards  # noqa: E402


def small(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * scale + 1.0, mask=m)


def matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak, mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn, mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def cases(device):
    x = torch.rand(4096, device=device)
    a, b = torch.rand(64, 32, device=device), torch.rand(32, 32, device=device)
    c = torch.empty(64, 32, device=device)
    yield ("small", small, (x, torch.empty_like(x), x.numel(), 3.0), {"BLOCK": 1024}, (4,))
    yield ("matmul", matmul, (a, b, c, 64, 32, 32, *a.stride(), *b.stride(), *c.stride()),
           {"BM": 32, "BN": 32, "BK": 32}, (2,))


def per_call_us(fn, calls, rounds):
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return min(samples), statistics.median(samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=2000)
    o = ap.parse_args()
    guards.install_launch_hooks()
    for name, py, args, kwargs, grid in cases(o.device):
        jf = JITFunction(py)
        best, med = per_call_us(lambda: guards._jit_arguments(jf, args, kwargs), o.calls, o.rounds)
        row = {"kernel": name, "path": "JITFunction.run", "check_us": round(med, 3), "check_best_us": round(best, 3)}
        if o.device.startswith("cuda"):
            hooked = jf.run
            original = triton.runtime.jit.JITFunction.run.__kgym_original__
            hooked(*args, grid=grid, warmup=False, **kwargs)  # compile once
            torch.cuda.synchronize()
            for label, run in (("launch_us", lambda: hooked(*args, grid=grid, warmup=False, **kwargs)),
                               ("launch_unchecked_us", lambda: original(jf, *args, grid=grid, warmup=False, **kwargs))):
                _, row[label] = per_call_us(run, o.calls, o.rounds)
                torch.cuda.synchronize()
                row[label] = round(row[label], 3)
        print(json.dumps(row), flush=True)
        if o.device.startswith("cuda"):
            continue
        # The interpreter's launch: its GridExecutor, as InterpretedFunction.run makes it.
        from triton.runtime.interpreter import GridExecutor, InterpretedFunction

        interp = InterpretedFunction(py)
        ex = GridExecutor(interp.rewrite(), interp.arg_names, grid)
        best, med = per_call_us(lambda: guards._interpreter_arguments(ex, args, kwargs), o.calls // 10, o.rounds)
        cpu_args = tuple(t.cpu() if torch.is_tensor(t) else t for t in args)
        _, launch = per_call_us(lambda: interp[grid](*cpu_args, **kwargs), 3, 3)
        print(json.dumps({"kernel": name, "path": "interpreter", "check_us": round(med, 3),
                          "check_best_us": round(best, 3), "launch_us": round(launch, 1)}), flush=True)


if __name__ == "__main__":
    main()
