#!/bin/sh
# Dedup in a Redis fleet (docs/service.md, "Dedup"): a result is recorded under the key of the worker that
# produced it (its device kind and evaluation settings: its profile), and answers a job only where that worker's
# profile is the one that would evaluate it.  Workers here differ by --device-kind, as two GPU models would
# (KGYM_FLEET_A / KGYM_FLEET_B give other flags, e.g. "--seed 1" and "--seed 2").
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve/lib.sh"
if ! command -v redis-server >/dev/null; then echo "skip: no redis-server"; finish; exit 0; fi
fleet_setup
FLAGS_A=${KGYM_FLEET_A:---device-kind gpu-model-a}
FLAGS_B=${KGYM_FLEET_B:---device-kind gpu-model-b}

# The API server has none of the workers' flags: it keys submissions with the profile its live workers share.
"$KGYM" serve --redis "$URL" --workers 0 --port 0 --port-file "$TMP/port" >"$TMP/api.log" 2>&1 &
API=$!; PIDS="$API"
start_worker() { # NAME ARGS...: sets WPID
    n=$1; shift
    "$KGYM" worker --redis "$URL" --device "$DEVICE" --lease 3 --stage-timeout tiny_run=8 --stage-timeout compile=30 \
        "$@" >"$TMP/$n.log" 2>&1 &
    WPID=$!; PIDS="$PIDS $WPID"
}
i=0; while [ ! -s "$TMP/port" ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
PORT=$(cat "$TMP/port")

# 1. One kind of worker: dedup as in one server, the API server answering at submit.
start_worker wa $FLAGS_A; WA=$WPID
checks await_workers $WA
checks post k1 ok 0
checks wait k1 done 'd["cached_from"] is None and d["attempts"] == 1'
checks post k1b ok 1
checks wait k1b done 'd["cached_from"] == "k1"'

# 2. Another kind replaces it: k1's result (measured on kind a) is not kind b's answer; b's own result is.
stop_pids "$WA"
start_worker wb $FLAGS_B; WB=$WPID
checks await_workers $WB
checks post k2 ok 0
checks wait k2 done 'd["cached_from"] is None and d["attempts"] == 1 and d["result"]["verdict"] == "correct"'
checks post k3 ok 1
checks wait k3 done 'd["cached_from"] == "k2"'

# 3. Both kinds at once: nothing answered at submit (which kind evaluates is not known yet); the worker that
#    claims the job answers it with its own kind's result, unevaluated (a result names the job evaluated).
start_worker wa2 $FLAGS_A; WA2=$WPID
checks await_workers $WB $WA2
for k in k4 k5 k6; do checks post $k ok 0; done
for k in k4 k5 k6; do
    checks wait $k done "(d['attempts'] == 1 and d['cached_from'] is not None and "\
"((':$WA2:' in d['worker'] and d['result']['task']['id'] == 'k1') or "\
"(':$WB:' in d['worker'] and d['result']['task']['id'] == 'k2')))"
done

# 4. In flight across the fleet: two workers of one kind (separate processes), two identical slow jobs at once.
#    The second follows the first: one evaluation, the very same result for both.
stop_pids "$WA2"
start_worker wb2 $FLAGS_B; WB2=$WPID
checks await_workers $WB $WB2
checks post i1 hang 0 10
checks running i1
checks post i2 hang 0 10
checks running i2
checks wait i1 done 'd["result"]["verdict"] == "timeout" and d["cached_from"] is None'
checks wait i2 done 'd["cached_from"] == "i1" and d["attempts"] == 1'
"$PY" - "$PORT" <<'PYEOF' >"$TMP/same.out"
import json, sys, urllib.request
get = lambda i: json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v1/jobs/{i}"))
a, b = get("i1"), get("i2")
ok = a["result"] == b["result"] and a["worker"] != b["worker"]
print(("ok   " if ok else "FAIL ") + "identical jobs on two worker processes: one evaluation, the same result")
PYEOF
cat "$TMP/same.out"; grep -q '^ok' "$TMP/same.out" && PASS=$((PASS + 1)) || FAIL=$((FAIL + 1))

# 5. The leader's worker dies mid-evaluation: its mark expires a lease later, and the follower evaluates itself.
worker_pid() { sed -n "s/.*$1 is running .* on worker [^:]*:\([0-9]*\):.*/\1/p" "$TMP/checks.out"; }
descendants() { for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do echo "$c"; descendants "$c"; done; }
checks post i3 hang 0 11
checks running i3
LEADER=$(worker_pid i3)
checks post i4 hang 0 11
checks running i4
case " $WB $WB2 " in *" $LEADER "*)
    kids=$(descendants "$LEADER"); kill -9 "$LEADER"; wait "$LEADER" 2>/dev/null
    for k in $kids; do kill -9 "$k" 2>/dev/null; done
    ok "killed the leader's worker $LEADER mid-evaluation" ;;
*) bad "i3 runs on one of our workers (pid '$LEADER')" ;; esac
SURVIVOR=$WB; [ "$LEADER" = "$WB" ] && SURVIVOR=$WB2
checks wait i4 done 'd["result"]["verdict"] == "timeout" and d["cached_from"] is None'
checks wait i3 done 'd["attempts"] == 2 and d["cached_from"] == "i4"'

stop_pids $SURVIVOR $API
PIDS=""

# 6. `kgym worker --gpus`: each process serves the GPU its number names (the first one's device string outlived
# its block only by chance: --gpus 3 served the default device), and a child killed while another runs is reaped
# at once (it stayed a zombie while the parent waited for the first child, so its guardian, which counted a zombie
# as alive, never ended what it had started).  No GPU is needed: the workers wait for jobs that never come.
"$KGYM" worker --redis "$URL" --gpus 7 >"$TMP/g1.log" 2>&1 &
G1=$!
# Up to 120 s: each worker first starts a Python that imports torch (2.6 s idle, 12-24 s under CI's load: the
# flakiness audit of the twenty-fifth session saw 10 s run out).
i=0; until grep -q "worker(s) on" "$TMP/g1.log" || [ $i -ge 600 ]; do sleep 0.2; i=$((i + 1)); done
grep -q "worker(s) on cuda:7 " "$TMP/g1.log" && ok "--gpus 7: the worker serves cuda:7" \
    || bad "--gpus 7 serves another device" "$(cat "$TMP/g1.log")"
stop_pids $G1
"$KGYM" worker --redis "$URL" --gpus 5,6 >"$TMP/g2.log" 2>&1 &
G2=$!; PIDS="$G2"
i=0; until [ "$(grep -c "worker(s) on" "$TMP/g2.log")" -ge 2 ] || [ $i -ge 600 ]; do sleep 0.2; i=$((i + 1)); done
second=$(ps -o pid= --ppid "$G2" | tail -1 | tr -d ' ')
if [ -n "$second" ]; then
    kill -9 "$second"
    sleep 1
    state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$second/status" 2>/dev/null)
    [ -z "$state" ] && ok "--gpus 5,6: a child killed while the other runs is reaped at once" \
        || bad "a killed --gpus child is left as state $state while its sibling runs" "$(cat "$TMP/g2.log")"
else bad "--gpus 5,6 started no child" "$(cat "$TMP/g2.log")"; fi
kill "$G2"; wait "$G2" # exits 1: one of its workers was killed
PIDS=""
no_sanitizer_reports
finish
