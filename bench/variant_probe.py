#!/usr/bin/env python3
"""Where a correctness variant's fixed cost goes on the judge's side, alone on a GPU.

    python3 bench/variant_probe.py [--task FILE] [--reps N] [--device cuda]

A correctness variant at the capped sizes costs the judge ~14 ms of "inputs" (correctness.variants[].spent_ms)
whatever the task's size: this times each step of it, the median of --reps (default 20) after two unmeasured
repetitions: drawing the inputs (tasks.build), the device block (cudashare.Block.create: cuMemCreate, reserve,
map, access), filling it, the canaries, the views, the export and a second mapping of the export (what the runner
does with it), the fingerprints (seal, changed), the canaries' check, and the block's release.  Prints one line a
step (milliseconds) and a JSON line with the same figures.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    kb = os.environ.get("KGYM_KERNELBENCH", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "kernelbench"))
    ap.add_argument("--task", default=os.path.join(kb, "level1", "1_Square_matrix_multiplication_.py"))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    import torch

    from kgym_harness.judge import tasks
    from kgym_harness.shared import cudashare
    from kgym_harness.shared import transport as tp

    torch.cuda.init()
    module = tasks.load_task(args.task)
    variant = tasks.make_variants(module, args.device, None)[1]  # scaled_x2: the capped sizes
    times = {}

    def lap(name, t0):
        torch.cuda.synchronize()
        times.setdefault(name, []).append((time.perf_counter() - t0) * 1e3)
        return time.perf_counter()

    for rep in range(args.reps + 2):
        t = time.perf_counter()
        _init, inputs = tasks.build(module, variant, args.device)
        t = lap("build", t)
        tensors = [x for x in inputs if torch.is_tensor(x)]
        layout, total = tp._layout(tensors, guard=tp.GUARD)
        block = cudashare.Block.create(total)
        t = lap("block_create", t)
        tp._fill_block(block, tensors, layout)
        t = lap("fill", t)
        canaries = tp._Canaries(block, layout)
        t = lap("canaries", t)
        views = tp._block_tensors(block, layout, clone=False)
        t = lap("views", t)
        fd = block.export()
        t = lap("export", t)
        other = cudashare.Block.open(fd, block.size)
        os.close(fd)
        t = lap("open_mapping", t)
        key = 12345
        sums = [tp.fingerprint(x, (key, i)) for i, x in enumerate(views)]
        t = lap("seal", t)
        changed = [i for i, x in enumerate(views) if tp.fingerprint(x, (key, i)) != sums[i]]
        t = lap("changed", t)
        hits = canaries.check()
        t = lap("canaries_check", t)
        other.close()
        t = lap("close_mapping", t)
        del views, canaries
        block.close()
        t = lap("close_block", t)
        assert not changed and not hits
        if rep < 2:
            times.clear()
    med = {k: round(statistics.median(v), 3) for k, v in times.items()}
    print(f"task {os.path.basename(args.task)}, variant {variant.name} {variant.sizes}, block {total / 2**20:.1f} MiB, "
          f"{torch.cuda.get_device_name()}")
    for k, v in med.items():
        print(f"  {k:16s} {v:8.3f} ms")
    print(f"  {'sum':16s} {sum(med.values()):8.3f} ms")
    print(json.dumps({"task": os.path.basename(args.task), "block_bytes": total, "median_ms": med}))


if __name__ == "__main__":
    main()
