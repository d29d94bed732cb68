#!/bin/sh
# Correctness coverage (value ranges, degenerate tasks, time bounds).
#   (a) Honest-but-wrong kernels (tests/fixtures/ranges/, MANIFEST.tsv) that are exact for KernelBench's
#       [0, 1) inputs: each is `incorrect`, fails the variant of its bug class (a value range, or small_odd's
#       signed odd sizes), passes base, and the feedback names that variant; honest kernels of the same tasks
#       stay `correct`; small_odd falls back to the task's own inputs where its reference is NaN on signed ones.
#   (b) Degenerate tasks: level2/9 (a ReLU of values that are all negative on its own inputs) is repaired by
#       the value-range variants, so an all-zero kernel fails; level2/80 is zero by algebra, so no kernel
#       passes it and the feedback blames the task; level2/23 (zero on its timed weights) is refused too.
#   (c) Time bounds: a candidate stuck outside every stage is killed by the outside-stages limit, one that
#       hard-codes the task's full shapes by its stage limit; neither is correct, both end within the sum
#       of their limits plus a margin.
. "$(dirname "$0")/lib.sh"
R=tests/fixtures/ranges
M=$R/MANIFEST.tsv
tail -n +2 "$M" | while IFS="$(printf '\t')" read -r f t v m; do
    printf '{"task": "%s", "candidate": "%s/%s", "expect": "%s"}\n' "$t" "$R" "$f" "$v"
done >"$TMP/pairs.jsonl"
for h in h16_logsumexp_max_shift:row_logsumexp h17_standardize_two_pass:row_standardize \
         h18_l2_normalize_clamped:row_l2_normalize h19_linear_window_max:linear_window_max; do
    printf '{"task": "tests/fixtures/tasks/%s.py", "candidate": "tests/fixtures/honest/%s.py", "expect": "correct"}\n' \
        "${h#*:}" "${h%%:*}"
done >>"$TMP/pairs.jsonl"
[ "$(ls $R/*.py | wc -l)" = "$(tail -n +2 "$M" | wc -l)" ] && ok "MANIFEST.tsv lists every fixture in $R" ||
    bad "MANIFEST.tsv does not match $R/*.py"
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/pairs.jsonl" --check --json --out "$TMP/res.jsonl" \
    >"$TMP/bench.json" 2>"$TMP/err"
rc=$?
n=$(grep -c . "$TMP/pairs.jsonl")
met=$(jget "$TMP/bench.json" 'r["summary"]["expectations_met"]')
if [ $rc -eq 0 ] && [ "$met" = "$n" ]; then ok "$n value-range pairs: verdicts as expected"
else bad "value-range pairs: $met of $n as expected (exit $rc)" "$(grep -E 'expected|error' "$TMP/err" | head)"; fi
# Per fixture: the variant of its bug class failed, base passed, the feedback names the variant.
"$PY" - "$TMP/res.jsonl" "$M" >"$TMP/checks" <<'PYEOF'
import csv, json, sys
want = {row["fixture"]: row["must_fail"] for row in csv.DictReader(open(sys.argv[2]), delimiter="\t")}
for line in open(sys.argv[1]):
    r = json.loads(line)
    name = r["candidate"]["path"].rsplit("/", 1)[-1]
    if name not in want:
        continue
    status = {v["name"]: v["status"] for v in r["correctness"]["variants"]}
    v = want[name]
    good = (r["verdict"] == "incorrect" and status.get(v) == "failed" and status.get("base") == "passed"
            and f"- {v} (" in r["feedback"])
    print(("ok " if good else "bad ") + f"{name}: fails {v} ({status.get(v)}), passes base ({status.get('base')}), "
          f"named in the feedback")
PYEOF
[ "$(grep -c . "$TMP/checks")" = "$(tail -n +2 "$M" | wc -l)" ] || bad "a fixture has no result" "$(cat "$TMP/checks")"
while read -r verdict text; do
    if [ "$verdict" = ok ]; then ok "$text"; else bad "$text"; fi
done <"$TMP/checks"
# small_odd's signed inputs where the reference cannot take them (a square root): the variant runs on the
# task's own inputs at its odd sizes instead of being skipped, and says so; signed and mixed_large are skipped.
# (--budget 131072: at the default budget size_odd has small_odd's sizes, and the fallback would repeat it.)
"$KGYM" eval --device "$DEVICE" --task tests/fixtures/tasks/row_sqrt_sum.py --kernel tests/fixtures/honest/h20_row_sqrt_sum.py \
    --budget 131072 --json >"$TMP/sqrt.json" 2>"$TMP/err"
if [ "$(jget "$TMP/sqrt.json" 'r["verdict"] == "correct" and
        {v["name"]: v["status"] for v in r["correctness"]["variants"]}["signed"] == "skipped" and
        [(v["status"], "reference gives NaN/Inf on signed" in v["description"], v["sizes"]["dim"] % 16 != 0)
         for v in r["correctness"]["variants"] if v["name"] == "small_odd"] == [("passed", True, True)]')" = "True" ]
then ok "small_odd falls back to the task's own inputs where the reference is NaN on signed ones"
else bad "small_odd fallback" "$(cat "$TMP/err"; jget "$TMP/sqrt.json" '[(v["name"], v["status"], v["description"]) for v in r["correctness"]["variants"]]')"; fi
# A Model that reads a module-level size in __init__ (tests/fixtures/tasks/module_size_state.py, as KernelBench's
# level3/33): the reference is built with each variant's sizes (the judge), the candidate too (the runner gives its
# module the same sizes), so the variants of another batch size run and pass instead of being skipped as variants
# whose reference raised (a thin pass on the others before).
"$KGYM" eval --device "$DEVICE" --task tests/fixtures/tasks/module_size_state.py \
    --kernel tests/fixtures/honest/h40_module_size_state.py --json >"$TMP/mss.json" 2>"$TMP/err"
if [ "$(jget "$TMP/mss.json" 'r["verdict"] == "correct" and all(v["status"] == "passed" for v in r["correctness"]["variants"])
        and len({v["sizes"]["batch_size"] for v in r["correctness"]["variants"]}) > 1')" = "True" ]
then ok "a model sized by a module-level constant: built at every variant's sizes on both sides, every variant passed"
else bad "module-level size in __init__" "$(cat "$TMP/err"; jget "$TMP/mss.json" 'r["verdict"], [(v["name"], v["status"], v.get("reason")) for v in r["correctness"]["variants"]]')"; fi
# The red team of that (tests/fixtures/redteam_sizes): top-level code that raises when re-run with another batch
# size fails closed and the feedback names its own line (the input check used to fail the stage with a kgym
# TypeError instead); a module-level record of the re-runs changes nothing; rebinding __file__ is refused.
S=tests/fixtures/redteam_sizes
"$KGYM" eval --device "$DEVICE" --task tests/fixtures/tasks/module_size_state.py --kernel $S/rerun_raises.py --json \
    >"$TMP/rr.json" 2>"$TMP/err"
if [ "$(jget "$TMP/rr.json" 'r["verdict"] == "runtime_error" and r["error"]["type"] == "ValueError" and
        "not my batch size" in r["feedback"] and "line 41" in r["feedback"]')" = "True" ]
then ok "a candidate's top-level code that raises at a variant's sizes: runtime_error, its own line in the feedback"
else bad "rerun_raises" "$(cat "$TMP/err"; jget "$TMP/rr.json" 'r["verdict"], r["error"]')"; fi
for pair in rerun_container_state:incorrect rerun_file_rebind:hacked; do
    f=${pair%%:*} want=${pair#*:}
    "$KGYM" eval --device "$DEVICE" --task tests/fixtures/tasks/module_size_state.py --kernel $S/$f.py --json \
        >"$TMP/$f.json" 2>"$TMP/err"
    [ "$(jget "$TMP/$f.json" 'r["verdict"]')" = "$want" ] && ok "$f: $want" ||
        bad "$f (expected $want)" "$(cat "$TMP/err"; jget "$TMP/$f.json" 'r["verdict"], r["hacks"], r["error"]')"
done
if [ -d "$KB/level2" ]; then
    "$KGYM" eval --device "$DEVICE" --kernelbench "$KB" --task level2/9 --kernel tests/fixtures/candidates/zero_rows.py --all-variants \
        --json >"$TMP/z9.json" 2>"$TMP/err"
    if [ "$(jget "$TMP/z9.json" 'r["verdict"] == "incorrect" and "zero_output" in r["degenerate"] and
            "large_values" in r["degeneracy"]["nonzero_on"] and
            any(v["name"] == "large_values" and v["status"] == "failed" for v in r["correctness"]["variants"])')" = "True" ]
    then ok "level2/9 (zero on its own inputs) is repaired: an all-zero kernel fails large_values"
    else bad "level2/9 all-zero kernel" "$(cat "$TMP/err"; jget "$TMP/z9.json" 'r["verdict"], r["degeneracy"]')"; fi
    "$KGYM" eval --device "$DEVICE" --kernelbench "$KB" --task level2/80 --kernel tests/fixtures/candidates/zero_rows.py \
        --json >"$TMP/z80.json" 2>"$TMP/err"
    if [ "$(jget "$TMP/z80.json" 'r["verdict"] == "incorrect" and r["degeneracy"]["zero_everywhere"] and
            r["correctness"]["failed_count"] == 0 and "the task is degenerate" in r["feedback"]')" = "True" ]
    then ok "level2/80 (zero by algebra): no kernel passes, the feedback blames the task"
    else bad "level2/80" "$(cat "$TMP/err"; jget "$TMP/z80.json" 'r["verdict"], r["degeneracy"], r["feedback"]')"; fi
    # level3/28's reference depends on its weights only (the fifteenth session's red team): a copy of a row computed in __init__ passed
    # every variant while other seeds and sizes counted as input dependence.  The parameters variant (its norms' weights
    # refilled after __init__) fails that copy on its own since the twenty-second session; left out here, so that the
    # degeneracy rule is what this checks.
    "$KGYM" eval --device "$DEVICE" --kernelbench "$KB" --task level3/28 --kernel tests/fixtures/candidates/weights_only_vit.py \
        --variants base,scaled_x2,seed_1,signed,size_small,size_odd,size_large,small_odd,small_values,tiny_values,large_values,mixed_large,offset \
        --json >"$TMP/v28.json" 2>"$TMP/err"
    if [ "$(jget "$TMP/v28.json" 'r["verdict"] == "incorrect" and r["reward"] < 1 and
            r["degeneracy"]["input_independent_everywhere"] and r["degeneracy"]["input_dependent_on"] == [] and
            r["correctness"]["failed_count"] == 0 and "does not depend on the input values" in r["feedback"]')" = "True" ]
    then ok "level3/28 (a function of its weights alone): a weights-only answer is not correct, the feedback blames the task"
    else bad "level3/28 weights only" "$(cat "$TMP/err"; jget "$TMP/v28.json" 'r["verdict"], r["degeneracy"], r["feedback"]')"; fi
    # level2/23 (a mean of group-normalised values) is zero whatever the input with the task's own GroupNorm weights,
    # which timing runs: it stays refused even for its own reference (generated here from ../shared, judged under
    # tests/fixtures/reference_self's policy).  Counting the parameters variant's input dependence as a repair
    # (tried this session) let the red team's kernel pass that skips all its work whenever gamma is constant in each
    # group, as it is on the timed weights (redteam_sizes/gn_gate_l2_23.py): refused too.
    {
        cat "$KB"/level2/23_*.py
        printf '\n\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\ndef _unused(x_ptr):\n    pass\n\n\n'
        printf 'class ModelNew(Model):\n    pass\n'
    } >"$TMP/ref23.py"
    "$KGYM" eval --device "$DEVICE" --kernelbench "$KB" --task level2/23 --kernel "$TMP/ref23.py" \
        --policy tests/fixtures/reference_self/policy.json --json >"$TMP/r23.json" 2>"$TMP/err"
    "$KGYM" eval --device "$DEVICE" --kernelbench "$KB" --task level2/23 --kernel $S/gn_gate_l2_23.py --json \
        >"$TMP/g23.json" 2>"$TMP/err2"
    if [ "$(jget "$TMP/r23.json" 'r["verdict"] == "incorrect" and r["degeneracy"]["input_independent_everywhere"]')" = "True" ] &&
       [ "$(jget "$TMP/g23.json" 'r["verdict"] != "correct" and r["reward"] < 1')" = "True" ]
    then ok "level2/23 (input-independent on its timed weights): refused for its own reference and the red team's gate"
    else bad "level2/23" "$(cat "$TMP/err" "$TMP/err2"; jget "$TMP/r23.json" 'r["verdict"], r["degeneracy"]'; jget "$TMP/g23.json" 'r["verdict"]')"; fi
else
    bad "no KernelBench checkout at $KB (set KGYM_KERNELBENCH)"
fi
# Time bounds.  Stuck outside every stage (the runner's check after the tiny run never answers): the
# outside-stages limit (5 s here) ends it.  Static checks are warnings here (the fixture imports threading).
start=$(date +%s)
"$KGYM" eval --device "$DEVICE" --task tests/fixtures/tasks/add_one.py --kernel tests/fixtures/candidates/stall_between_stages.py \
    --policy tests/fixtures/hacks/runtime_only.json --stage-timeout outside=5 --json >"$TMP/stall.json" 2>"$TMP/err"
took=$(( $(date +%s) - start ))
if [ "$(jget "$TMP/stall.json" 'r["verdict"] == "timeout" and r["process"]["limit_s"] == 5 and
        "outside every stage" in [s for s in r["stages"] if s["status"] == "fail"][0]["detail"]')" = "True" ] &&
   [ "$took" -lt 120 ]; then ok "stuck between stages: killed by the 5 s outside-stages limit, timeout (${took} s)"
else bad "stuck between stages (${took} s)" "$(cat "$TMP/err"; jget "$TMP/stall.json" 'r["verdict"], r["stages"], r["process"]')"; fi
# Hard-coded full shapes (level1/23's 4096 x 393216, whatever the inputs): the tiny run's limit ends it.
if [ -d "$KB/level1" ]; then
    start=$(date +%s)
    "$KGYM" eval --device "$DEVICE" --kernelbench "$KB" --task level1/23 --kernel tests/fixtures/candidates/hard_coded_shapes.py \
        --stage-timeout compile=60 --stage-timeout tiny_run=10 --stage-timeout correctness=10 \
        --stage-timeout outside=20 --json >"$TMP/hard.json" 2>"$TMP/err"
    took=$(( $(date +%s) - start ))
    # parse + static + compile + tiny_run + correctness + outside = 30 + 30 + 60 + 10 + 10 + 20 s, plus 30 s of
    # kgym's own start-up and wind-down
    if [ "$(jget "$TMP/hard.json" 'r["verdict"] != "correct"')" = "True" ] && [ "$took" -le 190 ]; then
        ok "hard-coded full shapes end within their limits: $(jget "$TMP/hard.json" 'r["verdict"]') in ${took} s"
    else bad "hard-coded shapes (${took} s)" "$(cat "$TMP/err"; jget "$TMP/hard.json" 'r["verdict"], r["stages"]')"; fi
fi
finish
