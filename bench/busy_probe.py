"""How busy the GPU and the CPUs are while a command runs: is a benchmark held back by the GPU or by latency?

    python3 bench/busy_probe.py [--every MS] [--json FILE] [--gpu-step [--vmm]] -- COMMAND [ARGS...]

Runs COMMAND (its output passes through) and samples, every MS milliseconds (200): NVML's GPU utilization (the share
of the last sample period in which some kernel ran: nvmlDeviceGetUtilizationRates; a GPU whose kernels fill only a
few SMs still reads 100%, so a low figure is conclusive and a high one is not), its SM clock, and the host's CPU
busy share from /proc/stat (all cores), and one core's speed: the milliseconds a fixed piece of pure-Python work
takes (core_ms; measured 10 times before COMMAND starts too, the idle figure).  Printed at the end, to stderr: mean,
median and p90 of each over the run, core_ms against idle, the share of the run in which some task waited for a core
(/proc/pressure/cpu "some", where the kernel has it), and the exit status of COMMAND, which is also this script's.
GPU index: $KGYM_PROBE_GPU (0).

Why core_ms: on a lent two-H200 machine (a KVM guest, 32 vCPUs) the same work took 11.4 ms idle, 15.4 ms while one
GPU's evaluations ran and 19.7 ms while both GPUs' did, with the cores 12-21% busy and no task waiting for a core:
the cores slow down as they fill (the host's turbo or SMT), and an evaluation's host work slows with them
(docs/PERFORMANCE.md, "What two GPUs share").
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


class _ProcUtil(ctypes.Structure):
    """nvmlProcessUtilizationSample_t"""
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong), ("smUtil", ctypes.c_uint),
                ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]


class PerProcess:
    """--per-process: NVML's per-process samples (nvmlDeviceGetProcessUtilization) integrated over each process's
    sample periods, by the process's kind: "kgym" (this probe's uid: kgym, its zygote, the judges) or "runner" (any
    other uid: the runners run as uids of their own).  The driver's per-process "SM busy" figures need not add up
    to the device's utilization; read them as a ratio between the kinds."""

    def __init__(self, nvml):
        self.nvml, self.last, self.kind, self.samples = nvml, 0, {}, {}

    def _kind(self, pid):
        if pid not in self.kind:
            k = "?"
            try:
                with open(f"/proc/{pid}/status") as f:
                    for text in f:
                        if text.startswith("Uid:"):
                            k = "kgym" if int(text.split()[1]) == os.getuid() else "runner"
            except (OSError, ValueError, IndexError):
                pass
            self.kind[pid] = k
        return self.kind[pid]

    def poll(self):
        lib, n = self.nvml.lib, ctypes.c_uint(0)
        lib.nvmlDeviceGetProcessUtilization(self.nvml.dev, None, ctypes.byref(n), ctypes.c_ulonglong(self.last))
        if not n.value:
            return
        arr = (_ProcUtil * n.value)()
        if lib.nvmlDeviceGetProcessUtilization(self.nvml.dev, arr, ctypes.byref(n), ctypes.c_ulonglong(self.last)):
            return
        for i in range(n.value):
            smp = arr[i]
            self.samples.setdefault(smp.pid, {})[smp.timeStamp] = smp.smUtil
            self.last = max(self.last, smp.timeStamp)
            self._kind(smp.pid)

    def summary(self):
        busy, procs = {}, {}
        for pid, by_t in self.samples.items():
            k = self.kind.get(pid, "?")
            procs[k] = procs.get(k, 0) + 1
            ts = sorted(by_t)
            for t0, t1 in zip(ts, ts[1:]):
                if 0 < t1 - t0 < 2_000_000:  # microseconds
                    busy[k] = busy.get(k, 0.0) + by_t[t1] / 100 * (t1 - t0) / 1e6
        return "per process: " + ", ".join(f"{k} {procs[k]} processes, SM busy {busy.get(k, 0.0):.1f} s"
                                           for k in sorted(procs)) if procs else "per process: no samples"


def cpu_times():
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    vals = [int(x) for x in parts]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return sum(vals), idle


def core_ms():
    """Milliseconds one core takes for a fixed piece of pure-Python work (~10 ms on an idle 2 GHz core)."""
    t = time.perf_counter()
    acc = 0
    for i in range(200000):
        acc += i * i % 7
    return (time.perf_counter() - t) * 1e3


def cpu_pressure_us():
    """Microseconds in which some task waited for a core, since boot (/proc/pressure/cpu), or None."""
    try:
        with open("/proc/pressure/cpu") as f:
            for line in f:
                if line.startswith("some "):
                    return int(line.split("total=")[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


# The --gpu-step child: every EVERY ms contention_probe's step (one small kernel and a synchronize: a context's turn
# on a GPU other contexts use, so how many are queued for it), and with VMM its block cycle (a 16 MB device block
# made, exported, touched and released: the driver's mapping calls, as the judge makes them for every command), in
# a context with kgym's blocking waits.  One line of JSON a sample on stdout.
_STEP_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[3])
import torch
import contention_probe as cp
cp._configure(1, True)
cp._context(True)  # kgym's judges and runners wait so
every, vmm = float(sys.argv[1]) / 1000, sys.argv[2] == "1"
x = torch.ones(1 << 18, device="cuda")
for _ in range(20):
    cp._step(x)
print(json.dumps({"ready": True}), flush=True)
while True:
    t = time.perf_counter()
    cp._step(x)
    row = {"t": time.monotonic(), "step_us": (time.perf_counter() - t) * 1e6}
    if vmm:
        t = time.perf_counter()
        cp._vmm_step(16)
        row["vmm_us"] = (time.perf_counter() - t) * 1e6
    print(json.dumps(row), flush=True)
    time.sleep(every)
"""


def start_gpu_step(every_ms, vmm):
    """The --gpu-step child (above) and a thread that gathers its samples; (process, samples)."""
    bench = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.Popen([sys.executable, "-c", _STEP_CHILD, str(every_ms), "1" if vmm else "0", bench],
                            stdout=subprocess.PIPE, text=True)
    first = proc.stdout.readline()
    if not first:
        proc.wait()
        raise SystemExit("busy_probe: the --gpu-step process did not start (no CUDA device?)")
    rows = []

    def gather():
        for text in proc.stdout:
            try:
                rows.append(json.loads(text))
            except ValueError:
                pass

    threading.Thread(target=gather, daemon=True).start()
    return proc, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every", type=float, default=200.0, help="sampling period in milliseconds (200)")
    ap.add_argument("--json", help="write every sample to this file")
    ap.add_argument("--gpu-step", action="store_true",
                    help="also time, every --every ms from a process of its own, one small kernel and a "
                         "synchronize on the GPU (step_us: how long a context waits for its turn while COMMAND runs; "
                         "~20 us on an idle H200, ~150 us more for each other context with work queued)")
    ap.add_argument("--vmm", action="store_true",
                    help="with --gpu-step, also a 16 MB device block made, exported, touched and released "
                         "(vmm_us: the driver's mapping calls; ~1.6 ms alone for 64 MB)")
    ap.add_argument("--per-process", action="store_true",
                    help="also NVML's per-process utilization, summed by kind: kgym's own processes (the judges) "
                         "and the runners (other uids)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no command given (busy_probe.py -- COMMAND ...)")
    nvml = Nvml(int(os.environ.get("KGYM_PROBE_GPU", "0")))
    per = PerProcess(nvml) if args.per_process else None
    samples, stop = [], threading.Event()
    idle = []
    for _ in range(10):
        idle.append(core_ms())
        time.sleep(0.05)

    def sample():
        last = cpu_times()
        while not stop.wait(args.every / 1000):
            u = _Util()
            ok = nvml.lib.nvmlDeviceGetUtilizationRates(nvml.dev, ctypes.byref(u)) == 0
            now = cpu_times()
            dt, di = now[0] - last[0], now[1] - last[1]
            last = now
            samples.append({"t": time.monotonic(), "gpu": u.gpu if ok else None, "sm_mhz": nvml.clock(),
                            "cpu": 100.0 * (dt - di) / dt if dt > 0 else None, "core_ms": core_ms()})
            if per is not None:
                per.poll()

    if args.vmm and not args.gpu_step:
        ap.error("--vmm goes with --gpu-step")
    stepper = start_gpu_step(args.every, args.vmm) if args.gpu_step else None
    steps_idle = []
    if stepper:
        time.sleep(10 * args.every / 1000)  # its figures with nothing else running, for comparison
        steps_idle = list(stepper[1])
    th = threading.Thread(target=sample, daemon=True)
    p0, t0 = cpu_pressure_us(), time.monotonic()
    th.start()
    rc = subprocess.call(cmd)
    stop.set()
    th.join()
    p1, t1 = cpu_pressure_us(), time.monotonic()
    steps = []
    if stepper:
        stepper[0].kill()
        stepper[0].wait()
        steps = [r for r in stepper[1] if t0 <= r.get("t", 0) <= t1]

    def line(key, unit):
        xs = sorted(s[key] for s in samples if s[key] is not None)
        if not xs:
            return f"{key}: no samples"
        return (f"{key}: mean {statistics.fmean(xs):.1f}{unit}, median {xs[len(xs) // 2]:.1f}{unit}, "
                f"p90 {xs[int(0.9 * (len(xs) - 1))]:.1f}{unit}")

    idle_ms = statistics.median(idle)
    run_ms = [s["core_ms"] for s in samples]
    speed = (line("core_ms", " ms").replace("core_ms: ", f"core_ms (idle median {idle_ms:.2f} ms): ") +
             (f" (median ×{statistics.median(run_ms) / idle_ms:.2f} of idle)" if run_ms and idle_ms > 0 else ""))
    waited = (f"a task waited for a core {100.0 * (p1 - p0) / 1e6 / (t1 - t0):.2f}% of the run"
              if p0 is not None and p1 is not None and t1 > t0 else "cpu pressure: not available")
    stepped = []
    for key in ("step_us", "vmm_us") if stepper else ():
        xs = sorted(r[key] for r in steps if key in r)
        base = sorted(r[key] for r in steps_idle if key in r)
        if xs:
            stepped.append(f"{key} (idle median {base[len(base) // 2] if base else float('nan'):.0f} us): median "
                           f"{xs[len(xs) // 2]:.0f} us, p90 {xs[int(0.9 * (len(xs) - 1))]:.0f} us, "
                           f"max {xs[-1]:.0f} us")
    print(f"busy_probe: {len(samples)} samples every {args.every:g} ms; " + "; ".join(
        [line("gpu", "%"), line("sm_mhz", " MHz"), line("cpu", "%"), speed, waited] + stepped +
        ([per.summary()] if per is not None else [])) + f"; exit {rc}",
        file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"samples": samples, "gpu_steps": steps} if stepper else samples, f)
    return rc


if __name__ == "__main__":
    sys.exit(main())
