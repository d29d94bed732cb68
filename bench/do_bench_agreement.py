#!/usr/bin/env python3
"""An outside opinion on kgym's candidate timing: triton.testing.do_bench on the same kernels and inputs.

    python3 bench/do_bench_agreement.py --pairs bench/timing_stability.jsonl [--kernelbench DIR] [--rep 2000]

For each pair of the list: load the task and the candidate module, build the task's full-size base inputs and
weights directly on the GPU with kgym's own harness (the same sizes, seed and construction kgym times), and run
do_bench with a long repetition (rep=2000 ms, median), which averages out clock and thermal wander.  Prints one
JSON line per pair to stdout:

    {"kernelbench": "level1/19", "candidate": "tests/...py", "do_bench_ms": 1.234, "rep_ms": 2000}

(with "error" and "do_bench_ms": null when the pair could not be measured; "task" instead of "kernelbench" for a
task file).  Progress and the GPU name go to stderr.  timing_stability.sh compares do_bench_ms with kgym's
timing.candidate_ms.median.

Where the inputs lie matters to a memory-bound kernel (how its input lines up with its output in DRAM): here they come
from PyTorch's allocator, and kgym puts the inputs it hands the candidate where the allocator would
(transport._placement); before it did, level1/19 read 2.7% apart (thirty-fourth session, docs/PERFORMANCE.md).

Known difference between the two, kept on purpose: do_bench launches its calls back to back (no synchronize
between them), so the host's launch overhead hides behind the previous call's L2 flush; kgym synchronizes
before each timed call, so for very short kernels its time includes the launch.  Problems were chosen with
kernels well above 0.05 ms so that this stays small; a kgym/do_bench ratio that grows as kernels get shorter
points at it.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "harness"))


def resolve_task(spec: str, kernelbench: str | None) -> str:
    """A task file, or a KernelBench id ("level1/19", "L1/19", "1/19") resolved the way kgym does: the file in
    DIR/levelN whose number is exactly N (so "1" never finds "10_..." or "100_...")."""
    if os.path.isfile(spec):
        return spec
    m = re.fullmatch(r"(?:level|[Ll])?(\d+)/(\d+)(_[^/]*)?(?:\.py)?", spec)
    if not m:
        raise ValueError(f"{spec!r} is neither a file nor a KernelBench id like level1/19")
    if not kernelbench:
        raise ValueError(f"task id {spec!r} needs --kernelbench DIR (or $KGYM_KERNELBENCH)")
    folder = os.path.join(kernelbench, f"level{int(m.group(1))}")
    want, name = int(m.group(2)), m.group(3)
    for f in sorted(os.listdir(folder)):
        head = re.match(r"(\d+)(_.*)\.py$", f)
        if head and int(head.group(1)) == want and (not name or head.group(2).startswith(name)):
            return os.path.join(folder, f)
    raise ValueError(f"no problem {want} in {folder}")


def import_candidate(path: str):
    # The name kgym's child uses, so a candidate that looks itself up by module name behaves the same.
    spec = importlib.util.spec_from_file_location("kgym_candidate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["kgym_candidate"] = module
    spec.loader.exec_module(module)
    return module


def measure(task_path: str, cand_path: str, device: str, rep: int, warmup: int, seed: int) -> float:
    import torch
    import triton.testing

    from kgym_harness.judge import tasks
    from kgym_harness.shared import models

    task = tasks.load_task(task_path)
    base = tasks.make_variants(task, device, None, base_seed=seed)[0]  # budget None: the task's full sizes
    init, inputs = tasks.build(task, base, device)
    cand_cls = import_candidate(cand_path).ModelNew
    model = models.construct(cand_cls, init, base.seed, device)
    try:
        # kgym times under no_grad too; without it the candidate's parameters would make autograd record.
        with torch.no_grad():
            ms = triton.testing.do_bench(lambda: model(*inputs), warmup=warmup, rep=rep, return_mode="median")
    finally:
        del model, inputs, init
        gc.collect()
        torch.cuda.empty_cache()  # the next problem may need most of the GPU's memory
    return float(ms)


def read_pairs(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip() and not line.lstrip().startswith("#")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="triton.testing.do_bench on each pair's candidate (full sizes)")
    ap.add_argument("--pairs", required=True, help="kgym JSONL list ({\"kernelbench\"|\"task\", \"candidate\"})")
    ap.add_argument("--kernelbench", default=os.environ.get("KGYM_KERNELBENCH"),
                    help="KernelBench folder holding level1/, level2/ (default $KGYM_KERNELBENCH)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rep", type=int, default=2000, help="do_bench repetition time in ms (2000)")
    ap.add_argument("--warmup", type=int, default=100, help="do_bench warm-up time in ms (100)")
    ap.add_argument("--seed", type=int, default=42, help="kgym's --seed (42): the base variant's seed")
    args = ap.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("do_bench_agreement.py: no GPU visible (torch.cuda.is_available() is False)", file=sys.stderr)
        return 1
    if ":" in args.device:  # plain "cuda" is the current device already; set_device needs an index
        torch.cuda.set_device(torch.device(args.device))
    print(f"do_bench_agreement.py: {torch.cuda.get_device_name()}, rep {args.rep} ms", file=sys.stderr)
    failures = 0
    for pair in read_pairs(args.pairs):
        key = "kernelbench" if "kernelbench" in pair else "task"
        line = {key: pair.get(key), "candidate": pair.get("candidate"), "do_bench_ms": None, "rep_ms": args.rep}
        t0 = time.perf_counter()
        try:
            task_path = resolve_task(pair[key], args.kernelbench)
            line["do_bench_ms"] = measure(task_path, pair["candidate"], args.device, args.rep, args.warmup,
                                          args.seed)
        except Exception as e:  # noqa: BLE001 - one bad pair must not cost the others their figures
            line["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            failures += 1
        gc.collect()  # a failure inside build() leaves its tensors to the collector: free them before the next
        torch.cuda.empty_cache()
        print(json.dumps(line), flush=True)
        ms = line["do_bench_ms"]
        print(f"  {pair.get(key)}: " + (f"{ms:.4f} ms" if ms is not None else line["error"])
              + f"  ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
