"""Per-kernel device times of the candidate's calls in the clock block, and which kernels are the candidate's own.

Coverage, the signal behind Dr. Kernel's profiling-based reward and rejection sampling, is computed in C
from what this returns: device time of the candidate's Triton kernels / device time of all kernels of the
forward.  Only device kernel events count (never CPU time), only the profiled forward calls are inside the
profiler window (the clock block's calls: back to back on one input set, no flush, no copy between them), and a
kernel is the candidate's when its name is exactly one of the Triton kernels the launch hook saw it launch — not
a substring match, so a PyTorch kernel whose name happens to contain "triton" is not counted.
"""

import torch


def warm_up():
    """Sets up the profiler (CUPTI, Kineto) with one profiled no-op kernel, so a later profile costs only its
    own calls.  The runner calls it in a shared phase (timing_inputs), before the exclusive window."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.zeros(16, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]):
        x.add_(1)
        torch.cuda.synchronize()


class Recording:
    """torch.profiler running from construction until stop(): CUDA activity only.  The runner starts one before
    the clock block's first call and stops it after the last (runner.py clock_prepare, clock_describe), so the
    profile is of the block's own calls, with nothing of the harness's inside it (no flush, no copy)."""

    def __init__(self):
        from torch.profiler import ProfilerActivity, profile

        # The stream the block's calls are timed on (the current one): kernels the profile finds on any other
        # stream ran where the stream's end event does not wait for them (summarize's side_stream_device_us).
        # None when the driver cannot say (no cuStreamGetId): then no such figure, and kgym has the gap alone.
        try:
            from . import cudashare

            self.stream = cudashare.stream_id(torch.cuda.current_stream().cuda_stream)
        except Exception:  # noqa: BLE001 — ShareError, or no driver: the figure is absent, never 0
            self.stream = None
        self._prof = profile(activities=[ProfilerActivity.CUDA])
        self._prof.__enter__()

    def stop(self):
        """Stops the profiler once the device has finished; returns it (for summarize)."""
        prof, self._prof = self._prof, None
        if prof is None:
            return None
        try:
            torch.cuda.synchronize()
        finally:
            prof.__exit__(None, None, None)
        return prof


def summarize(prof, calls, names, stream=None):
    """{"calls": calls, "kernels": [{"name", "device_us", "count", "candidate": bool}], "kernel_count",
    "total_device_us", "candidate_device_us", "launched", "side_stream_device_us"} from a stopped profiler,
    kernels sorted by time; a kernel is the candidate's when its name is in ``names`` (the launch hook's record of
    the profiled calls).  ``side_stream_device_us``: the device time of the events on a stream other than
    ``stream`` (Recording.stream, the timed one; None when it is unknown).

    It sums the Kineto events themselves, device kernels only (user annotations left out), rather than
    key_averages(): that builds torch's whole FunctionEvent tree first, 16-46 ms of the exclusive window on a
    200-call block against 1.5-4 ms here, with the same names, counts and times in every case
    bench/profile_probe.py tried on an H200 (thirty-first session).  A profiler without Kineto results raises:
    the block then has no profile, which is never a pass."""
    from torch.autograd import DeviceType

    events = [e for e in prof.profiler.kineto_results.events()
              if e.device_type() == DeviceType.CUDA and not e.is_user_annotation()]
    out = summary([(e.name(), e.duration_ns() / 1e3, 1) for e in events], calls, names)
    out["side_stream_device_us"] = None if stream is None else \
        sum(e.duration_ns() / 1e3 for e in events if e.device_resource_id() != stream)
    return out


def summary(kernels, calls, names):
    """summarize()'s record from (name, device_us, count) per kernel event or group of them (bench/profile_probe.py
    feeds it key_averages' groups to compare): times and counts added up by name, those of no time left out."""
    names = set(names or ())
    by_name = {}
    for name, us, count in kernels:
        if us <= 0:
            continue
        k = by_name.setdefault(name, {"name": name, "device_us": 0.0, "count": 0, "candidate": name in names})
        k["device_us"] += us
        k["count"] += count
    rows = sorted(by_name.values(), key=lambda k: -k["device_us"])
    total = sum(k["device_us"] for k in rows)
    mine = sum(k["device_us"] for k in rows if k["candidate"])
    return {"calls": calls, "kernels": rows[:20], "kernel_count": len(rows), "total_device_us": total,
            "candidate_device_us": mine, "launched": sorted(names)[:50]}


def profile_forward(model, inputs, triton_names, calls: int = 3, launched=None):
    """Runs ``calls`` forwards of ``model`` under the profiler after one unprofiled call, and returns
    summarize()'s record of them.  The candidate's kernels are ``triton_names``, or when ``launched`` is given,
    the names it returns after the profiled calls (the launch hook's record of those very calls).  (kgym's
    evaluations profile the clock block instead: runner.py; this is the probes' and checks' way.)"""
    with torch.no_grad():
        model(*inputs)
        torch.cuda.synchronize()
        rec = Recording()
        try:
            for _ in range(calls):
                model(*inputs)
        finally:
            prof = rec.stop()
    return summarize(prof, calls, launched() if launched else triton_names)
