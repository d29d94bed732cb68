#!/bin/sh
# The Redis-backed fleet on loopback: a real redis-server, a stateless API
# server (kgym serve --redis, no workers), two `kgym worker` processes (ASan).
# One worker is killed with SIGKILL in the middle of a job: every job still
# completes exactly once; a job that takes down every worker that runs it is
# failed after --max-attempts instead of killing more.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve/lib.sh"
if ! command -v redis-server >/dev/null; then echo "skip: no redis-server"; finish; exit 0; fi
fleet_setup

"$KGYM" serve --redis "$URL" --workers 0 --port 0 --port-file "$TMP/port" >"$TMP/api.log" 2>&1 &
API=$!; PIDS="$API"
start_worker() { # NAME: sets WPID
    "$KGYM" worker --redis "$URL" --device "$DEVICE" --lease 3 --max-attempts 2 --stage-timeout tiny_run=8 \
        --stage-timeout compile=30 >"$TMP/$1.log" 2>&1 &
    WPID=$!; PIDS="$PIDS $WPID"
}
start_worker w1; W1=$WPID
start_worker w2; W2=$WPID
i=0; while [ ! -s "$TMP/port" ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
PORT=$(cat "$TMP/port")
# The pid of the worker process running a job (names are host:pid:device#i).
worker_pid() { sed -n "s/.*$1 is running .* on worker [^:]*:\([0-9]*\):.*/\1/p" "$TMP/checks.out"; }
descendants() { # PID: its children, grandchildren, ... (its zygote and evaluation children)
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do echo "$c"; descendants "$c"; done
}
kill_worker() { # PID: SIGKILL one of ours, then what it leaves behind (only its own processes)
    case " $PIDS " in *" $1 "*)
        kids=$(descendants "$1")
        kill -9 "$1" && wait "$1" 2>/dev/null
        for k in $kids; do kill -9 "$k" 2>/dev/null; done
        ok "killed worker $1 with SIGKILL mid-job" ;;
    *) bad "job runs on one of our workers (pid '$1')" ;; esac
}

# Wait until both workers have started (their heartbeats are visible).
i=0; while [ $i -lt 300 ]; do
    [ "$(grep -c 'worker(s) on' "$TMP/w1.log" "$TMP/w2.log" | grep -c ':1')" -eq 2 ] && break; sleep 0.2; i=$((i + 1))
done
sleep 1
checks workers 2

# 1. A batch of jobs with one long one; the worker running it is killed.
: >"$TMP/ids"
checks submit victim hang; echo victim >>"$TMP/ids"
for c in ok wrong_value wrong_tail wrong_shape chatty raise_in_forward; do
    checks submit "j-$c" "$c"; echo "j-$c" >>"$TMP/ids"
done
checks running victim
kill_worker "$(worker_pid victim)"
checks fleet "$TMP/ids"
checks wait victim done 'd["attempts"] == 2 and d["result"]["verdict"] == "timeout"'
# 2. The API server hears of jobs the workers end from Redis (kgym:done), at once.
checks fleet_wake wake
# 3. A cancel on the API server stops the job's evaluation in the worker process running it, told by Redis's
#    kgym:done (news), not by the worker's own check of the store (every 5 s where the store brings news).
checks submit c-run hang
checks running c-run
checks cancel_running c-run
i=0; while ! grep -q "job c-run is cancelled: stopped" "$TMP"/w*.log && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
if grep -q "job c-run is cancelled: stopped (news from the store)" "$TMP"/w*.log; then
    ok "the worker process stopped the cancelled job on Redis's news"
else
    bad "the worker process stopped the cancelled job on Redis's news" "$(grep -h 'c-run' "$TMP"/w*.log)"
fi

# A second API server on the same Redis sees the same jobs and workers: API
# servers keep no state of their own.
"$KGYM" serve --redis "$URL" --workers 0 --port 0 --port-file "$TMP/port2" >"$TMP/api2.log" 2>&1 &
API2=$!; PIDS="$PIDS $API2"
i=0; while [ ! -s "$TMP/port2" ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
PORT1=$PORT; PORT=$(cat "$TMP/port2")
checks wait victim done 'd["attempts"] == 2 and d["kernelgym"]["status"] == "completed" and d["kernelgym"]["error_code"] == "TIMEOUT_ERROR"'
checks wait j-ok done 'd["kernelgym"]["correctness"] is True'
checks workers 1
kill -TERM "$API2"; wait "$API2" && ok "second API server stops cleanly" || bad "second API server stops cleanly"
PORT=$PORT1

# 2. A poison job: every worker that runs it dies.  After --max-attempts (2)
#    it is failed with a clear error, and the next worker lives on.
start_worker w3
checks submit poison hang
checks running poison 1
kill_worker "$(worker_pid poison)"
checks running poison 2   # taken over by the other worker once the lease ran out
kill_worker "$(worker_pid poison)"
start_worker w4; W4=$WPID
checks wait poison failed '"interrupted 2 times" in d["error"] and d["kernelgym"]["status"] == "failed"'
checks submit after-poison ok
checks wait after-poison done 'd["result"]["verdict"] == "correct"'
sleep 7  # dead workers' heartbeats expire (2 leases)
checks workers 1

# Clean shutdown of the survivors, no sanitizer reports.
stop_pids $API $W4
PIDS=""
no_sanitizer_reports
finish
