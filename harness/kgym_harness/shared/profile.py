"""Per-kernel device times of a few candidate calls, and which kernels are the candidate's own.

Coverage, the signal behind Dr. Kernel's profiling-based reward and rejection sampling, is computed in C
from what this returns: device time of the candidate's Triton kernels / device time of all kernels of the
forward.  Only device kernel events count (never CPU time), only the profiled forward calls are inside the
profiler window (the harness's own L2 flushes and input copies are outside it), and a kernel is the
candidate's when its name is exactly one of the Triton kernels the launch hook saw it launch — not a
substring match, so a PyTorch kernel whose name happens to contain "triton" is not counted.
"""

import torch


def _device_time_us(evt) -> float:
    for attr in ("self_device_time_total", "self_cuda_time_total", "device_time_total", "cuda_time_total"):
        v = getattr(evt, attr, None)
        if v:
            return float(v)
    return 0.0


def warm_up():
    """Sets up the profiler (CUPTI, Kineto) with one profiled no-op kernel, so a later profile_forward
    costs only its own calls."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.zeros(16, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]):
        x.add_(1)
        torch.cuda.synchronize()


def profile_forward(model, inputs, triton_names, calls: int = 3, launched=None):
    """Runs ``calls`` forwards of ``model`` under torch.profiler (CUDA activity only) after one
    unprofiled call, and returns {"calls": n, "kernels": [{"name", "device_us", "count",
    "candidate": bool}], "total_device_us": t, "candidate_device_us": c, "launched": [...]} with kernels
    sorted by time.  The candidate's kernels are ``triton_names``, or when ``launched`` is given, the names
    it returns after the profiled calls (the launch hook's record of those very calls)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        model(*inputs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                model(*inputs)
            torch.cuda.synchronize()
    names = set(launched() if launched else (triton_names or ()))
    kernels = {}
    for evt in prof.key_averages():
        if getattr(evt, "device_type", None) != DeviceType.CUDA:
            continue
        us = _device_time_us(evt)
        if us <= 0:
            continue
        k = kernels.setdefault(evt.key, {"name": evt.key, "device_us": 0.0, "count": 0,
                                         "candidate": evt.key in names})
        k["device_us"] += us
        k["count"] += int(getattr(evt, "count", 1) or 1)
    rows = sorted(kernels.values(), key=lambda k: -k["device_us"])
    total = sum(k["device_us"] for k in rows)
    mine = sum(k["device_us"] for k in rows if k["candidate"])
    return {"calls": calls, "kernels": rows[:20], "kernel_count": len(rows), "total_device_us": total,
            "candidate_device_us": mine, "launched": sorted(names)[:50]}
