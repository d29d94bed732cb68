"""GPU probe: can data marked persisting in L2 outlive kgym's L2 flush, and what clears it?

    KGYM_PYTHON=... $KGYM_PYTHON bench/l2_persist_probe.py [--mib N] [--trials N]

kgym flushes L2 before every timed call by writing twice its size (timing.L2Flusher) and, since issue 33, resets
persisting lines first in the process being timed (timing.PersistingL2: the context's persisting set-aside to 0,
cuCtxResetPersistingL2Cache).  docs/threat-model.md ("Persisting L2 lines") argues where the reset must run; this
script measures the facts that argument rests on, on the GPU at hand.  A buffer W (N MiB, at most half the L2 and
at most the device's persisting maximum) is read by a Triton kernel, then something happens, then the flush, then
W is read again under CUDA events; the median time of that read, over --trials trials, says whether W was still in
L2 (near "warm") or not (near "cold"):

  warm                 read, read again (no flush): W in L2
  cold                 read, flush, read: W from DRAM
  window               set-aside = max, access-policy window on W (hitRatio 1, persisting), read, flush, read
  window+reset         ... read, reset in this process (what the runner does), flush, read
  window+other-reset   ... read, reset in ANOTHER process (its own context; what a judge-side reset would be),
                       flush, read
  evict_last           set-aside 0, no window, read with eviction_policy="evict_last", flush, read
  evict_last+set-aside set-aside = max, no window, read with evict_last, flush, read
  evict_last+reset     set-aside = max, read with evict_last, reset, flush, read

and the reset's host cost (microseconds a call) and whether it waits for queued device work.  Prints a table and
one line per question.  Exit status 0 whatever it finds (it measures; the lead reads).  Not part of any test suite.
"""

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "harness"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kgym_harness.shared import cudashare, timing  # noqa: E402


@triton.jit
def _read(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVICT_LAST: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    if EVICT_LAST:
        x = tl.load(x_ptr + offs, mask=m, other=0.0, eviction_policy="evict_last")
    else:
        x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(out_ptr + pid, tl.sum(x, axis=0))


class _Window(ctypes.Structure):  # CUaccessPolicyWindow
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class _Value(ctypes.Union):  # CUlaunchAttributeValue (64 bytes)
    _fields_ = [("accessPolicyWindow", _Window), ("pad", ctypes.c_char * 64)]


_ATTR_ACCESS_POLICY_WINDOW = 1  # CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW (= CU_STREAM_ATTRIBUTE_...)
_PERSISTING, _STREAMING = 2, 1  # CUaccessProperty


def _driver():
    lib, fns = cudashare._l2_driver()
    fn = lib.cuStreamSetAttribute
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(_Value)], ctypes.c_int
    return fns, fn


def set_aside(nbytes):
    fns, _ = _driver()
    cudashare._check(fns["cuCtxSetLimit"](cudashare._CU_LIMIT_PERSISTING_L2_CACHE_SIZE, int(nbytes)),
                     "cuCtxSetLimit")


def window(buf, on):
    _, set_attr = _driver()
    v = _Value()
    v.accessPolicyWindow.base_ptr = buf.data_ptr() if on else None
    v.accessPolicyWindow.num_bytes = buf.numel() * buf.element_size() if on else 0
    v.accessPolicyWindow.hitRatio = 1.0 if on else 0.0
    v.accessPolicyWindow.hitProp = _PERSISTING if on else 0
    v.accessPolicyWindow.missProp = _STREAMING if on else 0
    cudashare._check(set_attr(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), _ATTR_ACCESS_POLICY_WINDOW,
                              ctypes.byref(v)), "cuStreamSetAttribute")


def read(w, out, evict_last=False):
    n = w.numel()
    _read[(triton.cdiv(n, 4096),)](w, out, n, BLOCK=4096, EVICT_LAST=evict_last)


def timed_read(w, out):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    read(w, out)
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


OTHER = r"""
import sys
sys.path.insert(0, sys.argv[1])
import torch
from kgym_harness.shared import cudashare
torch.cuda.init(); torch.zeros(1, device="cuda")
print("ready", flush=True)
for line in sys.stdin:
    cudashare.reset_persisting_l2()
    torch.cuda.synchronize()
    print("done", flush=True)
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mib", type=int, default=0, help="size of W in MiB (default: min(L2/2, persisting max))")
    p.add_argument("--trials", type=int, default=30)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("no GPU: nothing to probe")
        return 0
    torch.zeros(1, device="cuda")
    l2 = timing.l2_bytes()
    try:
        max_bytes = cudashare.persisting_l2_max()
    except cudashare.ShareError as exc:
        print(f"the driver offers no persisting-L2 control: {exc}")
        return 0
    print(f"GPU {torch.cuda.get_device_name()}: L2 {l2 >> 20} MiB, persisting set-aside max {max_bytes / 2**20:.1f} MiB")
    if max_bytes <= 0:
        print("this device sets no L2 aside for persisting accesses (before sm_80, or MIG): nothing can persist")
        return 0
    nbytes = (a.mib << 20) if a.mib else min(l2 // 2, max_bytes) // (1 << 20) << 20
    w = torch.randn(nbytes // 4, device="cuda")
    out = torch.empty(triton.cdiv(w.numel(), 4096), device="cuda")
    flush = timing.L2Flusher()
    other = subprocess.Popen([sys.executable, "-c", OTHER, os.path.join(HERE, "..", "harness")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert other.stdout.readline().strip() == "ready"

    def other_reset():
        other.stdin.write("go\n")
        other.stdin.flush()
        assert other.stdout.readline().strip() == "done"

    def scenario(limit, win, evict_last, between):
        times = []
        for _ in range(a.trials):
            cudashare.reset_persisting_l2()  # a clean start: nothing persisting, set-aside 0
            if limit:
                set_aside(max_bytes)
            if win:
                window(w, True)
            flush()
            read(w, out, evict_last)
            torch.cuda.synchronize()
            if win:
                window(w, False)
            if between == "reset":
                cudashare.reset_persisting_l2()
            elif between == "other-reset":
                other_reset()
            if between != "no-flush":
                flush()
            times.append(timed_read(w, out))
        cudashare.reset_persisting_l2()
        return statistics.median(times)

    rows = [("warm", scenario(False, False, False, "no-flush")),
            ("cold", scenario(False, False, False, None)),
            ("window", scenario(True, True, False, None)),
            ("window+reset", scenario(True, True, False, "reset")),
            ("window+other-reset", scenario(True, True, False, "other-reset")),
            ("evict_last", scenario(False, False, True, None)),
            ("evict_last+set-aside", scenario(True, False, True, None)),
            ("evict_last+reset", scenario(True, False, True, "reset"))]
    other.stdin.close()
    other.wait(timeout=30)
    times = dict(rows)
    warm, cold = times["warm"], times["cold"]
    print(f"\nW = {nbytes >> 20} MiB, {a.trials} trials each, median read time after the step:")
    for name, ms in rows:
        where = (ms - warm) / (cold - warm) if cold > warm else float("nan")
        print(f"  {name:22s} {ms * 1e3:9.2f} us   (0 = warm, 1 = cold: {where:5.2f})")

    def kept(name):
        return "yes" if times[name] < warm + 0.5 * (cold - warm) else "no"

    print(f"\nA persisting window keeps W in L2 through the flush:           {kept('window')}")
    print(f"... and a reset in the same process (the runner) clears it:    {'yes' if kept('window+reset') == 'no' else 'no'}")
    print(f"... and a reset in another process (the judge) clears it:       {'yes' if kept('window+other-reset') == 'no' else 'no'}")
    print(f"evict_last loads keep W through the flush (set-aside 0):        {kept('evict_last')}")
    print(f"evict_last loads keep W through the flush (set-aside max):      {kept('evict_last+set-aside')}")
    print(f"... and the reset clears them:                                  {'yes' if kept('evict_last+reset') == 'no' else 'no'}")

    # The reset's host cost, idle and behind 5 ms of queued device work (does it wait for the device?).
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        cudashare.reset_persisting_l2()
    idle = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    torch.cuda._sleep(int(5e-3 * 1.7e9))  # about 5 ms at ~1.7 GHz
    t0 = time.perf_counter()
    cudashare.reset_persisting_l2()
    busy = (time.perf_counter() - t0) * 1e6
    torch.cuda.synchronize()
    print(f"reset cost: {idle:.1f} us a call idle; {busy:.0f} us behind ~5 ms of queued work "
          f"({'waits for the device' if busy > 2000 else 'does not wait for the device'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
