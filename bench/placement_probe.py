#!/usr/bin/env python3
"""GPU probe: how much does where a candidate's input lies move its time?

    python3 bench/placement_probe.py [--kernelbench DIR] [--task level1/19]
                                     [--candidate tests/kernelbench/level1/19_relu/honest.py] [--calls 30]

kgym hands the candidate its timed inputs in place, in a block of the judge's (cudashare.Block: cuMemCreate), and
times the reference on the judge's own tensors, which PyTorch's allocator placed.  A memory-bound kernel's speed
depends on how its input lines up with its output in DRAM: on an H200 level1/19's ReLU (6.4 GB in, 6.4 GB out) ran
2.5-2.7% faster with its input 256 B or 4 KiB past a 2 MiB boundary than on one (thirty-fourth session,
docs/PERFORMANCE.md), which is where the call block had put it.  Since then transport._placement puts each tensor
where the allocator would.  This script times the task's candidate (kgym's event_timed: the L2 flush, the launch
cover; and do_bench) with its first input at several offsets inside one block, and on the allocator's tensor, so
the effect can be measured on any GPU and task:

    input from the allocator    block +0    block +256 B    block +4 KiB    block at _placement's offset

Prints one line per placement: the candidate's median ms (event_timed), do_bench's median, and the ratio to the
allocator's.  Exit status 0 whatever it finds (it measures; the lead reads).  Not part of any test suite.
"""

import argparse
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "harness"))
sys.path.insert(0, os.path.join(ROOT, "bench"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="a candidate's time against where its first input lies")
    ap.add_argument("--kernelbench", default=os.environ.get("KGYM_KERNELBENCH"),
                    help="KernelBench folder holding level1/ (default $KGYM_KERNELBENCH)")
    ap.add_argument("--task", default="level1/19", help="a task file or KernelBench id (level1/19)")
    ap.add_argument("--candidate", default="tests/kernelbench/level1/19_relu/honest.py", help="ModelNew's file")
    ap.add_argument("--calls", type=int, default=30, help="timed calls a placement (30)")
    args = ap.parse_args(argv)

    import torch
    import triton.testing

    from do_bench_agreement import import_candidate, resolve_task
    from kgym_harness.judge import tasks
    from kgym_harness.shared import cudashare, models, timing, transport

    if not torch.cuda.is_available():
        print("placement_probe.py: no CUDA device", file=sys.stderr)
        return 2
    task = tasks.load_task(resolve_task(args.task, args.kernelbench))
    base = tasks.make_variants(task, "cuda", None, base_seed=42)[0]
    init, inputs = tasks.build(task, base, "cuda")
    x = inputs[0]
    nbytes = x.numel() * x.element_size()
    model = models.construct(import_candidate(args.candidate).ModelNew, init, base.seed, "cuda")
    flusher = timing.L2Flusher()
    block = cudashare.Block.create(nbytes + (4 << 20))
    raw = block.bytes()
    placed = transport._layout([x], guard=transport.GUARD)[0][0]["offset"]

    def in_block(offset):
        t = raw[offset:offset + nbytes].view(x.dtype).view(x.shape)
        t.copy_(x)
        return t

    def median_ms(arg):
        times = []
        for _ in range(args.calls):
            stream_ms, _device_ms, out = timing.event_timed(model, [arg, *inputs[1:]], flusher, None)
            times.append(stream_ms)
            del out
        return statistics.median(times)

    print(f"placement_probe.py: {torch.cuda.get_device_name()}, {args.task}, input {tuple(x.shape)} {x.dtype} "
          f"({nbytes / 2**30:.2f} GiB); _placement puts it at +{placed} B", file=sys.stderr)
    rows = [("allocator", x), ("block +0", in_block(0)), ("block +256 B", in_block(256)),
            ("block +4 KiB", in_block(4096)), (f"block +{placed} B (_placement)", in_block(placed))]
    first = None
    with torch.no_grad():
        model(*inputs)
        torch.cuda.synchronize()
        for name, arg in rows:
            ms = median_ms(arg)
            db = triton.testing.do_bench(lambda: model(arg, *inputs[1:]), rep=300, return_mode="median")
            first = first or ms
            print(f"{name:32s} event_timed {ms:9.4f} ms   do_bench {db:9.4f} ms   x{ms / first:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
