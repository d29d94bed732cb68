"""Would the runner's speculative compile (harness runner/speculate.py, KGYM_SPECULATE=1) match the odd-size calls of
real candidates?  A CPU probe: no GPU, nothing compiled.

    python3 bench/speculate_probe.py [--list FILE]... [--tiny-budget N]

For each pair of the lists (default tests/kernelbench/level1.jsonl and level2.jsonl, the GRPO mix's sources), the
candidate's forward runs on the meta device (no memory, no kernel runs: each launch is recorded, not executed) at
the tiny run's sizes and at each odd-size variant's (size_odd, small_odd).  Triton's own binder (an sm_90 target)
turns each launch's arguments into the source Triton would compile; a launch at odd sizes is a *hit* when its
kernel's tiny-size source, speculated as speculate.odd_attrs makes it, is that source (same signature, constants
and attributes), a *miss* otherwise.  Printed: per pair, each odd launch's kernel and hit or miss (and why), then the
totals.  Exit 0; a pair that cannot run on the meta device is said and skipped.

Measured (2026-11-26, this machine, the 86 pairs of the two lists): 104 odd-size launches hit, 76 missed, 6 pairs
skipped (structured inputs call .item()).  On the GRPO mix's tasks: level1/1, level1/12 and the four level-2 matmul
tasks (the slow compiles) hit; level1/4 misses (its BLOCK constant follows the size: another kernel anyway).  The
misses elsewhere: an integer that stays a multiple of 16 at odd sizes (level2/97, level2/98: a fixed dimension),
a signature that changes (an argument of 1 becomes a constant, i32 becomes i64), constants that follow the size.
"""

import argparse
import json
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"  # the candidate's kernels are InterpretedFunctions: their launches are caught

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "harness"))


def sources_of(fn, launches, backend):
    """Each launch of `fn` (args, kwargs) as Triton's (signature, constants, attrs) for an sm_90 target."""
    from triton.runtime.jit import JITFunction, create_function_from_signature

    jf = JITFunction(fn)
    binder = create_function_from_signature(jf.signature, jf.params, backend)
    out = []
    for args, kwargs in launches:
        kw = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
        bound, specialization, options = binder(*args, **kw)
        _o, signature, constexprs, attrs = jf._pack_args(backend, kw, bound, specialization, options)
        out.append((signature, {k: repr(v) for k, v in constexprs.items()}, attrs))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="append", help="a kgym bench list (repeatable)")
    ap.add_argument("--tiny-budget", type=int, default=4096, help="the tiny run's elements a tensor (4096)")
    a = ap.parse_args()
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.interpreter import InterpretedFunction

    from do_bench_agreement import import_candidate, resolve_task  # bench/: a KernelBench id's file, a module
    from kgym_harness.judge import tasks
    from kgym_harness.runner import speculate

    backend = make_backend(GPUTarget("cuda", 90, 32))
    kb = os.environ.get("KGYM_KERNELBENCH") or os.path.join(ROOT, "..", "shared", "kernelbench")
    calls = []
    real_run = InterpretedFunction.run

    def record(self, *args, grid, warmup, **kwargs):
        calls.append((self.fn, args, kwargs))
        return None

    InterpretedFunction.run = record
    hits = misses = skipped = 0
    for path in a.list or [os.path.join(ROOT, "tests/kernelbench/level1.jsonl"),
                           os.path.join(ROOT, "tests/kernelbench/level2.jsonl")]:
        for n, line in enumerate(open(path), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            pair = json.loads(line)
            tid = pair.get("kernelbench")
            name = f"{tid or pair.get('task')} {os.path.basename(pair['candidate'])}"
            try:
                task = tasks.load_task(resolve_task(tid or pair["task"], kb), f"probe_task_{n}")
                cand = import_candidate(os.path.join(ROOT, pair["candidate"]))
                tiny = tasks.Variant("tiny", tasks.plan_sizes(task, a.tiny_budget), 42, "none", None, "tiny")
                odd = [v for v in tasks.make_variants(task, "cuda", None) if v.name in ("size_odd", "small_odd")]
                per = {}
                for v in [tiny] + odd:
                    init, inputs = tasks.build(task, v, "meta", keep_structure=v.transform != "none")
                    calls.clear()
                    with torch.device("meta"):
                        model = cand.ModelNew(*init)
                    model.forward(*inputs)
                    per[v.name] = list(calls)
            except Exception as exc:  # noqa: BLE001 — a pair the meta device cannot run
                print(f"{name}: skipped ({type(exc).__name__}: {str(exc)[:120]})")
                skipped += 1
                continue
            tiny_src = {}
            for fn, args, kwargs in per["tiny"]:
                (sig, cx, attrs), = sources_of(fn, [(args, kwargs)], backend)
                tiny_src.setdefault(fn, []).append((sig, cx, speculate.odd_attrs(sig, attrs)))
            said = []
            for vname in [v for v in per if v != "tiny"]:
                for fn, args, kwargs in per[vname]:
                    (sig, cx, attrs), = sources_of(fn, [(args, kwargs)], backend)
                    guesses = tiny_src.get(fn, [])
                    ok = any(g == (sig, cx, attrs) for g in guesses)
                    if ok:
                        hits += 1
                        said.append(f"{vname} {fn.__name__}: hit")
                    else:
                        misses += 1
                        why = "not launched at tiny sizes" if not guesses else (
                            "signature differs" if all(g[0] != sig for g in guesses) else
                            "constants differ" if all(g[1] != cx for g in guesses) else
                            f"attributes differ (odd call {attrs}, speculated {guesses[0][2]})")
                        said.append(f"{vname} {fn.__name__}: MISS, {why}")
            print(f"{name}: " + ("; ".join(said) or "no launch at odd sizes"))
    InterpretedFunction.run = real_run
    print(f"\nodd-size launches: {hits} hit, {misses} missed; pairs skipped {skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
