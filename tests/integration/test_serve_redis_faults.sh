#!/bin/sh
# The Redis-backed fleet when Redis fails (issue 13): a real redis-server
# without persistence, a stateless API server and one `kgym worker` (ASan).
# Redis is killed: /health says unhealthy (503), submissions get 503 with
# Retry-After (not 409, which clients do not retry), and the worker backs
# off instead of spinning on failed claims.  Redis comes back empty (no
# persistence: the consumer group is gone): the worker re-creates the group
# and a new job runs.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve/lib.sh"
if ! command -v redis-server >/dev/null; then echo "skip: no redis-server"; finish; exit 0; fi
export TMPDIR="$TMP"
PIDS=""; REDIS_PID=""
cleanup() {
    for p in $PIDS $REDIS_PID; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
RPORT=$("$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
start_redis() {
    redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no >>"$TMP/redis.log" 2>&1 &
    REDIS_PID=$!
    i=0; until redis-cli -p "$RPORT" ping >/dev/null 2>&1 || [ $i -ge 50 ]; do sleep 0.1; i=$((i + 1)); done
}
start_redis
URL="redis://127.0.0.1:$RPORT"
"$KGYM" serve --redis "$URL" --workers 0 --port 0 --port-file "$TMP/port" >"$TMP/api.log" 2>&1 &
API=$!; PIDS="$API"
"$KGYM" worker --redis "$URL" --device "$DEVICE" --lease 3 --stage-timeout compile=30 >"$TMP/w.log" 2>&1 &
W=$!; PIDS="$PIDS $W"
i=0; while [ ! -s "$TMP/port" ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
PORT=$(cat "$TMP/port")
i=0; while ! grep -q 'worker(s) on' "$TMP/w.log" && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

checks submit before ok
checks wait before done 'd["result"]["verdict"] == "correct"'

# Redis goes away.
kill -9 "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null
t0=$(cpu_ticks "$W"); sleep 4; t1=$(cpu_ticks "$W")
ticks=$((t1 - t0)); hz=$(getconf CLK_TCK)
# A worker spinning on failed claims burns a core (4 s of CPU in 4 s);
# backing off, it uses next to nothing.  Half a core is the line.
if [ "$ticks" -lt $((hz * 2)) ]; then ok "the worker backs off while Redis is down ($ticks CPU ticks in 4 s, $hz per s)"
else bad "the worker spins while Redis is down ($ticks CPU ticks in 4 s, $hz per s)"; fi
grep -q "cannot take jobs" "$TMP/w.log" && ok "the worker says why it takes no jobs" || bad "worker log" "$(tail "$TMP/w.log")"
checks store_down Redis

# Redis comes back empty: the consumer group must be made again.
start_redis
checks submit after ok
checks wait after done 'd["result"]["verdict"] == "correct"'
grep -q "the store answers again" "$TMP/w.log" && ok "the worker noticed Redis is back" || bad "worker recovery log" "$(tail "$TMP/w.log")"

stop_pids $API $W
PIDS=""
no_sanitizer_reports
finish
