"""How fast a GPU is warm again after an idle gap: its SM clock (NVML) and a small kernel's time, call by call.

    python3 bench/gpu_clock_probe.py [--gaps 0,200,1000] [--json FILE]

For each idle gap: the GPU sleeps that long (host sleep, nothing queued), then a ~20 us kernel (an elementwise op
on 16 MB) runs back to back for 400 ms, each call timed by CUDA events, the SM clock read after each call.
Printed per gap: the clock at the first call, the first call whose clock is within 2% of the largest seen (ms
since the load began), the first call from which the event time stays within 2% of the settled median (the last
half's), and the settled figures.  Then the same under a heavy load (an fp16 GEMM 8192 loop): the clock a
power-limited GPU settles at.  This decides what a warm-up must wait for (kgym's timing warm-up,
harness/kgym_harness/shared/timing.py): clocks, or the kernel's own times.
"""

import argparse
import ctypes
import json
import sys
import time

import torch

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2


class _FieldValue(ctypes.Structure):
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                ("latencyUsec", ctypes.c_longlong), ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", ctypes.c_ulonglong)]


class Nvml:
    def __init__(self, index=0):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        if self.lib.nvmlInit_v2() != 0:
            raise RuntimeError("nvmlInit_v2 failed")
        self.dev = ctypes.c_void_p()
        if self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.dev)) != 0:
            raise RuntimeError("nvmlDeviceGetHandleByIndex_v2 failed")

    def clock(self, kind=NVML_CLOCK_SM):
        v = ctypes.c_uint()
        return v.value if self.lib.nvmlDeviceGetClockInfo(self.dev, kind, ctypes.byref(v)) == 0 else -1

    def max_clock(self, kind=NVML_CLOCK_SM):
        v = ctypes.c_uint()
        return v.value if self.lib.nvmlDeviceGetMaxClockInfo(self.dev, kind, ctypes.byref(v)) == 0 else -1

    def app_clock(self, kind=NVML_CLOCK_SM):
        v = ctypes.c_uint()
        return v.value if self.lib.nvmlDeviceGetApplicationsClock(self.dev, kind, ctypes.byref(v)) == 0 else -1

    def power_mw(self):
        """Instant power (NVML_FI_DEV_POWER_INSTANT, field 186), not nvmlDeviceGetPowerUsage's 1 s average."""
        fv = _FieldValue(fieldId=186)
        if self.lib.nvmlDeviceGetFieldValues(self.dev, 1, ctypes.byref(fv)) != 0 or fv.nvmlReturn != 0:
            return -1
        return fv.value

    def limit_mw(self):
        v = ctypes.c_uint()
        return v.value if self.lib.nvmlDeviceGetEnforcedPowerLimit(self.dev, ctypes.byref(v)) == 0 else -1

    def throttle(self):
        v = ctypes.c_ulonglong()
        return v.value if self.lib.nvmlDeviceGetCurrentClocksThrottleReasons(self.dev, ctypes.byref(v)) == 0 else -1


def load(fn, ms, nvml):
    """fn back to back for ms of wall time: [(t since start ms, event ms, sm clock MHz, instant mW, throttle
    reasons)]."""
    out = []
    t0 = time.perf_counter()
    while (time.perf_counter() - t0) * 1e3 < ms:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        out.append(((time.perf_counter() - t0) * 1e3, s.elapsed_time(e), nvml.clock(), nvml.power_mw(),
                    nvml.throttle()))
    return out


def settle(rows, rel=0.02):
    half = sorted(r[1] for r in rows[len(rows) // 2:])
    med = half[len(half) // 2]
    top = max(r[2] for r in rows)
    clock_at = next((r[0] for r in rows if r[2] >= top * (1 - rel)), None)
    time_at = None
    for i in range(len(rows)):
        if all(abs(r[1] / med - 1) <= rel for r in rows[i:i + 20]):
            time_at = rows[i][0]
            break
    return {"calls": len(rows), "first_clock": rows[0][2], "top_clock": top, "settled_ms": med,
            "first_call_ms": rows[0][1], "clock_within_2pct_at_ms": clock_at, "time_within_2pct_at_ms": time_at}


def _buckets(rows, width=20.0):
    """Per width-ms bucket: (start ms, calls, median event ms, min clock, max instant W, throttle bits OR'd)."""
    out, i = [], 0
    while i < len(rows):
        b0 = rows[i][0] // width * width
        grp = [r for r in rows[i:] if r[0] < b0 + width]
        i += len(grp)
        ts = sorted(r[1] for r in grp)
        bits = 0
        for r in grp:
            bits |= max(r[4], 0)
        out.append((b0, len(grp), round(ts[len(ts) // 2], 4), min(r[2] for r in grp),
                    round(max(r[3] for r in grp) / 1e3, 1), hex(bits)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gaps", default="0,200,1000")
    ap.add_argument("--json")
    a = ap.parse_args()
    nvml = Nvml(torch.cuda.current_device())
    facts = {"gpu": torch.cuda.get_device_name(), "max_sm": nvml.max_clock(), "app_sm": nvml.app_clock(),
             "idle_sm": nvml.clock(), "max_mem": nvml.max_clock(NVML_CLOCK_MEM), "mem": nvml.clock(NVML_CLOCK_MEM),
             "throttle_idle": nvml.throttle(), "limit_mw": nvml.limit_mw(), "idle_mw": nvml.power_mw()}
    t0 = time.perf_counter()
    for _ in range(100):
        nvml.clock()
    facts["nvml_read_us"] = (time.perf_counter() - t0) * 1e4
    t0 = time.perf_counter()
    for _ in range(100):
        nvml.power_mw()
    facts["nvml_power_read_us"] = (time.perf_counter() - t0) * 1e4
    print(json.dumps(facts))
    x = torch.randn(4 << 20, device="cuda")
    small = lambda: torch.sigmoid(x * 1.5 + 0.5)  # noqa: E731
    a16 = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    gemm = lambda: a16 @ a16  # noqa: E731
    load(small, 300, nvml)
    rows = {}
    for gap in [float(g) for g in a.gaps.split(",")]:
        torch.cuda.synchronize()
        time.sleep(gap / 1e3)
        r = load(small, 400, nvml)
        rows[f"small_gap_{gap:g}"] = settle(r)
        rows[f"small_gap_{gap:g}"]["series"] = [(round(q[0], 2), round(q[1], 5), q[2], q[3]) for q in r[:40]]
        print(f"gap {gap:6g} ms:", json.dumps({k: v for k, v in rows[f'small_gap_{gap:g}'].items() if k != 'series'}))
    big = torch.randn(256 << 20, device="cuda")  # 1 GiB: a memory-bound kernel of ~1 ms
    f32 = torch.randn(4096, 4096, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    kernels = {"small": small, "membound_1g": lambda: big * 1.5, "gemm_fp32_4096": lambda: f32 @ f32,
               "gemm_fp16_8192": gemm}
    for k in kernels.values():  # libraries' first calls (cuBLAS handles, heuristics) out of the series
        k()
    torch.cuda.synchronize()
    for name, fn in kernels.items():
        time.sleep(1.0)
        r = load(fn, 700, nvml)
        rows[name] = summary = settle(r)
        summary["series"] = _buckets(r)
        print(name, json.dumps({k: v for k, v in summary.items() if k != "series"}))
        for b in summary["series"]:
            print("   ", b)
    # light for 30 ms, then heavy: how long a heavy kernel runs unthrottled after a short light warm-up
    time.sleep(1.0)
    r = load(small, 30, nvml) + [(q[0] + 30.0,) + tuple(q[1:]) for q in load(gemm, 500, nvml)]
    rows["light30_then_gemm"] = {"series": _buckets(r)}
    print("light 30 ms then gemm_fp16_8192")
    for b in rows["light30_then_gemm"]["series"]:
        print("   ", b)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"facts": facts, "rows": rows}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
