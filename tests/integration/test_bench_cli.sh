#!/bin/sh
# kgym bench: a crash, a hang and a flood in one run do not disturb the
# evaluations after them; the bundled examples meet their expectations.
. "$(dirname "$0")/lib.sh"
C=tests/fixtures/candidates
T=tests/fixtures/tasks/add_one.py
{
    for c in segfault ok hang ok flood ok protocol_garbage ok exit_early ok; do
        # Garbage on the judge's socket is the candidate writing on the harness's channel: protocol_forgery.
        case $c in ok) e=correct ;; hang) e=timeout ;; protocol_garbage) e=hacked ;; *) e=runtime_error ;; esac
        printf '{"task": "%s", "candidate": "%s/%s.py", "expect": "%s"}\n' "$T" "$C" "$c" "$e"
    done
} >"$TMP/pairs.jsonl"
# The dying fixtures use ctypes/os._exit/os.write: reward hacks to the default policy, demoted to warnings
# here because this test is about surviving them.
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/pairs.jsonl" --jobs 1 --check --json \
    --policy tests/fixtures/hacks/runtime_only.json --stage-timeout tiny_run=5 --out "$TMP/results.jsonl" >"$TMP/bench.json" 2>"$TMP/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(jget "$TMP/bench.json" 'r["summary"]["expectations_met"]')" = "10" ]; then
    ok "crash, hang, flood, garbage, exit: each its verdict, the next evaluation unaffected"
else bad "bench of deaths (exit $rc)" "$(cat "$TMP/err"; head -c 2000 "$TMP/bench.json")"; fi
if [ "$(wc -l <"$TMP/results.jsonl")" -eq 10 ]; then ok "--out writes one JSON line per pair"; else bad "--out"; fi
if [ "$(jget "$TMP/bench.json" 'r["summary"]["verdicts"]["correct"]')" = "5" ]; then ok "summary counts verdicts"; else bad "summary counts"; fi
# The task's mode (whether its reference draws random numbers) is found by the first evaluation of the task and
# kept for the process's next ones (eval.c, task_modes), whatever those candidates do.
cached=$("$PY" -c 'import json, sys
print(" ".join(str(json.loads(l)["task"]["randomness"]["cached"]) for l in open(sys.argv[1])))' "$TMP/results.jsonl" 2>&1)
if [ "$cached" = "False True True True True True True True True True" ]; then
    ok "the task's mode: found by the first evaluation, kept for the other nine"
else bad "task mode kept (task.randomness.cached per pair: $cached)"; fi
TD=tests/fixtures/tasks
printf '{"task": "%s", "candidate": "%s/ok.py", "expect": "correct"}\n' "$TD/add_one_dropout.py" "$C" "$TD/add_one_dropout.py" "$C" \
    "$TD/add_one_noise.py" "$C" "$TD/add_one_noise.py" "$C" >"$TMP/modes.jsonl"
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/modes.jsonl" --jobs 1 --json --out "$TMP/modes.out" >"$TMP/modes.json" 2>"$TMP/err"
modes=$("$PY" -c 'import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)  # a result, or an entry saying why the pair has none
    if "schema" in r:
        print(r["verdict"], r["task"]["randomness"]["handling"], r["task"]["randomness"]["cached"])
    else:
        print("refused", "random" in r["error"] and "randn_like" in r["error"])' "$TMP/modes.out" 2>&1 | tr "\n" " ")
if [ "$modes" = "correct dropout_as_identity False correct dropout_as_identity True refused True refused True " ]; then
    ok "a kept mode is the mode: dropout judged off again, a random reference refused again (operator named)"
else bad "kept modes ($modes)" "$(cat "$TMP/err")"; fi
# Fault injection: a judge that, after loading the candidate, asks again and reports another mode ("none" for the
# dropout task) is not heard: kgym takes the mode once, before the first stage (a red-team review's finding).
mkdir -p "$TMP/late" && cp -r harness policy "$TMP/late/" # the harness reads ../policy
"$PY" - "$TMP/late/harness/kgym_harness/judge/child.py" <<'PYEOF'
import sys
p = sys.argv[1]
s = open(p).read()
anchor = '        return "", {"tiny_sizes": sizes}\n'
assert s.count(anchor) == 1
late = ('        import torch\n'
        '        self.chan.request({"type": kinds.MSG_TASK_MODE_LOOKUP, "torch": torch.__version__})\n'
        '        self.chan.request({"type": kinds.MSG_TASK_MODE, "handling": "none", "ops": {}, "modules": [],\n'
        '                           "drew": False, "differs": False, "reason": "late", "cached": False})\n')
open(p, "w").write(s.replace(anchor, late + anchor))
PYEOF
[ $? -eq 0 ] || bad "the fault injection (a late task mode) no longer applies to judge/child.py: update its anchor"
printf '{"task": "%s", "candidate": "%s/ok.py", "expect": "correct"}\n' "$TD/add_one_dropout.py" "$C" "$TD/add_one_dropout.py" "$C" \
    "$TD/add_one_dropout.py" "$C" >"$TMP/late.jsonl"
"$KGYM" bench --device "$DEVICE" --harness "$TMP/late/harness" --jsonl "$TMP/late.jsonl" --jobs 1 --json \
    --out "$TMP/late.out" >"$TMP/late.json" 2>"$TMP/err"
late=$("$PY" -c 'import json, sys
print(" ".join(r["verdict"] + ":" + r["task"]["randomness"]["handling"] for r in map(json.loads, open(sys.argv[1]))))' "$TMP/late.out" 2>&1)
if [ "$late" = "correct:dropout_as_identity correct:dropout_as_identity correct:dropout_as_identity" ]; then
    ok "a mode reported after the first stage is not kept for the task's later evaluations"
else bad "late mode ($late)" "$(cat "$TMP/err")"; fi

# Held reference outputs (judge/child.py _Held): a judge kept for its task's next evaluations runs no reference on a
# variant it ran before; it hands the candidate the inputs it copied before anything could touch them.  First a
# candidate that zeroes, after answering, every correctness input it was given (the blocks its judge holds from),
# and again in the middle: the honest evaluations after it, in the same judge with the held inputs and outputs, are
# correct, with the same facts as each other.  (Holding the blocks' own views instead fails here: checked.)
printf '{"task": "%s", "candidate": "%s"}\n' "$T" "$C/mutate_checked_inputs.py" "$T" "$C/ok.py" "$T" "$C/ok.py" \
    "$T" "$C/mutate_checked_inputs.py" "$T" "$C/ok.py" >"$TMP/held.jsonl"
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/held.jsonl" --jobs 1 --json --policy tests/fixtures/hacks/runtime_only.json \
    --out "$TMP/held.out" >"$TMP/held.json" 2>"$TMP/err"
held=$("$PY" -c 'import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
src = [sorted({v.get("reference_source") for v in (r.get("correctness") or {}).get("variants", [])
               if v["status"] != "skipped"}) for r in rs]
facts = [[(v["name"], v["status"], v.get("max_abs_error"), v.get("mismatches"), v.get("atol"))
          for v in (r.get("correctness") or {}).get("variants", [])] for r in rs]
print(" ".join(r["verdict"] for r in rs), len({r["process"]["pid"] for r in rs}) == 1, src[2], src[4],
      facts[1] == facts[2] == facts[4], bool(facts[1]))' "$TMP/held.out" 2>&1)
if [ "$held" = "hacked correct correct hacked correct True ['held'] ['held'] True True" ]; then
    ok "held reference outputs: later evaluations of a task reuse them, an input mutator before them changes nothing"
else bad "held reference outputs ($held)" "$(tail -5 "$TMP/err")"; fi
# Red team (held reference outputs): one task file's bytes in two folders, each reading its constant from the file
# next to it (one/: +1, what ok.py computes; two/: +2).  kgym keeps a judge by the bytes alone, so one judge serves
# both; held outputs keyed by the bytes alone judged ok.py correct on two/ against one/'s reference (a fresh judge:
# incorrect).  The held outputs' key holds where the task lies as well.
L=tests/fixtures/tasks/held_location
printf '{"task": "%s", "candidate": "%s"}\n' "$L/one/task.py" "$C/ok.py" "$L/two/task.py" "$C/ok.py" >"$TMP/held_loc.jsonl"
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/held_loc.jsonl" --jobs 1 --claim-order fifo --json \
    --out "$TMP/held_loc.out" >"$TMP/held_loc.json" 2>"$TMP/err"
held_loc=$("$PY" -c 'import json, sys
rs = {json.loads(l)["task"]["path"].split("/")[-2]: json.loads(l) for l in open(sys.argv[1])}
print(rs["one"]["verdict"], rs["two"]["verdict"], rs["two"]["process"]["judge_served"])' "$TMP/held_loc.out" 2>&1)
if [ "$held_loc" = "correct incorrect 1" ]; then
    ok "held reference outputs: the same task bytes in another folder are another task (one kept judge, none reused)"
else bad "held reference outputs across task folders ($held_loc)" "$(tail -5 "$TMP/err")"; fi

# Judges kept between evaluations (supervisor.c "stays", docs/protocol.md): in the run of deaths above (--jobs 1,
# warm pairs) later evaluations ran in judges that had served earlier ones, each with a new runner; a judge whose
# evaluation ended in a death (its runner crashed, hung, flooded, wrote garbage, exited) served nothing after it.
kept=$("$PY" -c 'import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
seen, dead, bad = set(), set(), []
for i, r in enumerate(rs):
    p = r["process"]
    pid, served = p["pid"], p["judge_served"]
    if pid in dead: bad.append(f"{i}: judge {pid} reused after a death")
    if (served > 0) != (pid in seen): bad.append(f"{i}: judge_served {served}, seen {pid in seen}")
    seen.add(p["pid"])
    if r["verdict"] != "correct": dead.add(p["pid"])
print(sum(r["process"]["judge_served"] > 0 for r in rs), bad)' "$TMP/results.jsonl" 2>&1)
case $kept in [1-9]*" []") ok "judges kept between evaluations ($kept): never one whose evaluation ended in a death" ;;
*) bad "kept judges ($kept)" ;; esac
# Fault injection: a judge that writes a line after its "done" (here half a second later, a harness bug) is not kept
# after that: a line with its previous job's nonce is dropped wherever it comes (supervisor.c stale_nonce; pair.c
# take_idle and warm_one before a job), never read as the next job's (a forgery there: hacked), so each judge serves
# at most two evaluations and every verdict stands.
mkdir -p "$TMP/after" && cp -r harness policy "$TMP/after/"
"$PY" - "$TMP/after/harness/kgym_harness/judge/child.py" <<'PYEOF'
import sys
p = sys.argv[1]
s = open(p).read()
anchor = '    chan.send(dict({"type": kinds.MSG_DONE, "stays": stays}, **({"task_sha256": task_sha256} if stays else {})))\n'
assert s.count(anchor) == 1
after = ('    time.sleep(0.5)\n'
         '    chan.send({"type": kinds.MSG_STAGE, "stage": "parse", "status": "begin"})\n')
open(p, "w").write(s.replace(anchor, anchor + after))
PYEOF
[ $? -eq 0 ] || bad "the fault injection (a line after done) no longer applies to judge/child.py: update its anchor"
printf '{"task": "%s", "candidate": "%s/ok.py", "expect": "correct"}\n' "$T" "$C" "$T" "$C" "$T" "$C" "$T" "$C" >"$TMP/after.jsonl"
"$KGYM" bench --device "$DEVICE" --harness "$TMP/after/harness" --jsonl "$TMP/after.jsonl" --jobs 1 --json \
    --out "$TMP/after.out" >"$TMP/after.json" 2>"$TMP/err"
after=$("$PY" -c 'import json, sys
print(" ".join(r["verdict"] + ":" + str(min(r["process"]["judge_served"], 1)) for r in map(json.loads, open(sys.argv[1]))))' "$TMP/after.out" 2>&1)
case $after in *correct:1*) ;; *) after="$after (no judge was kept at all: the stale line was never met)" ;; esac
if [ "$(echo "$after" | tr ' ' '\n' | sed 's/:[01]$//' | sort -u)" = "correct" ] &&
    "$PY" -c 'import json, sys; sys.exit(max(json.loads(l)["process"]["judge_served"] for l in open(sys.argv[1])) > 1)' "$TMP/after.out"; then
    ok "a judge that writes after its done is never given another job"
else bad "a line after done ($after)" "$(cat "$TMP/err")"; fi

# A task whose module changes process-wide state at import (the default dtype) leaves its judge not kept: the honest
# float32 kernels of the evaluations after it are judged as by new judges (red team 9: on the judge it had served
# they were incorrect, 12 of 12 variants).
printf '{"task": "%s", "candidate": "%s", "expect": "correct"}\n' "$TD/add_one_default_f64.py" "$C/ok.py" \
    "$T" "$C/ok_float32_out.py" "$T" "$C/ok_float32_out.py" "$T" "$C/ok_float32_out.py" "$T" "$C/ok_float32_out.py" \
    >"$TMP/f64.jsonl"
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/f64.jsonl" --jobs 1 --json --out "$TMP/f64.out" >"$TMP/f64.json" 2>"$TMP/err"
f64=$("$PY" -c 'import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
first = rs[0]["process"]["pid"]
print(" ".join(r["verdict"] for r in rs), all(r["process"]["pid"] != first for r in rs[1:]),
      "default_dtype" in str(rs[0]["process"]["stderr"]), sum(r["process"]["judge_served"] > 0 for r in rs) > 0)' "$TMP/f64.out" 2>&1)
if [ "$f64" = "correct correct correct correct correct True True True" ]; then
    ok "a judge whose task changed the default dtype is not kept; the later honest float32 kernels are correct"
else bad "a task's process-wide change ($f64)" "$(cat "$TMP/err")"; fi

# A task file that poisons its judge in a way no fingerprint sees (it replaces kgym's comparison): a kept judge
# serves only the task whose bytes it ran, so the wrong kernels of another task after it are judged by other judges
# (red team 9b: 2 of 8 judged correct in the poisoned judge before the judges were keyed by task).
printf '{"task": "%s", "candidate": "%s", "expect": "correct"}\n' "$TD/add_one_patches_compare.py" "$C/ok.py" >"$TMP/poison.jsonl"
for i in 1 2 3 4 5 6; do
    printf '{"task": "%s", "candidate": "%s", "expect": "incorrect"}\n' "$T" "$C/wrong_value.py" >>"$TMP/poison.jsonl"
done
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/poison.jsonl" --jobs 1 --json --out "$TMP/poison.out" >"$TMP/poison.json" 2>"$TMP/err"
poison=$("$PY" -c 'import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
first = rs[0]["process"]["pid"]
print(" ".join(r["verdict"] for r in rs), all(r["process"]["pid"] != first for r in rs[1:]))' "$TMP/poison.out" 2>&1)
if [ "$poison" = "correct incorrect incorrect incorrect incorrect incorrect incorrect True" ]; then
    ok "a judge that ran a task which poisoned its comparison never judges another task"
else bad "a poisoning task ($poison)" "$(cat "$TMP/err")"; fi

# The reference-time cache is a GPU matter: on the CPU bench makes no private folder for it.
mkdir -p "$TMP/rtmp"
if [ "$DEVICE" = cpu ]; then
    TMPDIR="$TMP/rtmp" "$KGYM" bench --device cpu --jsonl "$TMP/pairs.jsonl" --jobs 1 --json --policy tests/fixtures/hacks/runtime_only.json \
        --stage-timeout tiny_run=5 >/dev/null 2>&1
    [ -z "$(ls -A "$TMP/rtmp" | grep kgym-refcache)" ] && ok "bench on the CPU: no reference-cache folder" || bad "reference cache folder on the CPU" "$(ls -A "$TMP/rtmp")"
fi
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/pairs.jsonl" --jobs 1 --reference-cache >/dev/null 2>"$TMP/rc_err"; rc=$?
[ $rc -eq 2 ] && ok "--reference-cache without a value: usage error" || bad "--reference-cache without a value (exit $rc)" "$(cat "$TMP/rc_err")"

"$KGYM" bench --device "$DEVICE" examples --check >"$TMP/ex.txt" 2>"$TMP/err"; rc=$?
if [ $rc -eq 0 ] && grep -q "expectations met" "$TMP/ex.txt"; then
    ok "examples: every correct*.py correct, every wrong*.py not"
else bad "examples (exit $rc)" "$(tail -40 "$TMP/ex.txt"; tail -5 "$TMP/err")"; fi

# --device-memory: evaluations reserve their footprint from the correctness stage on, and one that does not fit
# beside the others waits (here nothing fits beside anything: one byte).  Never two reservations at once.
for i in 1 2 3; do printf '{"task": "%s", "candidate": "%s/ok.py", "expect": "correct"}\n' "$T" "$C"; done >"$TMP/mem.jsonl"
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/mem.jsonl" --jobs 3 --device-memory 1 --check --json \
    >"$TMP/mem.json" 2>"$TMP/err"; rc=$?
if [ $rc -eq 0 ] && [ "$(jget "$TMP/mem.json" 'r["summary"]["gpu_memory"]["capacity_bytes"]')" = "1" ] &&
    [ "$(jget "$TMP/mem.json" 'r["summary"]["gpu_memory"]["peak_reserved_bytes"] == max(x["result"]["gpu_phases"]["reserved_bytes"] for x in r["results"]) > 0')" = "True" ]; then
    ok "--device-memory: one evaluation's reservation at a time when nothing fits beside it"
else bad "--device-memory (exit $rc)" "$(cat "$TMP/err"; head -c 1500 "$TMP/mem.json")"; fi
# Where the run's GPU time went, by the arbiter's state: the states cover the run's wall (nothing counted twice,
# nothing left out), and shared time split by holders adds up to the shared and draining states.  Three jobs that
# may hold one reservation at a time: some of the run had evaluations holding a shared phase, and never more
# holders than jobs and the warmer (pair.c: on a GPU the one warmer thread makes a pair inside a shared phase of
# its own, so three jobs may be four holders; on the CPU it takes none).
if [ "$(jget "$TMP/mem.json" 'abs(sum(r["summary"]["gpu_state_ms"].values()) / 1000 - r["summary"]["wall_s"]) < 0.05 and sorted(r["summary"]["gpu_state_ms"]) == sorted(["idle", "shared", "draining", "handoff", "exclusive"]) and r["summary"]["gpu_state_ms"]["shared"] > 0 and abs(sum(r["summary"]["gpu_shared_holders_ms"]) - r["summary"]["gpu_state_ms"]["shared"] - r["summary"]["gpu_state_ms"]["draining"]) < 1 and sum(r["summary"]["gpu_shared_holders_ms"][4:]) == 0')" = "True" ]; then
    ok "bench summary: the run's wall split by the GPU arbiter's state"
else bad "gpu_state_ms" "$(jget "$TMP/mem.json" '[r["summary"].get(k) for k in ("wall_s", "gpu_state_ms", "gpu_shared_holders_ms")]')"; fi
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/mem.jsonl" --device-memory 0 >/dev/null 2>"$TMP/err"; rc=$?
if [ $rc -eq 2 ] && grep -q -- "--device-memory needs bytes" "$TMP/err"; then ok "a bad --device-memory is named"
else bad "--device-memory 0 (exit $rc)" "$(cat "$TMP/err")"; fi

# --dedup: exact twins (the same task text and candidate bytes, here from two files) are evaluated once through
# the pool's content key: one of pairs 1, 2 and 4 is evaluated, the other two answered with its result (in flight,
# or from the done job at claim), each naming the pair it copied; pair 3 differs by one byte and is evaluated.
{ cat "$C/ok.py"; echo "# sample s"; } >"$TMP/twin_a.py"
cp "$TMP/twin_a.py" "$TMP/twin_b.py"
{ cat "$C/ok.py"; echo "# sample t"; } >"$TMP/near.py"
for c in twin_a twin_b near twin_a; do
    printf '{"task": "%s", "candidate": "%s/%s.py", "expect": "correct"}\n' "$T" "$TMP" "$c"; done >"$TMP/twins.jsonl"
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/twins.jsonl" --jobs 2 --dedup --json --out "$TMP/twins.out" \
    >"$TMP/twins.json" 2>"$TMP/twins.err"; rc=$?
if [ $rc -eq 0 ] && "$PY" - "$TMP/twins.json" "$TMP/twins.out" "$TMP/twins.err" <<'PYEND'
import json, sys
doc = json.load(open(sys.argv[1]))
res, s = doc["results"], doc["summary"]
out = [json.loads(l) for l in open(sys.argv[2])]
err = open(sys.argv[3]).read()
twins = [i for i in (0, 1, 3) if res[i]["cached_from"]]
own = [i for i in (0, 1, 3) if not res[i]["cached_from"]]
assert len(own) == 1 and len(twins) == 2, [r["cached_from"] for r in res]
assert res[2]["cached_from"] is None, res[2]["cached_from"]  # the near-twin: evaluated
for i in twins:
    n = res[i]["cached_from"]["pair"]
    assert n - 1 in (0, 1, 3) and n - 1 != i, (i, n)
    assert res[i]["cached_from"]["label"] == res[n - 1]["label"]
    # The earlier pair's result, unevaluated: identical (verdict, reward, every field).
    assert res[i]["result"] == res[n - 1]["result"], i
    assert res[i]["result"]["verdict"] == "correct" and res[i]["result"]["reward"] == res[own[0]]["result"]["reward"]
    assert f"(twin of pair {n})" in err, err
assert res[2]["result"]["verdict"] == "correct" and res[2]["result"]["candidate"]["path"].endswith("near.py")
assert (s["pairs"], s["answered"], s["evaluated"], s["answered_from_twin"], s["dedup"]) == (4, 4, 2, 2, True), s
assert s["verdicts"]["correct"] == 4, s["verdicts"]  # the verdicts count every pair: they are answers
# --out: the lines come as the pairs end (in another order): the twins' lines name their pairs too.
assert sorted(json.dumps(o["cached_from"], sort_keys=True) for o in out) == \
    sorted(json.dumps(r["cached_from"], sort_keys=True) for r in res), out
PYEND
then ok "--dedup: exact twins answered with an earlier pair's result (cached_from), a near-twin evaluated"
else bad "--dedup (exit $rc)" "$(cat "$TMP/twins.err"; head -c 2000 "$TMP/twins.json")"; fi
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/twins.jsonl" --jobs 2 --dedup >"$TMP/twins.txt" 2>/dev/null; rc=$?
if [ $rc -eq 0 ] && grep -q "^2 evaluations in .*; 4 pairs answered, 2 of them from an earlier exact twin" "$TMP/twins.txt" &&
    [ "$(grep -c "(twin of pair [124])" "$TMP/twins.txt")" -eq 2 ]; then
    ok "--dedup: the summary counts the pairs evaluated and those answered from a twin"
else bad "--dedup summary (exit $rc)" "$(cat "$TMP/twins.txt")"; fi
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/twins.jsonl" --jobs 2 --json >"$TMP/nodedup.json" 2>/dev/null; rc=$?
got=$(jget "$TMP/nodedup.json" '(r["summary"]["evaluated"], r["summary"]["answered_from_twin"], [e["cached_from"] for e in r["results"]])')
if [ $rc -eq 0 ] && [ "$got" = "(4, 0, [None, None, None, None])" ]; then
    ok "without --dedup every pair is evaluated"
else bad "without --dedup (exit $rc)" "$(head -c 1500 "$TMP/nodedup.json")"; fi

# Expectations that fail make --check exit 3.
printf '{"task": "%s", "candidate": "%s/wrong_value.py", "expect": "correct"}\n' "$T" "$C" >"$TMP/fail.jsonl"
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/fail.jsonl" --check >/dev/null 2>&1; rc=$?
if [ $rc -eq 3 ]; then ok "--check exits 3 on an unmet expectation"; else bad "--check exit $rc"; fi
# Warm pairs (--warm 1, one job): an error candidate that follows two honest evaluations takes the pair warmed
# meanwhile.  Its traceback frames, the judge's (a syntax error) and the runner's (an exception in forward), name
# its file in the pair's own workdir and must still be kept as the candidate's.  Every pair is of a task of its own
# (add_one.py in other bytes): a task with a judge kept for it takes that judge before a warm pair, and the warmer
# makes its pair with a judge kept for the last job's task where one is idle (pair.c), a pair only that task's jobs
# take.  With tasks used once, no judge is ever kept for a later job's task: the warm pair is always a new one
# (on a GPU, where evaluations last longer, the honest jobs sharing one task left the error candidates cold).
for t in a b c d e f; do { cat "$T"; echo "# task $t"; } >"$TMP/add_one_$t.py"; done
for c in ok:a ok:b syntax_error:c ok:d ok:e raise_in_forward:f; do
    c="${c%%:*}:$TMP/add_one_${c#*:}.py"
    printf '{"task": "%s", "candidate": "%s/%s.py"}\n' "${c#*:}" "$C" "${c%%:*}"; done >"$TMP/warm.jsonl"
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/warm.jsonl" --jobs 1 --warm 1 --claim-order fifo --out "$TMP/warm.out" >/dev/null 2>&1
if "$PY" - "$TMP/warm.out" >"$TMP/warm.why" 2>&1 <<'PYEND2'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
errs = [r for r in rows if r["verdict"] != "correct"]
assert [r["verdict"] for r in errs] == ["invalid", "runtime_error"], [(r["verdict"], r["error"]) for r in rows]
for r in errs:
    assert r["process"]["warm"], r["process"]
    assert r["error"]["frames"] and r["error"]["frames"][0]["file"] == "candidate.py", r["error"]
PYEND2
then ok "warm pairs: the judge's and the runner's traceback frames are kept as the candidate's"
else bad "warm pairs lose traceback frames" "$(tail -c 3000 "$TMP/warm.why")"; fi
printf '{"task": "%s"}\n' "$T" >"$TMP/badline.jsonl"
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/badline.jsonl" >/dev/null 2>"$TMP/err"; rc=$?
if [ $rc -eq 2 ] && grep -q "line 1" "$TMP/err"; then ok "a bad JSONL line is named"; else bad "bad JSONL (exit $rc)" "$(cat "$TMP/err")"; fi
finish
