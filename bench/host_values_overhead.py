#!/usr/bin/env python3
"""What the runner's host-value recorder (guards.HostValueRecorder, a TorchFunctionMode around forward) costs an
honest candidate on the CPU: each honest pair of tests/honest.jsonl at the judge's tiny sizes, called through
Guards.call with the recorder on and off (the policy's host_values "off"), alternating, best and median of N.

    TRITON_INTERPRET=1 python3 bench/host_values_overhead.py [--jsonl tests/honest.jsonl] [--reps 15]
                                                             [--kernelbench ../shared/kernelbench] [--budget 4096]

Prints one JSON line per pair: {"candidate", "off_ms", "on_ms", "delta_ms", "torch_calls"} (medians; torch_calls:
how many torch functions and Tensor methods went through the mode in one forward, launches included), then a
summary line.  Run it on an idle machine: a busy one adds more noise than the recorder costs.
"""

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TRITON_INTERPRET", "1")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "harness"))

import torch  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402

from kgym_harness.judge import policy, tasks  # noqa: E402
from kgym_harness.runner import guards, runner  # noqa: E402
from kgym_harness.shared.models import construct  # noqa: E402


class Count(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jsonl", default=os.path.join(ROOT, "tests", "honest.jsonl"))
    ap.add_argument("--kernelbench", default=os.path.join(ROOT, "..", "shared", "kernelbench"))
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--budget", type=int, default=4096)
    a = ap.parse_args()
    runner._autotune_without_benchmark()  # as the CPU runner does: the interpreter has no driver to benchmark with
    on_policy = policy.load_default()
    off_policy = json.loads(json.dumps(on_policy))
    off_policy["findings"]["host_values"] = "off"
    deltas, ratios = [], []
    for i, line in enumerate(open(a.jsonl)):
        entry = json.loads(line)
        task_path = entry.get("task") or os.path.join(a.kernelbench, *_kb_path(a.kernelbench, entry["kernelbench"]))
        row = {"candidate": entry["candidate"]}
        try:
            task = tasks.load_task(os.path.join(ROOT, task_path) if entry.get("task") else task_path)
            cand = load(os.path.join(ROOT, entry["candidate"]), f"kgym_candidate_{i}")
            variant = tasks.Variant("tiny", tasks.plan_sizes(task, a.budget), 42, "none", None, "tiny")
            init, inputs = tasks.build(task, variant, "cpu")
            model = construct(cand.ModelNew, init, 42, "cpu")
            g_on, g_off = guards.Guards(on_policy), guards.Guards(off_policy)
            g_on.install()
            g_off.install()
            with torch.no_grad():
                g_off.call(model, list(inputs), "tiny_run", "tiny")  # compiles nothing on the CPU; warms caches
                count = Count()
                with count:
                    model(*inputs)
                on, off = [], []
                for _ in range(a.reps):
                    for g, times in ((g_off, off), (g_on, on)):
                        t0 = time.perf_counter()
                        g.call(model, list(inputs), "tiny_run", "tiny")
                        times.append((time.perf_counter() - t0) * 1e3)
            bad = [f for f in g_on.findings if f["type"] == "host_values"]
            row.update(off_ms=round(statistics.median(off), 3), on_ms=round(statistics.median(on), 3),
                       off_best_ms=round(min(off), 3), on_best_ms=round(min(on), 3), torch_calls=count.n,
                       host_values=bool(bad))
            row["delta_ms"] = round(row["on_ms"] - row["off_ms"], 3)
            deltas.append(row["on_best_ms"] - row["off_best_ms"])
            ratios.append(row["on_best_ms"] / row["off_best_ms"])
        except Exception as exc:  # noqa: BLE001 — a pair that does not run here is reported, not fatal
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        print(json.dumps(row), flush=True)
    if deltas:
        print(json.dumps({"pairs": len(deltas), "median_best_delta_ms": round(statistics.median(deltas), 3),
                          "median_best_ratio": round(statistics.median(ratios), 4),
                          "max_best_ratio": round(max(ratios), 4)}))


def _kb_path(root, name):
    """level1/19 -> (level1, 19_ReLU.py) in a KernelBench checkout."""
    level, number = name.split("/")
    for f in sorted(os.listdir(os.path.join(root, level))):
        if f.split("_", 1)[0] == number and f.endswith(".py"):
            return level, f
    raise FileNotFoundError(name)


if __name__ == "__main__":
    main()
