#!/usr/bin/env python3
"""Which KernelBench tasks draw random numbers in their reference's forward, and what kgym does with each
(harness/kgym_harness/judge/tasks.py forward_randomness; docs/evaluation-protocol.md, "Random references").

    KGYM_PYTHON=... $KGYM_PYTHON scripts/random_tasks.py [KERNELBENCH_DIR] [--all]

Runs each reference of level1-3 twice at tiny sizes on the CPU, on the same inputs and weights with different
random states, under a recorder of the operators that draw random numbers.  Prints one line per task that is
not "none" (every task with --all): handling, task, the operators and the reason; then a count per handling.
"""
import collections
import glob
import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))

from kgym_harness.judge import tasks  # noqa: E402


def main(argv):
    show_all = "--all" in argv
    args = [a for a in argv if a != "--all"]
    root = args[0] if args else os.environ.get("KGYM_KERNELBENCH", "../shared/kernelbench")
    files = sorted(glob.glob(os.path.join(root, "level[123]", "*.py")))
    if not files:
        print(f"no KernelBench tasks under {root}", file=sys.stderr)
        return 2
    counts = collections.Counter()
    warnings.simplefilter("ignore")
    for i, path in enumerate(files):
        rel = os.path.relpath(path, root)
        try:
            m = tasks.load_task(path, f"kgym_random_scan_{i}")
            found = tasks.forward_randomness(m, "cpu", budget=4096, last_budget=65536)  # as a CPU evaluation
            handling, detail = found["handling"], found["reason"] or ""
            if found["ops"]:
                detail = ", ".join(f"{k} x{n}" for k, n in sorted(found["ops"].items())) + ("; " + detail if detail
                                                                                           else "")
        except Exception as exc:  # noqa: BLE001 — reported per task, the scan goes on
            handling, detail = "unknown", f"{type(exc).__name__}: {str(exc)[:200]}"
        counts[handling] += 1
        if show_all or handling != "none":
            print(f"{handling}\t{rel}\t{detail}", flush=True)
    print("\n" + ", ".join(f"{k}: {n}" for k, n in sorted(counts.items())) + f" (of {len(files)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
