"""The judge's fused comparison (compare._fused_facts) against the chunked pass, on a GPU: the same facts on
awkward values (NaN, infinities, values at the tolerance's edge, mixed dtypes), and the time each takes on a
level1/19-sized output (4096 x 393216 float32, 6 GiB).  Exits 1 when a fact differs.

    python3 bench/fused_compare.py            # needs a CUDA device and about 20 GiB of its memory
"""

import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from kgym_harness.judge import compare  # noqa: E402


def chunked(r, c, atol, rtol):
    fusable, compare._fusable = compare._fusable, lambda *_: False
    try:
        return compare._compare_tensors(r, c, atol, rtol)
    finally:
        compare._fusable = fusable


def best_of(fn, reps):
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    if not torch.cuda.is_available():
        print("fused_compare: no CUDA device", file=sys.stderr)
        return 2
    dev = "cuda"
    torch.manual_seed(0)
    differ = 0
    cases = 0
    for n in (1 << 20, (1 << 20) + 12345, 3_000_001):
        r = torch.randn(n, device=dev)
        c = r + torch.randn(n, device=dev) * 1.2e-4
        idx = torch.randint(n, (50,), device=dev)
        r[idx[:10]] = float("nan")
        c[idx[:5]] = float("nan")
        r[idx[10:20]] = float("inf")
        c[idx[10:15]] = float("inf")
        c[idx[20:30]] = float("-inf")
        r[idx[30:40]] = 0.0
        c[idx[30:40]] = 1e-39
        pairs = [(r, c), (r.half(), c.float()), (r.bfloat16(), c.bfloat16()), (r.double(), c.double()),
                 (r, r.clone())]
        for rr, cc in pairs:
            for atol, rtol in ((1e-4, 1e-4), (0.0, 0.0), (1e-2, 1e-2)):
                cases += 1
                fused, chunk = compare._fused_facts(rr, cc, atol, rtol), chunked(rr, cc, atol, rtol)
                if fused != chunk:
                    differ += 1
                    print(f"DIFFERENT n={n} {rr.dtype}/{cc.dtype} atol={atol} rtol={rtol}\n  fused   {fused}\n"
                          f"  chunked {chunk}")
    r = torch.rand(1 << 22, device=dev, dtype=torch.float64)
    c = r + (1e-4 + 1e-4 * r.abs())
    c[::2] = torch.nextafter(c[::2], torch.full_like(c[::2], 10.0))
    cases += 1
    if compare._fused_facts(r, c, 1e-4, 1e-4) != chunked(r, c, 1e-4, 1e-4):
        differ += 1
        print("DIFFERENT at the tolerance's edge")
    print(f"facts: {cases - differ} of {cases} cases the same")
    x = torch.randn(4096, 393216, device=dev)
    y = torch.relu(x)
    del x
    z = y.clone()
    print(f"6 GiB float32 output: fused {best_of(lambda: compare._fused_facts(y, z, 1e-4, 1e-4), 3) * 1e3:.1f} ms, "
          f"chunked {best_of(lambda: chunked(y, z, 1e-4, 1e-4), 1) * 1e3:.1f} ms, "
          f"a clone {best_of(lambda: y.clone(), 1) * 1e3:.1f} ms ({torch.cuda.get_device_name()})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
