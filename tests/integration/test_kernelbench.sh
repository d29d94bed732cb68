#!/bin/sh
# KernelBench level-1 and level-2 problems kgym has never seen, with honest
# Triton candidates (must be correct) and subtly wrong ones (must not be):
# tests/kernelbench/level{1,2}.jsonl, problems read from ../shared/kernelbench.
. "$(dirname "$0")/lib.sh"
if [ ! -d "$KB/level1" ]; then
    echo "no KernelBench checkout at $KB (set KGYM_KERNELBENCH)"; bad "KernelBench checkout"; finish; exit
fi
# level1_gpu.jsonl: more of a kind that level1.jsonl already covers on the CPU (the small-elements check's further
# cuts and honest scans: 25 s to nearly 3 minutes each in the interpreter), run where evaluations are cheap, on a
# GPU, so that make test stays under 20 minutes; and what only timing reaches (a cut from a model's fourth call).
manifests="tests/kernelbench/level1.jsonl tests/kernelbench/level2.jsonl"
[ "$DEVICE" != cpu ] && manifests="$manifests tests/kernelbench/level1_gpu.jsonl"
for manifest in $manifests; do
    [ -f "$manifest" ] || continue
    n=$(grep -c . "$manifest")
    "$KGYM" bench --device "$DEVICE" --kernelbench "$KB" --jsonl "$manifest" --check --json \
        >"$TMP/kb.json" 2>"$TMP/err"
    rc=$?
    met=$(jget "$TMP/kb.json" 'r["summary"]["expectations_met"]')
    if [ $rc -eq 0 ] && [ "$met" = "$n" ]; then
        ok "$manifest: $met of $n verdicts as expected"
    else
        bad "$manifest: $met of $n as expected (exit $rc)" "$(grep -E 'expected|error' "$TMP/err" | head -20)"
    fi
    # Each pair gets its own check line, so a regression names the candidate.
    "$PY" - "$TMP/kb.json" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
for e in doc["results"]:
    v = (e.get("result") or {}).get("verdict", "error")
    print(("ok   " if e["expectation_met"] else "FAIL ") + f'{e["label"]}: {v} (expected {e["expect"]})')
PYEOF
done
finish
