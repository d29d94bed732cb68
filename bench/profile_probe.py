"""What the profile of a clock block costs, and whether a cheaper summary of it says the same (GPU only).

    python3 bench/profile_probe.py [--calls 8,50,200] [--sizes 4096,16777216] [--repeat 3] [--json FILE]

Since the thirtieth session the runner profiles the clock block's calls (2-200 back to back: runner.py
clock_prepare / clock_describe), and the profile's stop and summary run inside the exclusive window: on an H200 the
`profile` purpose took 12-13 ms for blocks of 7-8 calls and 92-97 ms for blocks of 200 calls of tiny kernels.  This
probe takes that cost apart for a Triton kernel (and the same kernel beside a PyTorch kernel, which is library
compute for coverage) at each size and number of calls:
  - start_ms      profile.Recording() (the profiler started; set up beforehand by profile.warm_up, as the runner's
                  timing_inputs does)
  - calls_ms      the calls, then a synchronize
  - stop_ms       Recording.stop() (Kineto stops and hands its events over)
  - summary_ms    the same figures through torch's key_averages over every event (`averaged_summary` below: what
                  the runner did until the thirty-first session)
  - direct_ms     profile.summarize: the Kineto events summed straight (device events that are not user
                  annotations, by name; what the runner does since the thirty-first session, after this probe found
                  the two equal in all 12 cases on an H200 and direct 8-20 times cheaper)
and whether the two summaries agree: the same kernel names, counts, and device time within 0.1% for each, the same
total and candidate time.  Run it after a torch upgrade: a difference means the Kineto events changed meaning.
Exit status 0 when every case agreed, 1 otherwise, 2 without a GPU.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))


def averaged_summary(prof, calls, names):
    """profile.summarize's figures the way it took them until the thirty-first session: torch's key_averages() (the
    whole FunctionEvent tree, grouped by name), device kernels only."""
    from torch.autograd import DeviceType

    from kgym_harness.shared import profile

    def device_us(evt):
        for attr in ("self_device_time_total", "self_cuda_time_total", "device_time_total", "cuda_time_total"):
            v = getattr(evt, attr, None)
            if v:
                return float(v)
        return 0.0

    return profile.summary([(evt.key, device_us(evt), int(getattr(evt, "count", 1) or 1)) for evt in prof.key_averages()
                            if getattr(evt, "device_type", None) == DeviceType.CUDA], calls, names)


def agree(a, b):
    """'' when the two summaries say the same (names, counts, device time within 0.1%), else what differs."""
    def close(x, y):
        return abs(x - y) <= 1e-3 * max(abs(x), abs(y), 1e-9)

    ka = {k["name"]: k for k in a["kernels"]}
    kb = {k["name"]: k for k in b["kernels"]}
    if set(ka) != set(kb):
        return f"names {sorted(set(ka) ^ set(kb))[:4]}"
    for n in ka:
        if ka[n]["count"] != kb[n]["count"] or not close(ka[n]["device_us"], kb[n]["device_us"]):
            return f"{n[:40]}: {ka[n]['count']}/{ka[n]['device_us']:.1f} us against {kb[n]['count']}/{kb[n]['device_us']:.1f}"
    for f in ("total_device_us", "candidate_device_us"):
        if not close(a[f], b[f]):
            return f"{f} {a[f]:.1f} against {b[f]:.1f}"
    if a["kernel_count"] != b["kernel_count"]:
        return f"kernel_count {a['kernel_count']} against {b['kernel_count']}"
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", default="8,50,200", help="block lengths (comma-separated; default 8,50,200)")
    ap.add_argument("--sizes", default="4096,16777216", help="elements per tensor (default 4096,16777216)")
    ap.add_argument("--repeat", type=int, default=3, help="profiles per case; medians are printed (default 3)")
    ap.add_argument("--json", help="also write every case's figures here")
    a = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("profile_probe: no CUDA device here (the probe measures the GPU profiler)", file=sys.stderr)
        return 2
    import triton
    import triton.language as tl

    from kgym_harness.shared import profile

    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0 + 1.0, mask=m)

    def triton_only(x):
        out = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out

    def mixed(x):
        return triton_only(x).sin()  # a PyTorch kernel beside the candidate's: library compute

    profile.warm_up()
    cases, bad = [], 0
    for size in [int(s) for s in a.sizes.split(",")]:
        x = torch.randn(size, device="cuda")
        for label, fn in (("triton", triton_only), ("mixed", mixed)):
            for calls in [int(c) for c in a.calls.split(",")]:
                fn(x)
                torch.cuda.synchronize()
                fig = {k: [] for k in ("start_ms", "calls_ms", "stop_ms", "summary_ms", "direct_ms")}
                differs = ""
                for _ in range(a.repeat):
                    t0 = time.perf_counter()
                    rec = profile.Recording()
                    t1 = time.perf_counter()
                    for _ in range(calls):
                        fn(x)
                    torch.cuda.synchronize()
                    t2 = time.perf_counter()
                    prof = rec.stop()
                    t3 = time.perf_counter()
                    s1 = averaged_summary(prof, calls, {"scale_kernel"})
                    t4 = time.perf_counter()
                    s2 = profile.summarize(prof, calls, {"scale_kernel"})
                    t5 = time.perf_counter()
                    for k, v in zip(fig, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                        fig[k].append(v * 1e3)
                    differs = differs or agree(s1, s2)
                row = {"size": size, "forward": label, "calls": calls,
                       **{k: statistics.median(v) for k, v in fig.items()}, "agree": not differs, "differs": differs,
                       "kernels": [(k["name"][:40], k["count"], round(k["device_us"], 1)) for k in s1["kernels"][:3]]}
                bad += bool(differs)
                cases.append(row)
                print(f"{size:>10} {label:6} {calls:4} calls: start {row['start_ms']:6.2f}  calls {row['calls_ms']:7.2f}  "
                      f"stop {row['stop_ms']:6.2f}  summary {row['summary_ms']:7.2f}  direct {row['direct_ms']:6.2f} ms  "
                      + ("agree" if not differs else "DIFFER: " + differs), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": cases}, f, indent=1)
    print(f"profile_probe: {len(cases)} cases, {bad} where the direct summary differs from key_averages")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
