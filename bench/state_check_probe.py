"""What the runner's state check around a call costs, by how many tensors a model holds and how large: the
per-tensor copy and comparison it had (guards._snapshot + guards._all_same_bits) against the chunked one
(guards.StateWatch), on one device.  Also checks, on that device, that both say the same of a set of mutations
(the chunked check with copies exactly; with fingerprints, every changed tensor marked).

    python3 bench/state_check_probe.py [--device cuda] [--shapes 8192x262144,64x4096,4x1048576] [--calls 5]
                                       [--json FILE]

Prints one line a shape: tensors x elements (float32), milliseconds a check (median of --calls), the extra device
memory the check held at its peak (CUDA only), and the chunked check's mode (copies or fingerprints).  Run from the
repository root (it imports harness/kgym_harness)."""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))

import torch  # noqa: E402

from kgym_harness.runner import guards  # noqa: E402


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _old(ts):
    before = guards._snapshot(ts)
    return [not s for s in guards._all_same_bits(list(zip(ts, before)))]


def _new(ts):
    return guards.StateWatch(ts).changed()


def _measure(fn, ts, device, calls):
    times, peaks = [], []
    for _ in range(calls):
        _sync(device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            base = torch.cuda.memory_allocated(device)
        t0 = time.perf_counter()
        changed = fn(ts)
        _sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
        if device.type == "cuda":
            peaks.append(torch.cuda.max_memory_allocated(device) - base)
        assert not any(changed), "nothing was changed, yet the check says so"
    return statistics.median(times), (max(peaks) if peaks else None)


def _agree(device):
    """The mutations of harness/tests/test_guards.py's zoo, on ``device``: the chunked check against the old."""
    bad = []
    for copy_max in (None, 0):
        for which in range(6):
            g = torch.Generator().manual_seed(which)
            ts = [torch.randn(64, 8, generator=g), torch.randn(7, generator=g).half(), torch.arange(11),
                  torch.ones(5, dtype=torch.bool), torch.randn(300, generator=g)[::3], torch.zeros(4)]
            ts = [t.to(device) for t in ts]
            before = guards._snapshot(ts)
            watch = guards.StateWatch(ts, chunk=100, copy_max=copy_max)
            [lambda: ts[0].index_fill_(0, torch.tensor([5], device=device), 1.0), lambda: ts[1].neg_(),
             lambda: ts[2].__setitem__(10, 0), lambda: ts[3].__setitem__(2, False),
             lambda: ts[4].__setitem__(99, 7.0), lambda: ts[5].neg_()][which]()
            want = [not s for s in guards._all_same_bits(list(zip(ts, before)))]
            got = watch.changed()
            ok = got == want if copy_max is None else all(g or not w for g, w in zip(got, want))
            if not ok:
                bad.append({"copy_max": copy_max, "mutation": which, "want": want, "got": got})
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shapes", default="8192x262144,1024x262144,300x65536,64x4096,4x1048576",
                    help="comma-separated TENSORSxELEMENTS (float32)")
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--json", help="write the figures there too")
    args = ap.parse_args()
    device = torch.device(args.device)
    out = {"device": str(device), "name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "disagreements": _agree(device), "shapes": []}
    print(f"state_check_probe: {out['name']}; chunked check against the per-tensor one on mutations: "
          f"{'agrees' if not out['disagreements'] else out['disagreements']}")
    for spec in args.shapes.split(","):
        try:
            n, e = (int(x) for x in spec.split("x"))
        except ValueError:
            sys.exit(f"state_check_probe: --shapes takes TENSORSxELEMENTS, not {spec}")
        ts = [torch.randn(e, device=device) for _ in range(n)]
        row = {"tensors": n, "elements": e, "bytes": n * e * 4, "mode": "copies" if n * e * 4 <= guards.STATE_COPY_MAX
               else "fingerprints"}
        for name, fn in (("per_tensor", _old), ("chunked", _new)):
            try:
                row[name + "_ms"], row[name + "_peak_bytes"] = _measure(fn, ts, device, args.calls)
            except torch.OutOfMemoryError:
                row[name + "_ms"], row[name + "_peak_bytes"] = None, "out of memory"
        out["shapes"].append(row)

        def mb(b):
            return f"{b / 2**20:,.0f} MiB" if isinstance(b, int) else str(b)

        print(f"  {n} x {e}: per-tensor {row['per_tensor_ms']} ms (peak +{mb(row['per_tensor_peak_bytes'])}), "
              f"chunked {row['chunked_ms']} ms (peak +{mb(row['chunked_peak_bytes'])}, {row['mode']})")
        del ts
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 1 if out["disagreements"] else 0


if __name__ == "__main__":
    sys.exit(main())
