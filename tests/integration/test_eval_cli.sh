#!/bin/sh
# kgym eval through the CLI (ASan build) on the fixture task: every verdict,
# every way a candidate can die, raw model replies, exit statuses.
. "$(dirname "$0")/lib.sh"
T=tests/fixtures/tasks/add_one.py
C=tests/fixtures/candidates
# Fixtures that kill their own process (ctypes, os._exit, os.write) are reward hacks to the default policy;
# here they test how kgym survives a dying child, so their static findings are only warnings.
RT=tests/fixtures/hacks/runtime_only.json

# run CANDIDATE [extra flags...]: kgym eval of one fixture, its JSON, stderr and exit status in $TMP/CANDIDATE.*.
# The evaluations are independent, so they run two at a time (the two hangs, which mostly sleep, beside them):
# a third of this suite's time when they ran one after the other.
run() {
    cand=$1; shift
    "$KGYM" eval --device "$DEVICE" --task "$T" --kernel "$C/$cand.py" --json \
        --stage-timeout compile=20 --stage-timeout tiny_run=8 "$@" >"$TMP/$cand.json" 2>"$TMP/$cand.err"
    echo $? >"$TMP/$cand.rc"
}
# expect CANDIDATE VERDICT [PYTHON-CONDITION]: checks what run left.
expect() {
    cand=$1; want=$2; cond=${3:-True}; out="$TMP/$cand.json"
    rc=$(cat "$TMP/$cand.rc" 2>/dev/null)
    got=$(jget "$out" 'r["verdict"]')
    if [ "$rc" = 0 ] && [ "$got" = "$want" ] && [ "$(jget "$out" "$cond")" = "True" ]; then
        ok "eval $cand -> $want"
    else
        bad "eval $cand -> $want (got '$got', exit $rc, condition: $cond)" "$(cat "$TMP/$cand.err"; head -c 1500 "$out")"
    fi
}
run hang & hangs=$!
# A loop at module level is outside the candidate language: the process layer is tested with the runtime-only policy.
run hang_import --policy "$RT" & hangs="$hangs $!"
pair() { # runs two fixtures at once: "name flags..." each
    (set -- $1; run "$@") & a=$!
    (set -- $2; run "$@") & b=$!
    wait $a $b
}
pair ok chatty
pair wrong_value wrong_tail
pair wrong_shape syntax_error
pair no_triton import_error
pair raise_in_forward kernel_error
pair "segfault --policy $RT" "exit_early --policy $RT"
pair "flood --policy $RT" "protocol_garbage --policy $RT"
pair raise_second_call wrong_one_seed
# 3 GiB of host memory in forward under a 2 GiB bound (a memory cgroup for the runner: supervisor/memcg.c).
run host_hog --runner-memory 2G
wait $hangs
# Red team 42 (tests/fixtures/redteam42/README.md): answers the judge would copy many times over (expanded views; one
# sparse memfd's range named six times), and memory a runner holds where its group might not see it.
R42=tests/fixtures/redteam42
r42() { # r42 NAME [flags...]: kgym eval of a red team 42 fixture into $TMP/r42_NAME.json
    n=$1; shift
    "$KGYM" eval --device "$DEVICE" --task "$T" --kernel "$R42/$n.py" --json --runner-memory 1G "$@" \
        >"$TMP/r42_$n.json" 2>"$TMP/r42_$n.err"
}
r42 judge_clone_output & a=$!
r42 sparse_answer_to_judge --policy "$RT" & b=$!
wait $a $b
r42 cgroup_escape_probe --policy "$RT" & a=$!
r42 tmpfs_fill --policy "$RT" & b=$!
wait $a $b
r42 unix_socket_buffers --policy "$RT"
if [ "$(jget "$TMP/r42_judge_clone_output.json" 'r["verdict"] == "runtime_error" and "OutputTooLarge" in r["feedback"]
        and "returned far more data than the reference" in r["feedback"] and "raised" not in r["feedback"]
        and r["process"]["end"] == "completed"')" = True ]; then
    ok "red team 42: an answer far larger than the reference's outputs is refused before the judge copies it"
else bad "red team 42: judge_clone_output" "$(head -c 1500 "$TMP/r42_judge_clone_output.json")"; fi
if [ "$(jget "$TMP/r42_sparse_answer_to_judge.json" 'r["verdict"] == "hacked" and
        [h["type"] for h in r["hacks"]] == ["protocol_forgery"]')" = True ]; then
    ok "red team 42: a layout naming one memfd range six times is a forged answer"
else bad "red team 42: sparse_answer_to_judge" "$(head -c 1500 "$TMP/r42_sparse_answer_to_judge.json")"; fi
for n in cgroup_escape_probe tmpfs_fill unix_socket_buffers; do
    if [ "$(jget "$TMP/r42_$n.json" 'r["process"]["host_memory"]["limit_bytes"] is None')" = True ]; then
        ok "red team 42: $n: no memory cgroup here ($(jget "$TMP/r42_$n.json" 'r["process"]["host_memory"]["why"]'))"
    elif [ "$(jget "$TMP/r42_$n.json" 'r["verdict"] == "runtime_error" and r["process"]["host_memory"]["oom_kills"] >= 1
            and "host-memory limit" in r["feedback"]')" = True ]; then
        ok "red team 42: $n is stopped inside the runner's memory group"
    else bad "red team 42: $n" "$(head -c 1500 "$TMP/r42_$n.json")"; fi
done
expect ok correct 'r["reward"] == 1.0 and r["correctness"]["passed_count"] >= 5 and all(
    {"inputs", "reference", "construct", "call", "compare"} <= set(v["spent_ms"]) and all(x >= 0 for x in
    v["spent_ms"].values()) for v in r["correctness"]["variants"])'
# Everything a pass needs was seen (nothing unjudged, no required protection missing), and the result says what
# its verdict cannot see: on the CPU the interpreter's serial instances and the lack of timing; nothing on a GPU.
expect ok correct 'r["unjudged"] == [] and r["sandbox"]["missing"] == [] and r["sandbox"]["waived"] == [] and
    [l["code"] for l in r["limits"]] == (["interpreter_serial", "not_timed"] if "'"$DEVICE"'" == "cpu" else [])
    and r["task"]["randomness"]["handling"] == "none"'
# Fail closed: right on every variant's first call, but raising when the same model is called again (the base
# variant's repeat checks).  Not correct: both checks are unjudged and the candidate's own exception is the error.
# (On a GPU the run is not timed either: timing and profile follow in the list.)
expect raise_second_call runtime_error 'r["reward"] < 1.0 and [u["fact"] for u in r["unjudged"]][:2] ==
    ["cached_output", "nondeterministic"] and r["error"]["type"] == "RuntimeError" and "called again" in r["feedback"]
    and r["correctness"]["failed_count"] == 0'
# A plain bug that only the base variant's second call (its inputs drawn again) meets: that call counts like any
# variant (before, only an exact copy of the first output failed there), and it is not a hack (a new model's first
# call on those inputs is wrong too; tests/fixtures/attacks/v_second_call_counter is the hack).
expect wrong_one_seed incorrect '[v["name"] for v in r["correctness"]["variants"] if v["status"] == "failed"] ==
    ["base_again"] and r["hacks"] == [] and r["reward"] == 0.7'
expect chatty correct '"debug: forward called" in r["process"]["stdout"]'
# The runner's host memory: bounded by default (32 GiB), and a candidate over its bound is stopped by the kernel
# inside its own group, which the result and the feedback say.  Where this machine gives kgym no memory cgroup,
# the result says why instead (and the hog is not stopped).
expect ok correct 'r["process"]["host_memory"]["limit_bytes"] == 32 << 30 or (r["process"]["host_memory"]["limit_bytes"]
    is None and r["process"]["host_memory"]["why"])'
if [ "$(jget "$TMP/host_hog.json" 'r["process"]["host_memory"]["limit_bytes"]')" = None ]; then
    expect host_hog correct 'r["process"]["host_memory"]["why"]'
else
    expect host_hog runtime_error 'r["process"]["host_memory"]["limit_bytes"] == 2 << 30 and
        r["process"]["host_memory"]["oom_kills"] == 1 and r["process"]["host_memory"]["why"] is None
        and (r["process"]["host_memory"]["peak_bytes"] or 2 << 30) >= 1 << 30
        and r["process"]["end"] == "signal" and r["process"]["signal"] == 9 and "host memory" in r["feedback"]
        and "host-memory limit (2 GiB, --runner-memory)" in r["feedback"]'
fi
expect wrong_value incorrect 'r["reward"] == 0.7 and "elements differ" in r["feedback"]'
expect wrong_tail incorrect '"elements differ" in r["feedback"]'
expect wrong_shape incorrect 'r["reward"] == 0.5 and "shape" in r["feedback"]'
expect syntax_error invalid 'r["reward"] == 0.0 and "line 4" in r["feedback"]'
expect no_triton invalid '"@triton.jit" in r["feedback"]'
expect import_error compile_error 'r["reward"] == 0.3 and "magic_kernels" in r["feedback"]'
expect raise_in_forward runtime_error '"candidate.py line" in r["feedback"] and r["error"]["type"] == "ValueError"'
# The interpreter meets the bad attribute while running the kernel; a GPU compiles it first.
if [ "$DEVICE" = cpu ]; then want=runtime_error; else want=compile_error; fi
expect kernel_error $want '"undefined_thing" in r["feedback"]'
expect segfault runtime_error 'r["process"]["end"] == "signal" and r["process"]["signal"] == 11 and "SIGSEGV" in r["feedback"]'
expect exit_early runtime_error 'r["process"]["end"] == "exit" and r["process"]["exit_code"] == 7'
expect flood runtime_error 'r["process"]["end"] == "output_flood" and r["process"]["truncated"]'
expect protocol_garbage hacked 'r["process"]["end"] == "protocol" and [h["type"] for h in r["hacks"]] == ["protocol_forgery"]'
expect hang timeout 'r["process"]["stage"] == "tiny_run" and r["reward"] == 0.5 and r["wall_ms"] < 30000'
expect hang_import timeout 'r["process"]["stage"] == "compile" and r["reward"] == 0.3'

# A model's raw reply: chat debris, prose, two blocks (the second defines ModelNew).
{
    printf '<|im_start|>assistant\nHere is my plan.\n```python\nprint("usage example")\n```\n'
    printf 'And the kernel:\r\n```python\r\n'
    sed 's/$/\r/' "$C/ok.py"
    printf '```\r\nHope this helps!<|im_end|>\n'
} >"$TMP/reply.txt"
"$KGYM" eval --device "$DEVICE" --task "$T" --kernel "$TMP/reply.txt" --json >"$TMP/reply.json" 2>"$TMP/err"
if [ "$(jget "$TMP/reply.json" 'r["verdict"] + " " + r["candidate"]["source"]')" = "correct fenced_block" ]; then
    ok "raw model reply is extracted and correct"
else bad "raw model reply" "$(cat "$TMP/err" "$TMP/reply.json")"; fi

printf 'I cannot help with that.\n' >"$TMP/refusal.txt"
"$KGYM" eval --device "$DEVICE" --task "$T" --kernel "$TMP/refusal.txt" --json >"$TMP/refusal.json" 2>"$TMP/err"
if [ "$(jget "$TMP/refusal.json" 'r["verdict"] + " " + r["stages"][0]["status"]')" = "invalid fail" ]; then
    ok "a reply without code is invalid, with the reason"
else bad "refusal" "$(cat "$TMP/refusal.json")"; fi
# ... decided by C alone: no Python is started for it (a missing interpreter does not matter).
"$KGYM" eval --device cpu --python /nonexistent/python --task "$T" --kernel "$TMP/refusal.txt" --json \
    >"$TMP/refusal2.json" 2>"$TMP/err"; rc=$?
if [ $rc -eq 0 ] && [ "$(jget "$TMP/refusal2.json" 'r["verdict"]')" = "invalid" ]; then
    ok "a reply without code is answered without starting Python"
else bad "refusal without Python (exit $rc)" "$(cat "$TMP/err")"; fi

# Groups a killed kgym left behind (its pid gone) are removed by the next kgym's first group; a live kgym's stay.
CG=$(sed -n 's/^[0-9]*:[^:]*memory[^:]*:\(.*\)$/\1/p' /proc/self/cgroup | head -1)
CGD=/sys/fs/cgroup/memory${CG%/}
if [ -n "$CG" ] && [ -w "$CGD" ] && mkdir "$CGD/kgym-runner-999999999-1-1" "$CGD/kgym-runner-$$-1-1" 2>/dev/null; then
    "$KGYM" eval --device "$DEVICE" --task "$T" --kernel "$C/ok.py" --json >"$TMP/sweep.json" 2>"$TMP/err"
    if [ ! -d "$CGD/kgym-runner-999999999-1-1" ] && [ -d "$CGD/kgym-runner-$$-1-1" ]; then
        ok "a dead kgym's empty memory groups are swept, a live one's kept"
    else bad "memory group sweep" "$(ls "$CGD" | grep kgym-runner)"; fi
    rmdir "$CGD/kgym-runner-999999999-1-1" "$CGD/kgym-runner-$$-1-1" 2>/dev/null
else
    ok "memory group sweep: no writable cgroup v1 memory hierarchy here (nothing to sweep)"
fi

# --runner-memory 0: no group, nothing to say; a bad value is refused with what it needs.
"$KGYM" eval --device "$DEVICE" --task "$T" --kernel "$C/ok.py" --runner-memory 0 --json >"$TMP/nomem.json" 2>"$TMP/err"
if [ "$(jget "$TMP/nomem.json" 'r["verdict"] + str(r["process"]["host_memory"])')" = \
    "correct{'limit_bytes': None, 'peak_bytes': None, 'oom_kills': 0, 'why': None}" ]; then
    ok "--runner-memory 0 bounds nothing and says nothing"
else bad "--runner-memory 0" "$(cat "$TMP/err"; head -c 600 "$TMP/nomem.json")"; fi
"$KGYM" eval --device "$DEVICE" --task "$T" --kernel "$C/ok.py" --runner-memory 12K >"$TMP/badmem.out" 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -q 'runner-memory needs 0 or bytes >= 256M' "$TMP/badmem.out"; then
    ok "--runner-memory 12K is refused, naming what it needs"
else bad "--runner-memory 12K (exit $rc)" "$(cat "$TMP/badmem.out")"; fi

# Readable report (default) names the verdict and the failing variant.
"$KGYM" eval --device "$DEVICE" --task "$T" --kernel "$C/wrong_value.py" >"$TMP/report.txt" 2>&1
if grep -q "verdict    incorrect   reward 0.70 (staged credit" "$TMP/report.txt" && grep -q "base .*failed" "$TMP/report.txt" &&
   ! grep -E "^  [a-z_]+ +(ok|fail|skipped) .{160}" "$TMP/report.txt" | grep -q .; then
    ok "readable report"
else bad "readable report" "$(cat "$TMP/report.txt")"; fi

# Exit statuses: 2 for usage errors, 1 when the task itself is broken.
usage() { # name, args...
    name=$1; shift
    "$KGYM" eval "$@" >"$TMP/u.out" 2>"$TMP/u.err"; rc=$?
    if [ $rc -eq 2 ] && [ -s "$TMP/u.err" ]; then ok "usage error: $name"; else bad "usage error: $name (exit $rc)" "$(cat "$TMP/u.err")"; fi
}
usage "no --kernel" --task "$T"
usage "unknown flag" --task "$T" --kernel "$C/ok.py" --frobnicate
usage "bad device" --task "$T" --kernel "$C/ok.py" --device tpu
usage "missing task file" --task /nonexistent/task.py --kernel "$C/ok.py"
usage "missing kernel file" --task "$T" --kernel /nonexistent/k.py
KB_SAVED=$KGYM_KERNELBENCH; unset KGYM_KERNELBENCH
usage "id without --kernelbench" --task level1/19 --kernel "$C/ok.py"
[ -n "$KB_SAVED" ] && export KGYM_KERNELBENCH=$KB_SAVED
usage "bad stage name" --task "$T" --kernel "$C/ok.py" --stage-timeout warp=3
usage "bad tolerance" --task "$T" --kernel "$C/ok.py" --atol -1
usage "bad --timing-agree" --task "$T" --kernel "$C/ok.py" --timing-agree 2
usage "unknown tolerance profile" --task "$T" --kernel "$C/ok.py" --tolerance-profile loose
grep -q "strict or kernelbench" "$TMP/u.err" && ok "the unknown profile's error names the known ones" ||
    bad "unknown tolerance profile message" "$(cat "$TMP/u.err")"
grep -q "stage-timeout" "$TMP/u.err" 2>/dev/null || true
printf 'import torch\nclass Model(torch.nn.Module):\n    pass\n' >"$TMP/broken_task.py"
"$KGYM" eval --device "$DEVICE" --task "$TMP/broken_task.py" --kernel "$C/ok.py" >"$TMP/b.out" 2>"$TMP/b.err"; rc=$?
if [ $rc -eq 1 ] && grep -q "get_inputs" "$TMP/b.err"; then ok "a broken task is kgym's error (exit 1), named"; else bad "broken task (exit $rc)" "$(cat "$TMP/b.err")"; fi

# A reference that draws random numbers in forward: dropout modules are judged in eval mode (the identity: the
# add_one kernel is correct, and the result and feedback say so); any other draw refuses the task (exit 1, named).
TD=tests/fixtures/tasks
"$KGYM" eval --device "$DEVICE" --task "$TD/add_one_dropout.py" --kernel "$C/ok.py" --json >"$TMP/drop.json" 2>"$TMP/err"
if [ "$(jget "$TMP/drop.json" 'r["verdict"] + " " + r["task"]["randomness"]["handling"] + " " +
        str("dropout is the identity" in r["feedback"])')" = "correct dropout_as_identity True" ]; then
    ok "a task with training-mode dropout is judged with its dropout off, and says so"
else bad "dropout task" "$(cat "$TMP/err"; head -c 1500 "$TMP/drop.json")"; fi
"$KGYM" eval --device "$DEVICE" --task "$TD/add_one_noise.py" --kernel "$C/ok.py" >"$TMP/noise.out" 2>"$TMP/noise.err"; rc=$?
if [ $rc -eq 1 ] && grep -q "reference is random.*randn_like" "$TMP/noise.err"; then
    ok "a task that draws random numbers in forward is refused (exit 1), with the operator named"
else bad "random task (exit $rc)" "$(cat "$TMP/noise.err" "$TMP/noise.out")"; fi
# A zero-size task (batch_size = 0): nothing to compute, compare or time.  The task is refused (exit 1, named), where
# before an honest kernel, which launches nothing on nothing, was `hacked` (no_triton_launch).
"$KGYM" eval --device "$DEVICE" --task "$TD/tail_zero_size.py" --kernel tests/fixtures/honest/h_tail_cumprod_rows.py \
    >"$TMP/zero.out" 2>"$TMP/zero.err"; rc=$?
if [ $rc -eq 1 ] && grep -q "cannot be evaluated: DegenerateTask: the reference's output has no elements" "$TMP/zero.err"; then
    ok "a zero-size task is refused (exit 1) as degenerate, not judged"
else bad "zero-size task (exit $rc)" "$(cat "$TMP/zero.err" "$TMP/zero.out")"; fi
usage "unknown protection in --allow-unprotected" --task "$T" --kernel "$C/ok.py" --allow-unprotected landlock,selinux
grep -q "selinux" "$TMP/u.err" || bad "--allow-unprotected names the unknown protection" "$(cat "$TMP/u.err")"

# KGYM_JUDGE_PROFILE: the judge's stages profiled into that folder (docs/PERFORMANCE.md, "Profiling the judge").
mkdir -p "$TMP/prof"
KGYM_JUDGE_PROFILE="$TMP/prof" "$KGYM" eval --device "$DEVICE" --task "$T" --kernel "$C/ok.py" --json >"$TMP/prof.json" 2>"$TMP/prof.err"
prof=$("$PY" -c 'import glob, json, pstats, sys
fs = glob.glob(sys.argv[1] + "/judge-*.prof")
names = {f[2] for f in pstats.Stats(*fs).stats} if len(fs) == 1 else set()
js = glob.glob(sys.argv[1] + "/judge-*.json")
c = json.load(open(js[0])) if len(js) == 1 and js[0][:-5] == fs[0][:-5] else {}
# the driver counts: on a GPU the judge made device blocks (inputs in place, answer spares) and allocator
# segments; on the CPU none, and no allocator
gpu = sys.argv[2] != "cpu"
counts = (c.get("device_blocks_made", 0) > 0 and c.get("segments_allocated", 0) > 0) if gpu else (
    c.get("device_blocks_made") == 0 and c.get("segments_allocated", 0) is None)
# the judge ATen operators and host reads by variant step: the reference ran operators, the comparison too
ops = c.get("aten_ops") or {}
steps = ops.get("reference", 0) > 0 and ops.get("compare", 0) > 0 and "compare" in (c.get("host_reads") or {})
print(len(fs), "run_variant" in names, "correctness" in names, counts, steps)' "$TMP/prof" "$DEVICE" 2>&1)
if [ "$(jget "$TMP/prof.json" 'r["verdict"]')" = correct ] && [ "$prof" = "1 True True True True" ]; then
    ok "KGYM_JUDGE_PROFILE: one judge profile with the correctness stage's calls, its driver counts and operators"
else
    bad "KGYM_JUDGE_PROFILE (profiles, run_variant, correctness: $prof)" "$(cat "$TMP/prof.err")"
fi
# A folder that cannot be written: said on stderr, the evaluation unchanged.
KGYM_JUDGE_PROFILE="$TMP/no/such/folder" "$KGYM" eval --device "$DEVICE" --task "$T" --kernel "$C/ok.py" --json \
    >"$TMP/prof2.json" 2>"$TMP/prof2.err"
if [ "$(jget "$TMP/prof2.json" 'r["verdict"]')" = correct ] && grep -q "no profile written" "$TMP/prof2.json" "$TMP/prof2.err"; then
    ok "KGYM_JUDGE_PROFILE: an unwritable folder is said, the verdict unchanged"
else
    bad "KGYM_JUDGE_PROFILE unwritable folder" "$(cat "$TMP/prof2.err"; head -c 800 "$TMP/prof2.json")"
fi
# KernelBench ids resolve inside --kernelbench.
"$KGYM" eval --device "$DEVICE" --kernelbench "$KB" --task level1/19 --kernel "$C/no_triton.py" --json >"$TMP/id.json" 2>"$TMP/err"
if [ "$(jget "$TMP/id.json" 'r["task"]["id"] + " " + r["task"]["name"]')" = "level1/19 19_ReLU" ]; then ok "KernelBench id level1/19"; else bad "KernelBench id" "$(cat "$TMP/err")"; fi

# kgym's own failure before the candidate is read (a judge whose channel to kgym broke before its sandbox report,
# injected with KGYM_FAULT_JUDGE_CHANNEL: judge/child.py _fault_channel) is not the candidate's: the evaluation runs
# once more in a new pair, and the result says how the first run ended (it was `invalid`, "your code does not
# parse", seen once on an H100 at a kept judge's next job).  Once in a new judge, once in a kept judge's second job.
printf 1 >"$TMP/fault"
KGYM_FAULT_JUDGE_CHANNEL="$TMP/fault" "$KGYM" eval --device "$DEVICE" --task "$T" --kernel "$C/ok.py" --json \
    >"$TMP/fault.json" 2>"$TMP/fault.err"
if [ "$(jget "$TMP/fault.json" 'r["verdict"] + " " + str("status 3" in r["restarted"] and "BrokenPipeError" in
        r["restarted"] and "fault injected" in r["restarted"])')" = "correct True" ] && [ ! -e "$TMP/fault" ]; then
    ok "a judge lost before its sandbox report is run again in a new pair, and the result says why"
else bad "judge lost before its sandbox report" "$(cat "$TMP/fault.err"; head -c 1500 "$TMP/fault.json")"; fi
printf '{"task": "%s", "candidate": "%s"}\n{"task": "%s", "candidate": "%s"}\n' "$T" "$C/ok.py" "$T" "$C/ok.py" \
    >"$TMP/fault.jsonl"
printf 2 >"$TMP/fault"
KGYM_FAULT_JUDGE_CHANNEL="$TMP/fault" "$KGYM" bench --device "$DEVICE" --jsonl "$TMP/fault.jsonl" --jobs 1 --json \
    --out "$TMP/fault_bench.jsonl" >"$TMP/fault_bench.out" 2>"$TMP/fault_bench.err"
got=$("$PY" -c 'import json, sys
rs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(len(rs), sorted(r["verdict"] for r in rs), sorted(r["restarted"] is None for r in rs),
      sorted(r["process"]["judge_served"] for r in rs))' "$TMP/fault_bench.jsonl" 2>&1)
if [ "$got" = "2 ['correct', 'correct'] [False, True] [0, 0]" ] && [ ! -e "$TMP/fault" ] &&
   [ "$(grep -c 'correct (run twice: see restarted)' "$TMP/fault_bench.err")" = 1 ]; then
    ok "a kept judge lost at its next job's start: that job runs again in a new pair"
else bad "kept judge lost at its next job (results: $got)" "$(cat "$TMP/fault_bench.err"; tail -c 1500 "$TMP/fault_bench.out")"; fi

finish
