#!/bin/sh
# How outputs are compared (docs/evaluation-protocol.md, "Tolerances" and "Input structure").
#   (a) Never vacuous: a softmax over long rows has outputs far below an absolute 1e-4.  A one-pass softmax whose
#       denominator is estimated from 4,096 samples (off by ~0.5% everywhere) passed that; it fails base now, by
#       the relative check below the floor (not by atol), and the result and feedback say the output is below
#       the floor.  An honest softmax passes with no relative mismatch.
#   (b) Structure kept: level1/14's honest kernel skips the zero triangle and is correct; the result lists the
#       structure and the signed variant's description says it was kept.
. "$(dirname "$0")/lib.sh"
T=tests/fixtures/tasks/long_row_softmax.py
for k in honest wrong_sampled_denominator; do
    "$KGYM" eval --device "$DEVICE" --task "$T" --kernel tests/kernelbench/level1/23_softmax/$k.py --json \
        >"$TMP/$k.json" 2>"$TMP/err"
done
if [ "$(jget "$TMP/wrong_sampled_denominator.json" '[(v["status"], v["mismatches"], v["relative_mismatches"] > 0.5 * v["elements"],
        v["tolerance"]["below_floor"], "below the absolute floor" in v["reason"])
        for v in r["correctness"]["variants"] if v["name"] == "base"] == [("failed", 0, True, True, True)]
        and r["verdict"] == "incorrect" and "below the absolute floor" in r["feedback"]')" = "True" ]
then ok "sampled softmax denominator: base fails the relative check below the floor (no element beyond atol)"
else bad "sampled softmax denominator" "$(cat "$TMP/err"; jget "$TMP/wrong_sampled_denominator.json" 'r["verdict"], [(v["name"], v["status"], v["reason"][:160]) for v in r["correctness"]["variants"]]')"; fi
if [ "$(jget "$TMP/honest.json" 'r["verdict"] == "correct" and [(v["tolerance"]["below_floor"], v["relative_mismatches"])
        for v in r["correctness"]["variants"] if v["name"] == "base"] == [(True, 0)]')" = "True" ]
then ok "honest softmax over long rows: correct, no relative mismatch below the floor"
else bad "honest long-row softmax" "$(cat "$TMP/err"; jget "$TMP/honest.json" 'r["verdict"], r["feedback"]')"; fi
if [ -d "$KB/level1" ]; then
    "$KGYM" eval --device "$DEVICE" --kernelbench "$KB" --task level1/14 \
        --kernel tests/kernelbench/level1/14_upper_triangular_matmul/honest.py --json >"$TMP/triu.json" 2>"$TMP/err"
    if [ "$(jget "$TMP/triu.json" 'r["verdict"] == "correct" and
            [s["kinds"] for s in r["input_structure"]] == [["zero_lower"], ["zero_lower"]] and
            [v["status"] for v in r["correctness"]["variants"] if v["name"] in ("signed", "offset")] == ["passed"] * 2 and
            all("structure kept: input 0 upper triangular, input 1 upper triangular" in v["description"]
                for v in r["correctness"]["variants"] if v["name"] in ("signed", "mixed_large", "offset", "small_odd"))')" = "True" ]
    then ok "level1/14: a kernel that skips the zero triangle is correct; every variant kept the triangles"
    else bad "level1/14 structure" "$(cat "$TMP/err"; jget "$TMP/triu.json" 'r["verdict"], r.get("input_structure"), [(v["name"], v["status"]) for v in r["correctness"]["variants"]]')"; fi
else
    bad "no KernelBench checkout at $KB (set KGYM_KERNELBENCH)"
fi
finish
