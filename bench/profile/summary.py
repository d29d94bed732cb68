"""Summary of the judge/runner spans bench/profile/judge_spans.patch writes: one JSON file per evaluation in DIR.

    python3 bench/profile/summary.py DIR

Prints, for the judge and the runner, each span's milliseconds per evaluation, calls per evaluation and
milliseconds per call, largest first."""
import collections
import glob
import json
import os
import sys


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help") or not os.path.isdir(argv[1]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    agg = {"judge": collections.defaultdict(lambda: [0.0, 0]), "runner": collections.defaultdict(lambda: [0.0, 0])}
    n = 0
    for path in sorted(glob.glob(os.path.join(argv[1], "*.json"))):
        try:
            doc = json.load(open(path))
        except (OSError, ValueError) as exc:
            print(f"summary: skipping {path}: {exc}", file=sys.stderr)
            continue
        n += 1
        for role in agg:
            for k, (ms, c) in (doc.get(role) or {}).items():
                agg[role][k][0] += ms
                agg[role][k][1] += c
    if not n:
        print(f"summary: no span files in {argv[1]}", file=sys.stderr)
        return 1
    print(f"{n} evaluations; per evaluation: ms, calls; and ms per call")
    for role, spans in agg.items():
        print(f"== {role}")
        for k, (ms, c) in sorted(spans.items(), key=lambda kv: -kv[1][0]):
            print(f"  {k:30s} {ms / n:9.1f} ms {c / n:7.1f}x {ms / max(c, 1):9.2f} ms/call")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
