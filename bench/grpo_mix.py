"""A GRPO-shaped evaluation mix: N tasks x 8 samples, as an RL step submits them.

    python3 bench/grpo_mix.py OUT_DIR [--tasks N] [--samples K] [--source LIST]...

Writes OUT_DIR/mix.jsonl (one `kgym bench` pair a line) and the samples' files under OUT_DIR/samples/.  A group is
one KernelBench task of tests/kernelbench/level1.jsonl and level2.jsonl (the first N tasks with two or more test
candidates, taken from the two files in turn, so level-1 and level-2 tasks alternate) and its K samples
(default 8): sample k is the task's candidate k mod (number of candidates) (the honest one first, then the wrong
ones), with a line naming the sample appended, so that samples differ in bytes as a policy's samples do; the last
two samples are exact twins of samples 0 and 1 (the same bytes: a policy repeats itself).  With three candidates
a group holds 3 honest samples of 8 (two of them twins); with two, 4 of 8.  Groups are listed one after another,
as a trainer submits a step's batch.  Deterministic: the same repository gives the same mix.  --source LIST
(repeatable) takes the groups from other `kgym bench` lists instead, grouped by their "kernelbench" id or "task"
file (bench/fleet_cpu.jsonl: the bundled examples, small enough for the CPU).
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SOURCES = ("tests/kernelbench/level1.jsonl", "tests/kernelbench/level2.jsonl")


def read_groups(path):
    groups = {}
    with open(os.path.join(ROOT, path)) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                pair = json.loads(line)
                field = "kernelbench" if "kernelbench" in pair else "task"
                task, cand = (field, pair[field]), pair["candidate"]
            except (ValueError, KeyError, TypeError) as exc:
                raise SystemExit(f"grpo_mix: {path}:{n}: not a kgym bench pair ({exc})")
            groups.setdefault(task, []).append((cand, pair.get("expect")))
    # The honest candidate first: sample 0 (and its twin) is the one a trained policy repeats.
    return [(t, sorted(c, key=lambda x: x[1] != "correct")) for t, c in groups.items() if len(c) >= 2]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="folder for mix.jsonl and samples/ (made if missing)")
    ap.add_argument("--tasks", type=int, default=8, help="groups (tasks), default 8")
    ap.add_argument("--samples", type=int, default=8, help="samples a group, default 8 (at least 3)")
    ap.add_argument("--source", action="append", metavar="LIST",
                    help="a kgym bench list to take the groups from (repeatable; default: the KernelBench test lists)")
    a = ap.parse_args(argv)
    if a.tasks < 1 or a.samples < 3:
        ap.error("--tasks must be at least 1 and --samples at least 3")
    lists = [read_groups(p) for p in (a.source or SOURCES)]
    chosen = []
    while len(chosen) < a.tasks and any(lists):
        for lst in lists:
            if lst and len(chosen) < a.tasks:
                chosen.append(lst.pop(0))
    if len(chosen) < a.tasks:
        raise SystemExit(f"grpo_mix: only {len(chosen)} tasks have two or more candidates, asked for {a.tasks}")
    samples_dir = os.path.join(a.out, "samples")
    os.makedirs(samples_dir, exist_ok=True)
    lines = []
    for (field, task), cands in chosen:
        files = []
        for k in range(a.samples):
            if k >= a.samples - 2:  # exact twins of samples 0 and 1
                files.append(files[k - (a.samples - 2)])
                continue
            cand, expect = cands[k % len(cands)]
            with open(os.path.join(ROOT, cand), "rb") as f:
                body = f.read()
            name = f"{os.path.splitext(task)[0].replace('/', '_')}_s{k}.py"
            path = os.path.join(samples_dir, name)
            with open(path, "wb") as f:
                f.write(body + (b"" if body.endswith(b"\n") else b"\n") + f"# grpo sample {k} of {task}\n".encode())
            files.append((path, expect))
        for path, expect in files:
            where = os.path.abspath(os.path.join(ROOT, task)) if field == "task" else task  # a task file from anywhere
            lines.append(json.dumps({field: where, "candidate": os.path.abspath(path), "expect": expect}))
    out = os.path.join(a.out, "mix.jsonl")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"grpo_mix: {len(chosen)} tasks x {a.samples} samples = {len(lines)} pairs -> {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
