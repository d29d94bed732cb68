"""How busy the GPU and the CPUs are while a command runs: is a benchmark held back by the GPU or by latency?

    python3 bench/busy_probe.py [--every MS] [--json FILE] -- COMMAND [ARGS...]

Runs COMMAND (its output passes through) and samples, every MS milliseconds (200): NVML's GPU utilization (the share
of the last sample period in which some kernel ran: nvmlDeviceGetUtilizationRates; a GPU whose kernels fill only a
few SMs still reads 100%, so a low figure is conclusive and a high one is not), its SM clock, and the host's CPU
busy share from /proc/stat (all cores).  Printed at the end, to stderr: mean, median and p90 of each over the run,
and the exit status of COMMAND, which is also this script's.  GPU index: $KGYM_PROBE_GPU (0).
"""

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_clock_probe import Nvml  # noqa: E402


class _Util(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


def cpu_times():
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    vals = [int(x) for x in parts]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return sum(vals), idle


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every", type=float, default=200.0, help="sampling period in milliseconds (200)")
    ap.add_argument("--json", help="write every sample to this file")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no command given (busy_probe.py -- COMMAND ...)")
    nvml = Nvml(int(os.environ.get("KGYM_PROBE_GPU", "0")))
    samples, stop = [], threading.Event()

    def sample():
        last = cpu_times()
        while not stop.wait(args.every / 1000):
            u = _Util()
            ok = nvml.lib.nvmlDeviceGetUtilizationRates(nvml.dev, ctypes.byref(u)) == 0
            now = cpu_times()
            dt, di = now[0] - last[0], now[1] - last[1]
            last = now
            samples.append({"t": time.monotonic(), "gpu": u.gpu if ok else None, "sm_mhz": nvml.clock(),
                            "cpu": 100.0 * (dt - di) / dt if dt > 0 else None})

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    rc = subprocess.call(cmd)
    stop.set()
    th.join()

    def line(key, unit):
        xs = sorted(s[key] for s in samples if s[key] is not None)
        if not xs:
            return f"{key}: no samples"
        return (f"{key}: mean {statistics.fmean(xs):.1f}{unit}, median {xs[len(xs) // 2]:.1f}{unit}, "
                f"p90 {xs[int(0.9 * (len(xs) - 1))]:.1f}{unit}")

    print(f"busy_probe: {len(samples)} samples every {args.every:g} ms; " + "; ".join(
        [line("gpu", "%"), line("sm_mhz", " MHz"), line("cpu", "%")]) + f"; exit {rc}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(samples, f)
    return rc


if __name__ == "__main__":
    sys.exit(main())
