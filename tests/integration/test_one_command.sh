#!/bin/sh
# The judge sends the runner one command at a time (docs/protocol.md, "Judge ↔ runner"): nothing of a later command
# waits in the runner's socket while the candidate's code runs.  tests/fixtures/rt_pipe: candidates that act only if
# a message is waiting there (a red team of the construct once sent ahead of its call); under the runtime layer alone
# each must answer as its plain kernel: the two that would answer the call from __init__ incorrect, the rest correct.
. "$(dirname "$0")/lib.sh"
R=tests/fixtures/rt_pipe
{
    for f in a01_init_reads_call a02_init_answers_call; do
        printf '{"task": "tests/fixtures/tasks/add_one.py", "candidate": "%s/%s.py", "expect": "incorrect"}\n' "$R" "$f"
    done
    for f in a03_glued_answers_fd_loss a04_init_mutates_inputs a05_forged_answer_order a06_construct_raises_call_runs \
             a07_init_swallows_call a08_peek_with_fds; do
        printf '{"task": "tests/fixtures/tasks/add_one.py", "candidate": "%s/%s.py", "expect": "correct"}\n' "$R" "$f"
    done
} >"$TMP/one.jsonl"
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/one.jsonl" --policy tests/fixtures/hacks/runtime_only.json --check \
    --json --jobs 2 >"$TMP/one.json" 2>"$TMP/err"
rc=$?
[ $rc -eq 0 ] && [ "$(jget "$TMP/one.json" 'r["summary"]["expectations_met"]')" = 8 ] &&
    ok "rt_pipe: 8 candidates that act on a waiting command answer as their plain kernels (a01, a02 incorrect)" ||
    bad "rt_pipe verdicts (exit $rc)" "$(grep -E 'expected|error' "$TMP/err" | head)"
# Under the default policy the static checker refuses them (gc, select, socket): not one is correct.
"$KGYM" bench --device "$DEVICE" --jsonl "$TMP/one.jsonl" --json --jobs 2 >"$TMP/def.json" 2>"$TMP/err2"
[ "$(jget "$TMP/def.json" 'sum(1 for x in r["results"] if x["result"]["verdict"] == "correct")')" = 0 ] &&
    ok "rt_pipe: under the default policy none is correct" ||
    bad "rt_pipe default policy" "$(grep -E 'error' "$TMP/err2" | head)"
finish
