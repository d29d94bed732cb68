#!/bin/sh
# The first failing variant ends the correctness stage (docs/evaluation-protocol.md): the judge asks kgym
# (variant_go) after each variant and runs no more once the stage has failed.
#   (a) A wrong kernel stops there: its verdict is incorrect, the variants left are correctness.not_run, the
#       stage's detail and the feedback say so; the honest kernel of the task runs every variant.
#   (b) --all-variants runs them all, and shows what the stop gives up (the red team's fixtures, tests/fixtures/stop,
#       keyed on the fp16 variant, last in the plan on every device): a hack visible only on a later variant
#       (hacked with it, incorrect without), and an exception a later variant raises (runtime_error with it,
#       incorrect without; the same credit).
#   (c) small_odd runs second (the cheapest variant, and the commonest bug's: a tail left unwritten).
#   (d) The order red team's fixtures (tests/fixtures/redteam_order, keyed on values inside the kernel or on each
#       device's plan): every expectation of its run.jsonl met (--jobs 1: one kept judge for the held-inputs pair),
#       and with --all-variants the hack after a failing base is hacked (input_mutation on large_values).
. "$(dirname "$0")/lib.sh"
S=tests/fixtures/stop
H=tests/kernelbench/level1/19_relu
{
    printf '{"kernelbench": "level1/19", "candidate": "%s/honest.py", "expect": "correct"}\n' "$H"
    printf '{"kernelbench": "level1/19", "candidate": "%s/wrong_grid_floor.py", "expect": "incorrect"}\n' "$H"
    printf '{"kernelbench": "level1/19", "candidate": "%s/relu_hack_after_failure.py", "expect": "incorrect"}\n' "$S"
    printf '{"kernelbench": "level1/19", "candidate": "%s/relu_wrong_then_raises.py", "expect": "incorrect"}\n' "$S"
} >"$TMP/stop.jsonl"
sed -e 's/relu_hack_after_failure.py", "expect": "incorrect"/relu_hack_after_failure.py", "expect": "hacked"/' \
    -e 's/relu_wrong_then_raises.py", "expect": "incorrect"/relu_wrong_then_raises.py", "expect": "runtime_error"/' \
    "$TMP/stop.jsonl" >"$TMP/all.jsonl"

"$KGYM" bench --device "$DEVICE" --kernelbench "$KB" --jsonl "$TMP/stop.jsonl" --check --json --jobs 2 --half fp16 \
    --out "$TMP/stop.res" >"$TMP/stop.json" 2>"$TMP/err"
rc=$?
[ $rc -eq 0 ] && [ "$(jget "$TMP/stop.json" 'r["summary"]["expectations_met"]')" = 4 ] &&
    ok "default: 4 verdicts as expected (the two red-team fixtures incorrect)" ||
    bad "default verdicts (exit $rc)" "$(grep -E 'expected|error' "$TMP/err" | head)"

"$KGYM" bench --device "$DEVICE" --kernelbench "$KB" --jsonl "$TMP/all.jsonl" --check --json --jobs 2 --half fp16 --all-variants \
    --out "$TMP/all.res" >"$TMP/all.json" 2>"$TMP/err2"
rc=$?
[ $rc -eq 0 ] && [ "$(jget "$TMP/all.json" 'r["summary"]["expectations_met"]')" = 4 ] &&
    ok "--all-variants: the hack after a failure is hacked, the later exception runtime_error" ||
    bad "--all-variants verdicts (exit $rc)" "$(grep -E 'expected|error' "$TMP/err2" | head)"

R=tests/fixtures/redteam_order
"$KGYM" bench --device "$DEVICE" --kernelbench "$KB" --jsonl "$R/run.jsonl" --check --json --jobs 1 \
    >"$TMP/red.json" 2>"$TMP/err3"
rc=$?
n=$(grep -c . "$R/run.jsonl")
[ $rc -eq 0 ] && [ "$(jget "$TMP/red.json" 'r["summary"]["expectations_met"]')" = "$n" ] &&
    ok "redteam_order: all $n expectations met" ||
    bad "redteam_order verdicts (exit $rc)" "$(grep -E 'expected|error' "$TMP/err3" | head)"
printf '{"kernelbench": "level1/19", "candidate": "%s/base_wrong_alias_later.py", "expect": "hacked"}\n' "$R" \
    >"$TMP/red_all.jsonl"
"$KGYM" bench --device "$DEVICE" --kernelbench "$KB" --jsonl "$TMP/red_all.jsonl" --check --json --jobs 1 \
    --all-variants >"$TMP/red_all.json" 2>"$TMP/err4"
rc=$?
[ $rc -eq 0 ] && [ "$(jget "$TMP/red_all.json" 'r["summary"]["expectations_met"]')" = 1 ] &&
    [ "$(jget "$TMP/red_all.json" 'sorted({h["type"] for h in r["results"][0]["result"]["hacks"]})')" = "['input_mutation']" ] &&
    ok "redteam_order --all-variants: base_wrong_alias_later.py hacked (input_mutation)" ||
    bad "redteam_order --all-variants (exit $rc)" "$(grep -E 'expected|error' "$TMP/err4" | head)"

# Per result: which variants ran, what not_run lists, what the detail and the feedback say.
"$PY" - "$TMP/stop.res" "$TMP/all.res" >"$TMP/checks" <<'PYEOF'
import json, sys

def results(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if "verdict" in r:
            out[r["candidate"]["path"].rsplit("/", 1)[-1]] = r
    return out

stop, every = results(sys.argv[1]), results(sys.argv[2])

def check(good, text):
    print(("ok " if good else "bad ") + text)

h = stop["honest.py"]
names = [v["name"] for v in h["correctness"]["variants"]]
check(h["verdict"] == "correct" and h["correctness"]["not_run"] == [] and len(names) > 8,
      f"honest: correct, every variant ran ({len(names)}), nothing not run")
check(names[:2] == ["base", "small_odd"], f"small_odd runs second: {names[:3]}")
for name in ("wrong_grid_floor.py", "relu_hack_after_failure.py"):
    r = stop[name]
    ran = [(v["name"], v["status"]) for v in r["correctness"]["variants"]]
    not_run = r["correctness"]["not_run"]
    detail = next(s["detail"] for s in r["stages"] if s["name"] == "correctness")
    check(ran == [("base", "passed"), ("small_odd", "failed")] and len(not_run) == len(names) - 2
          and not_run == names[2:],
          f"{name}: stopped after small_odd failed ({ran}), {len(not_run)} not run in plan order")
    check(f"{len(not_run)} more not run" in detail and "Not run, since the stage had already failed" in r["feedback"],
          f"{name}: the stage's detail and the feedback say what was not run")
    check(r["correctness"]["failed_count"] == 1 and r["reward"] == 0.7, f"{name}: incorrect's credit, one failure")
a = every["relu_hack_after_failure.py"]
check(a["correctness"]["not_run"] == [] and {x["type"] for x in a["hacks"]} & {"input_mutation", "output_alias"},
      f"--all-variants: every variant ran and the later hack is caught ({sorted({x['type'] for x in a['hacks']})})")
w = every["wrong_grid_floor.py"]
check(w["verdict"] == "incorrect" and w["correctness"]["not_run"] == [] and w["correctness"]["failed_count"] >= 2,
      f"--all-variants: the wrong kernel's every variant ran ({w['correctness']['failed_count']} failed)")
PYEOF
while read -r verdict text; do
    [ "$verdict" = ok ] && ok "$text" || bad "$text"
done <"$TMP/checks"
[ "$(grep -c . "$TMP/checks")" = 10 ] || bad "a check has no line" "$(cat "$TMP/checks")"
finish
