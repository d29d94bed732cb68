#!/bin/sh
# kgym rollout against the scripted fake model server (tests/fake_model_server.py, loopback only):
# a fix at turn 2, every kind of turn-1 failure and its feedback, 429 / 503 / malformed bodies / a timeout,
# a server that stays down (then --resume), a kill -9 mid-run (then --resume without re-asking the model),
# test-time scaling (best-k context), context trimming, rewards, advantages, best-of-turns and the report.
. "$(dirname "$0")/lib.sh"
T=tests/fixtures/tasks/add_one.py
R=tests/integration/rollout
SP=""
stop_server() { [ -n "$SP" ] && kill "$SP" 2>/dev/null; wait "$SP" 2>/dev/null; SP=""; }
trap 'stop_server; rm -rf "$TMP"' EXIT
# start_server SCRIPT LOG: a fresh server (fresh fault counters); sets URL.
start_server() {
    stop_server
    rm -f "$TMP/port"
    "$PY" tests/fake_model_server.py --script "$1" --log "$2" --port-file "$TMP/port" &
    SP=$!
    i=0; while [ ! -s "$TMP/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    URL="http://127.0.0.1:$(cat "$TMP/port")/v1"
}
rollout() {
    "$KGYM" rollout --url "$URL" --model fake-coder --device "$DEVICE" --no-progress --request-timeout 1 \
        --backoff 0.05 --stage-timeout compile=20 --stage-timeout tiny_run=8 "$@"
}
# check NAME PYTHON-CODE: the code gets run = list of records, log = list of logged requests, and must
# print "ok" (anything else is shown as the failure).
check() {
    name=$1; code=$2
    got=$("$PY" -c "
import json, math, sys
run = [json.loads(l) for l in open(sys.argv[1])] if sys.argv[1] != '-' else []
log = [json.loads(l) for l in open(sys.argv[2])] if sys.argv[2] != '-' else []
$code" "${RUN:--}" "${LOG:--}" 2>&1)
    if [ "$got" = ok ]; then ok "$name"; else bad "$name" "$got"; fi
}

# ---- 1. wrong / crashing / unparsable / code-less at turn 1, fixed at turn 2; 429, 503, malformed, timeout
LOG=$TMP/log1.jsonl; RUN=$TMP/run1.jsonl
start_server $R/fix_at_turn2.json "$LOG"
rollout --task "$T" --samples 4 --turns 3 --stop-on-correct --api-key sekret --temperature 0.7 --top-p 0.9 \
    --max-tokens 4096 --stop "</answer>" --price-in 2 --price-out 10 --out "$RUN" >"$TMP/out1" 2>"$TMP/err1"
rc=$?
if [ $rc -eq 0 ]; then ok "rollout exits 0"; else bad "rollout exits 0 (got $rc)" "$(cat "$TMP/err1" "$TMP/out1")"; fi
check "8 records: 4 samples x 2 turns (stopped at the first correct turn)" '
keys = sorted((r["sample"], r["turn"]) for r in run)
assert keys == [(s, t) for s in range(4) for t in (1, 2)], keys
assert all(r["result"]["verdict"] != "correct" for r in run if r["turn"] == 1)
assert all(r["result"]["verdict"] == "correct" for r in run if r["turn"] == 2)
v = {r["sample"]: r["result"]["verdict"] for r in run if r["turn"] == 1}
assert v == {0: "incorrect", 1: "runtime_error", 2: "invalid", 3: "invalid"}, v
print("ok")'
check "trajectory schema: messages, reply, code, usage, result, reward, feedback" '
for r in run:
    for k in ("schema", "task", "sample", "turn", "messages", "context_turns", "reply", "code", "finish_reason",
              "usage", "cost_usd", "attempts", "result", "reward", "reward_fn", "mask", "feedback",
              "return", "advantage", "estimator", "prs_keep", "prs_prob", "best"):
        assert k in r, k
    assert r["schema"] == "kgym.turn/1" and r["task"] == "add_one" and r["reward_fn"] == "drkernel"
    m = r["messages"]
    assert m[0]["role"] == "user" and "x * self.scale + 1.0" in m[0]["content"] and "ModelNew" in m[0]["content"]
    assert m[-1] == {"role": "assistant", "content": r["reply"]}
    assert [x["role"] for x in m] == ["user"] + ["assistant", "user"] * (r["turn"] - 1) + ["assistant"]
    assert r["result"]["schema"] == "kgym.result/1"
    assert (r["code"] is None) == (r["sample"] == 3 and r["turn"] == 1)
    if r["turn"] == 2:
        assert m[1]["content"] == next(x["reply"] for x in run if x["sample"] == r["sample"] and x["turn"] == 1)
        assert m[2]["content"] == next(x["feedback"] for x in run if x["sample"] == r["sample"] and x["turn"] == 1)
print("ok")'
check "rewards (drkernel on CPU: 0.5 correct, 0 otherwise), TRLOO advantages, returns, best-of-turns" '
for r in run:
    assert r["reward"] == (0.5 if r["result"]["verdict"] == "correct" else 0.0), r["reward"]
G = {}
for r in run:
    G[(r["sample"], r["turn"])] = sum(x["reward"] for x in run if x["sample"] == r["sample"] and x["turn"] >= r["turn"])
for r in run:
    grp = [G[(x["sample"], x["turn"])] for x in run if x["turn"] == r["turn"] and x["sample"] != r["sample"]]
    want = G[(r["sample"], r["turn"])] - sum(grp) / len(grp)
    assert abs(r["advantage"] - want) < 1e-9 and abs(r["return"] - G[(r["sample"], r["turn"])]) < 1e-9, (r, want)
    assert r["estimator"] == "trloo" and r["prs_keep"] is None  # no coverage on CPU: PRS not decided
    assert r["best"] == (r["turn"] == 2)
print("ok")'
check "retries: every request the server saw is counted; 429, 503, malformed and timeout were all met" '
faults = [l["fault"] for l in log if l["fault"]]
assert len(faults) == 4, faults
assert sum(r["attempts"] for r in run) == len(log), (sum(r["attempts"] for r in run), len(log))
assert any(r["attempts"] > 1 and r["turn"] == 2 for r in run)   # the delayed one timed out and was retried
assert all(l["auth"] == "Bearer sekret" for l in log)
p = log[0]["params"]
assert p["model"] == "fake-coder" and p["temperature"] == 0.7 and p["top_p"] == 0.9 and p["max_tokens"] == 4096
assert p["stop"] == ["</answer>"]
print("ok")'
check "feedback is the result's feedback (the text training sees), with every error the evaluator reported" '
fb = {}
for l in log:
    if l["turn"] == 2 and not l["fault"]:
        fb[l["sample"]] = l["messages"][-1]["content"]
assert sorted(fb) == [0, 1, 2, 3], sorted(fb)
want = {0: ["Wrong output", "base", "elements differ", "max abs error", "expected", "Passed: none"],
        1: ["ModelNew raised an exception during stage tiny_run", "ValueError: bad things happen",
            "candidate.py line 21, in forward"],
        2: ["Your code does not parse", "SyntaxError", "line 4", "class ModelNew(nn.Module)"],
        3: ["No usable code in your answer", "no code found", "```python"]}
first = {r["sample"]: r for r in run if r["turn"] == 1}
for s, words in want.items():
    for w in words:
        assert w in fb[s], (s, w, fb[s])
    assert first[s]["result"]["feedback"] in fb[s] and "Stages passed:" not in fb[s], (s, fb[s])  # one renderer
    assert "turn 1" in fb[s] and "2 more turn" in fb[s]
print("ok")'
check "token usage and cost are counted" '
s = json.load(open(sys.argv[1] + ".summary.json"))
pt = sum(r["usage"]["prompt_tokens"] for r in run); ct = sum(r["usage"]["completion_tokens"] for r in run)
assert s["prompt_tokens"] == pt and s["completion_tokens"] == ct, (s, pt, ct)
for r in run:  # the fake server counts len(text)//4+1
    assert r["usage"]["prompt_tokens"] == sum(len(m["content"]) for m in r["messages"][:-1]) // 4 + 1
    assert abs(r["cost_usd"] - (r["usage"]["prompt_tokens"] * 2 + r["usage"]["completion_tokens"] * 10) / 1e6) < 1e-12
assert abs(s["cost_usd"] - sum(r["cost_usd"] for r in run)) < 1e-9
print("ok")'
check "report: metrics per turn and best-of-turns, plot, summary" '
m = json.load(open(sys.argv[1] + ".metrics.json"))
s = json.load(open(sys.argv[1] + ".summary.json"))
assert s["best_of_turns_correct"] == 4 and s["trajectories"] == 4
assert "<svg" in open(sys.argv[1] + ".svg").read()
import os, stat
for ext in (".metrics.json", ".summary.json", ".svg"):  # reports others read: not private to their owner
    mode = stat.S_IMODE(os.stat(sys.argv[1] + ext).st_mode)
    assert mode & 0o044 == 0o044 & ~os.umask(os.umask(0)), (ext, oct(mode))
txt = json.dumps(m)
assert "best" in txt and "correct_rate" in txt, txt[:300]
print("ok")'
"$KGYM" metrics "$RUN" >"$TMP/metrics.txt" 2>&1 && grep -q "Best of turns" "$TMP/metrics.txt" &&
    ok "kgym metrics reads the trajectory file" || bad "kgym metrics reads the trajectory file" "$(cat "$TMP/metrics.txt")"
"$KGYM" advantages --estimator grpo "$RUN" >"$TMP/adv.jsonl" 2>"$TMP/adv.err" &&
    [ "$(wc -l <"$TMP/adv.jsonl")" -eq 8 ] && ok "kgym advantages reads the trajectory file" ||
    bad "kgym advantages reads the trajectory file" "$(cat "$TMP/adv.err")"

"$KGYM" rollout --out "$RUN" --report-only --json >"$TMP/report.json" 2>"$TMP/report.err"
rc=$?
check "--report-only --json recomputes the summary (exit $rc)" "
s = json.load(open('$TMP/report.json'))
assert s['records'] == 8 and s['best_of_turns_correct'] == 4 and s['metrics']
print('ok')"

# ---- 2. a server that stays down: the run ends incomplete (exit 1), --resume finishes it
LOG=$TMP/log2.jsonl; RUN=$TMP/run2.jsonl
start_server $R/server_down.json "$LOG"
rollout --task "$T" --samples 2 --turns 2 --retries 1 --out "$RUN" >"$TMP/out2" 2>"$TMP/err2"
rc=$?
if [ $rc -eq 1 ] && grep -q "HTTP 500" "$TMP/err2" && grep -q -- "--resume" "$TMP/err2" && [ ! -s "$RUN" ]; then
    ok "persistent 5xx: exit 1, no records, says --resume"
else bad "persistent 5xx (exit $rc)" "$(cat "$TMP/err2")"; fi
rollout --task "$T" --samples 2 --turns 2 --retries 1 --out "$RUN" >"$TMP/out2" 2>"$TMP/err2b"
[ $? -eq 2 ] && grep -q "exists" "$TMP/err2b" && ok "an existing run is not overwritten without --resume" ||
    bad "existing run without --resume" "$(cat "$TMP/err2b")"
rollout --task "$T" --samples 2 --turns 2 --retries 1 --resume --out "$RUN" >"$TMP/out2" 2>"$TMP/err2"
rc=$?
check "--resume after the server recovered completes every trajectory (exit $rc)" '
assert sorted(l["fault"]["status"] for l in log if l["fault"]) == [500] * 4, [l["fault"] for l in log]
assert sorted((r["sample"], r["turn"]) for r in run) == [(0, 1), (0, 2), (1, 1), (1, 2)]
print("ok")'

# ---- 3. kill -9 mid-run, then --resume: finished turns kept, answered turns not asked again
LOG=$TMP/log3.jsonl; RUN=$TMP/run3.jsonl
start_server $R/slow.json "$LOG"
# Started directly (not through the shell function) so that $! is kgym itself.
"$KGYM" rollout --url "$URL" --model fake-coder --device "$DEVICE" --no-progress --task "$T" --samples 2 \
    --turns 3 --concurrency 1 --out "$RUN" >"$TMP/out3" 2>"$TMP/err3" &
KP=$!
# Up to 120 s for two records (a model reply and a CPU evaluation each; 20 s could run out under CI's load), polled
# every 50 ms so the kill lands soon after the second (the slow server keeps the rest from finishing meanwhile).
i=0; while [ "$(cat "$RUN" 2>/dev/null | wc -l)" -lt 2 ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i + 1)); done
kill -9 $KP; wait $KP 2>/dev/null
sleep 0.6   # requests in flight reach the log
cp "$RUN" "$TMP/run3.before"
cp "$RUN.replies.jsonl" "$TMP/cache3.before"
logged=$(wc -l <"$LOG")
rollout --task "$T" --samples 2 --turns 3 --concurrency 1 --resume --out "$RUN" >"$TMP/out3" 2>"$TMP/err3"
rc=$?
check "kill -9 + --resume: 6 records once each, earlier records kept, no finished turn re-asked (exit $rc)" "
before = [json.loads(l) for l in open('$TMP/run3.before') if l.strip().endswith('}')]
cached = set()
for l in open('$TMP/cache3.before'):
    try: c = json.loads(l); cached.add((c['sample'], c['turn']))
    except ValueError: pass
assert 2 <= len(before) < 6, len(before)
assert sorted((r['sample'], r['turn']) for r in run) == [(s, t) for s in (0, 1) for t in (1, 2, 3)]
for b in before:
    a = next(r for r in run if (r['sample'], r['turn']) == (b['sample'], b['turn']))
    assert a['reply'] == b['reply'] and a['result']['verdict'] == b['result']['verdict']
asked_after = log[$logged:]
again = [(l['sample'], l['turn']) for l in asked_after if (l['sample'], l['turn']) in cached]
assert not again, again
assert len(asked_after) == 6 - len(cached), (len(asked_after), cached)
assert [r['result']['verdict'] for r in sorted(run, key=lambda r: (r['sample'], r['turn']))][:3] == ['incorrect', 'incorrect', 'correct']
print('ok')"
[ $rc -eq 0 ] && grep -q "resumed" "$TMP/out3" && ok "resume reports what it reused" || bad "resume output (exit $rc)" "$(cat "$TMP/out3" "$TMP/err3")"

# A run killed in the middle of a line: --resume drops the broken tail and carries on.
printf '{"schema": "kgym.turn/1", "task": "add_' >>"$RUN"
rollout --task "$T" --samples 2 --turns 3 --concurrency 1 --resume --out "$RUN" >"$TMP/out3" 2>"$TMP/err3"
rc=$?
check "a torn last line is dropped on --resume (exit $rc)" '
assert len(run) == 6 and all(r["advantage"] is not None for r in run)
print("ok")'

# ---- 4. test-time scaling: the context keeps the best k turns by reward; JSONL task list with ids
LOG=$TMP/log4.jsonl; RUN=$TMP/run4.jsonl
start_server $R/best_k.json "$LOG"
rollout --tasks $R/tasks.jsonl --turns 4 --keep-best 1 --mask-void-turns --out "$RUN" >"$TMP/out4" 2>"$TMP/err4"
rc=$?
check "--keep-best 1: later turns see only the best earlier turn; best-of-turns; void-turn mask (exit $rc)" '
run.sort(key=lambda r: r["turn"])
assert [r["task"] for r in run] == ["my_add"] * 4
assert [r["result"]["verdict"] for r in run] == ["correct", "incorrect", "invalid", "correct"]
assert [r["context_turns"] for r in run] == [[], [1], [1], [1]], [r["context_turns"] for r in run]
t4 = [l for l in log if l["turn"] == 4][0]["messages"]
assert len(t4) == 3 and t4[1]["content"] == run[0]["reply"] and "ModelNew" in t4[0]["content"]
assert [r["best"] for r in run] == [True, False, False, False]
assert [r["mask"] for r in run] == [True, False, False, True]          # regressions after a success
assert [r["advantage"] for r in run] == [1.0, 0.0, 0.0, 0.5]           # one sample: singletons get A = G; masked: 0
print("ok")'

# ---- 5. long histories: middle turns are dropped first, the task statement stays
LOG=$TMP/log5.jsonl; RUN=$TMP/run5.jsonl
start_server $R/slow.json "$LOG"
"$KGYM" rollout --url "$URL" --model fake-coder --device "$DEVICE" --request-timeout 1 --task "$T" --turns 3 \
    --max-context-chars 6000 --out "$RUN" >"$TMP/out5" 2>"$TMP/err5"
rc=$?
check "--max-context-chars: turn 3 keeps the task and turn 2, drops turn 1 (exit $rc)" '
run.sort(key=lambda r: r["turn"])
assert [r["context_turns"] for r in run] == [[], [1], [2]], [r["context_turns"] for r in run]
m = run[2]["messages"]
assert "x * self.scale + 1.0" in m[0]["content"] and m[1]["content"] == run[1]["reply"]
print("ok")'
grep -q "3/3 turns" "$TMP/err5" && ok "progress lines on stderr" || bad "progress lines on stderr" "$(cat "$TMP/err5")"

# ---- 6. evaluation through a kgym service (--server): POST /evaluate, the result under "kgym"
LOG=$TMP/log6.jsonl; RUN=$TMP/run6.jsonl
sed "s|\"KGYM\"|\"$KGYM\"|" $R/with_evaluate.json >"$TMP/with_evaluate.json"
start_server "$TMP/with_evaluate.json" "$LOG"
rollout --task "$T" --turns 2 --server "${URL%/v1}" --out "$RUN" >"$TMP/out6" 2>"$TMP/err6"
rc=$?
check "--server: turns are evaluated by the service, the feedback still shows the errors (exit $rc)" '
run.sort(key=lambda r: r["turn"])
assert [r["result"]["verdict"] for r in run] == ["incorrect", "correct"]
ev = [l for l in log if "evaluate" in l]
assert len(ev) == 2 and ev[0]["evaluate"]["backend"] == "triton" and ev[0]["evaluate"]["entry_point"] == "Model"
assert ev[0]["evaluate"]["task_id"].startswith("kgym-rollout-add_one-")    # one id per (reference, reply)
assert ev[0]["evaluate"]["task_id"] != ev[1]["evaluate"]["task_id"]
assert "x * self.scale + 1.0" in ev[0]["reference_code"] and ev[0]["kernel_code"] == run[0]["reply"]
assert "elements differ" in run[0]["feedback"]
print("ok")'

# ---- 6a. re-evaluation once when the speedup is above 3 (Dr. Kernel's rule): a scripted evaluator that
# reports a speedup of 5 on its first call and 1.4 afterwards
cat >"$TMP/eval_fast.sh" <<EOS
#!/bin/sh
n=\$(cat "$TMP/eval_calls" 2>/dev/null || echo 0); n=\$((n + 1)); echo \$n >"$TMP/eval_calls"
cat >/dev/null
if [ \$n -eq 1 ]; then s=5.0; else s=1.4; fi
printf '{"schema": "kgym.result/1", "verdict": "correct", "hacks": [], "reward": 1.0, "timing": {"speedup": %s}, "profile": null}\\n' \$s
EOS
chmod +x "$TMP/eval_fast.sh"
printf '{"candidates_dir": "tests/fixtures/candidates", "replies": {"1": [{"candidate": "ok"}]}, "evaluate_cmd": ["%s"]}\n' \
    "$TMP/eval_fast.sh" >"$TMP/eval_fast.json"
for above in 3 0; do
    LOG=$TMP/log6a$above.jsonl; RUN=$TMP/run6a$above.jsonl
    rm -f "$TMP/eval_calls"
    start_server "$TMP/eval_fast.json" "$LOG"
    rollout --task "$T" --turns 1 --server "${URL%/v1}" --reeval-above $above --out "$RUN" >"$TMP/out6a" 2>"$TMP/err6a"
    rc=$?
    if [ $above = 3 ]; then
        check "--reeval-above 3: a 5x speedup is evaluated again and the second result kept (exit $rc)" '
assert len(run) == 1 and run[0]["result"]["timing"]["speedup"] == 1.4, run
assert run[0]["reevaluated_from"] == 5.0
assert len([l for l in log if "evaluate" in l]) == 2
assert abs(run[0]["reward"] - (0.5 + 0.5 * 1.4)) < 1e-9     # drkernel on the kept result
print("ok")'
    else
        check "--reeval-above 0: one evaluation, the 5x kept (exit $rc)" '
assert len(run) == 1 and run[0]["result"]["timing"]["speedup"] == 5.0 and run[0]["reevaluated_from"] is None
assert len([l for l in log if "evaluate" in l]) == 1
print("ok")'
    fi
done

# The real service, when this build has it (issue 6): kgym serve on a free loopback port.
if "$KGYM" serve --help >/dev/null 2>&1; then
    LOG=$TMP/log6b.jsonl; RUN=$TMP/run6b.jsonl
    start_server $R/fix_at_turn2.json "$LOG"
    # --sync-timeout 0: every new evaluation is answered "pending" at once, and the rollout polls the result.
    "$KGYM" serve --port 0 --port-file "$TMP/sport" --db "$TMP/serve.db" --device "$DEVICE" --workers 2 \
        --token tok --stage-timeout compile=20 --stage-timeout tiny_run=8 --sync-timeout 0 >"$TMP/serve.log" 2>&1 &
    SVP=$!
    i=0; while [ ! -s "$TMP/sport" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    rollout --task "$T" --samples 4 --turns 2 --server "http://127.0.0.1:$(cat "$TMP/sport")" --server-token tok \
        --out "$RUN" >"$TMP/out6b" 2>"$TMP/err6b"
    rc=$?
    kill $SVP 2>/dev/null; wait $SVP 2>/dev/null
    check "--server against kgym serve: same verdicts and feedback as in-process (exit $rc)" '
v = {(r["sample"], r["turn"]): r["result"]["verdict"] for r in run}
assert v == {(0, 1): "incorrect", (1, 1): "runtime_error", (2, 1): "invalid", (3, 1): "invalid",
             (0, 2): "correct", (1, 2): "correct", (2, 2): "correct", (3, 2): "correct"}, v
fb = {r["sample"]: r["feedback"] for r in run if r["turn"] == 1}
assert "elements differ" in fb[0] and "candidate.py line 21" in fb[1] and "SyntaxError" in fb[2]
print("ok")'
fi

# ---- 7. KernelBench tasks by level and id
if [ -d "$KB/level1" ]; then
    LOG=$TMP/log7.jsonl; RUN=$TMP/run7.jsonl
    start_server $R/best_k.json "$LOG"
    rollout --kernelbench "$KB" --level 1 --ids 19 --turns 1 --out "$RUN" >"$TMP/out7" 2>"$TMP/err7"
    rc=$?
    check "--kernelbench --level 1 --ids 19 (exit $rc)" '
assert [r["task"] for r in run] == ["level1/19"] and "ReLU" in log[0]["messages"][0]["content"]
assert run[0]["result"]["verdict"] != "correct"   # an add_one kernel is not a ReLU
print("ok")'
fi

# ---- 8. descriptors: the model's candidate appends a forged result line to every descriptor its process holds
# (tests/fixtures/attacks/p_fd_forge.py, runtime layer only so that it runs): rollout's output and reply cache,
# and the files its caller left open on fds 3 and 7, must not take it.
LOG=$TMP/log8.jsonl; RUN=$TMP/run8.jsonl
start_server $R/fd_forge.json "$LOG"
echo "caller line" >"$TMP/fd3.txt"
rollout --task "$T" --samples 2 --turns 1 --policy tests/fixtures/hacks/runtime_only.json --out "$RUN" \
    3>>"$TMP/fd3.txt" 7>>"$TMP/fd3.txt" >"$TMP/out8" 2>"$TMP/err8"
rc=$?
check "a candidate writing to every descriptor reaches neither the output, the reply cache nor the caller's (exit $rc)" '
import os
cache = [json.loads(l) for l in open(sys.argv[1] + ".replies.jsonl")]
assert len(run) == 2 and all(r["schema"] == "kgym.turn/1" and r["task"] == "add_one" for r in run), run
assert all(r["result"]["verdict"] != "correct" for r in run)
assert "p_fd_forge: held" in run[0]["result"]["process"]["stdout"]  # the attack ran
assert len(cache) == 2 and not any(c.get("task") == "kgatk-p_fd_forge" for c in cache), cache
assert open(os.path.join(os.path.dirname(sys.argv[1]), "fd3.txt")).read() == "caller line\n"
print("ok")'

# ---- 9. usage errors
usage() {
    name=$1; shift
    "$KGYM" rollout "$@" >"$TMP/u.out" 2>"$TMP/u.err"; rc=$?
    if [ $rc -eq 2 ] && [ -s "$TMP/u.err" ]; then ok "usage error: $name"; else bad "usage error: $name (exit $rc)" "$(cat "$TMP/u.err")"; fi
}
usage "no --out" --url "$URL" --model m --task "$T"
usage "no --url" --model m --task "$T" --out "$TMP/x.jsonl"
usage "no tasks" --url "$URL" --model m --out "$TMP/x.jsonl"
usage "bad estimator" --url "$URL" --model m --task "$T" --out "$TMP/x.jsonl" --estimator ppo
usage "bad --turns" --url "$URL" --model m --task "$T" --out "$TMP/x.jsonl" --turns 0
usage "missing task" --url "$URL" --model m --task /nonexistent.py --out "$TMP/x.jsonl"
stop_server
finish
