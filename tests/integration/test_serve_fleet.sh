#!/bin/sh
# Dedup in a Redis fleet (docs/service.md, "Dedup"): a result is recorded under the key of the worker that
# produced it (its device kind and evaluation settings: its profile), and answers a job only where that worker's
# profile is the one that would evaluate it.  Workers here differ by --device-kind, as two GPU models would
# (KGYM_FLEET_A / KGYM_FLEET_B give other flags, e.g. "--seed 1" and "--seed 2").
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve/lib.sh"
if ! command -v redis-server >/dev/null; then echo "skip: no redis-server"; finish; exit 0; fi
export TMPDIR="$TMP"
PIDS=""
reap_orphans() { # evaluation children of killed workers carry TMPDIR=$TMP
    for e in /proc/[0-9]*/environ; do
        p=${e#/proc/}; p=${p%/environ}
        [ "$p" = "$$" ] && continue
        case " $PIDS $REDIS_PID " in *" $p "*) continue ;; esac
        { tr '\0' '\n' <"$e" | grep -qx "TMPDIR=$TMP" && kill -9 "$p"; } 2>/dev/null
    done
}
cleanup() {
    for p in $PIDS $REDIS_PID; do kill -9 "$p" 2>/dev/null; done; reap_orphans
    [ -n "$KGYM_KEEP_LOGS" ] && cp "$TMP"/*.log "$KGYM_KEEP_LOGS"/ 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
RPORT=$("$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no >"$TMP/redis.log" 2>&1 &
REDIS_PID=$!
i=0; until redis-cli -p "$RPORT" ping >/dev/null 2>&1 || [ $i -ge 50 ]; do sleep 0.1; i=$((i + 1)); done
URL="redis://127.0.0.1:$RPORT"
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

stop_pids $WB $WA2 $API
PIDS=""
no_sanitizer_reports
finish
