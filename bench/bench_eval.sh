#!/bin/sh
# Evaluation throughput: kgym bench over a set of (task, candidate) pairs, then
# evaluations per hour and where the time goes (mean milliseconds per stage).
#   sh bench/bench_eval.sh [DIR | --jsonl FILE] [kgym bench flags...]
# Default: the bundled examples on the best device present.  Prints its figures;
# nothing is asserted (speed targets live here, not in tests).
cd "$(dirname "$0")/.."
KGYM=${KGYM_BIN:-build/kgym}
PY=${KGYM_PYTHON:-.venv/bin/python}
[ $# -eq 0 ] && set -- examples
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$KGYM" bench "$@" --json >"$out" || exit 1
"$PY" - "$out" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
s = doc["summary"]
print(f"device            {s['device']}")
print(f"pairs             {s['pairs']} ({s['evaluated']} evaluated)")
print(f"wall              {s['wall_s']:.1f} s")
print(f"evaluations/hour  {s['evaluations_per_hour']:.0f}")
print(f"verdicts          " + ", ".join(f"{k} {v}" for k, v in s["verdicts"].items() if v))
stages, walls = {}, []
for e in doc["results"]:
    r = e.get("result")
    if not r:
        continue
    walls.append(r["wall_ms"])
    for st in r["stages"]:
        stages.setdefault(st["name"], []).append(st["ms"])
if walls:
    walls.sort()
    print(f"per evaluation    mean {sum(walls)/len(walls):.0f} ms, median {walls[len(walls)//2]:.0f} ms, max {walls[-1]:.0f} ms")
    print("mean ms by stage  " + ", ".join(f"{k} {sum(v)/len(v):.0f}" for k, v in stages.items()))
PYEOF
