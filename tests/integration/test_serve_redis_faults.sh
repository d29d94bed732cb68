#!/bin/sh
# The Redis-backed fleet when Redis fails (issue 13): a real redis-server, a
# stateless API server and one `kgym worker` (ASan).
# 1. Redis without persistence: kgym refuses it (exit 1, naming the fix)
#    unless --redis-volatile accepts it, and /health says durable: false.
#    Redis is killed: /health says unhealthy (503), submissions get 503 with
#    Retry-After (not 409, which clients do not retry), and the worker backs
#    off instead of spinning on failed claims.  Redis comes back empty: the
#    loss is detected (said loudly, /health data_lost), the worker re-creates
#    the consumer group and a new job runs.
# 2. Redis with persistence (appendonly yes): kgym starts without the flag
#    (/health durable: true).  Redis is killed while a job is evaluated and
#    stays away well past the three retries a result once had (0.5 + 1 + 2 s):
#    the worker keeps the result while it holds the job's lease and stores it
#    once Redis is back: done, evaluated once; no loss reported.  A worker
#    stopped while it retries stops at once.
# 3. Redis comes back without persistence under a running API server: it
#    takes no job (503, /health unhealthy, naming appendonly).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve/lib.sh"
if ! command -v redis-server >/dev/null; then echo "skip: no redis-server"; finish; exit 0; fi
export TMPDIR="$TMP"
PIDS=""; REDIS_PID=""
cleanup() {
    for p in $PIDS $REDIS_PID; do kill -9 "$p" 2>/dev/null; done
    [ -n "$KGYM_KEEP_LOGS" ] && cp "$TMP"/*.log "$KGYM_KEEP_LOGS"/ 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
RPORT=$("$PY" tests/integration/serve/ports.py) # below the ephemeral range: free across restarts
# Redis comes back on the same port after every kill (the fleet is told that address once).  The port was free
# when picked, but while Redis is down another process's outgoing connection may take it (it lies in the ephemeral
# range): a start that does not answer is tried again, and one that never does is a failure said as such, not a
# run that goes on against no Redis (the flakiness audit, twenty-fifth session).
start_redis() { # APPENDONLY: yes (persistent, in $TMP) or no
    tries=0
    while :; do
        redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly "$1" --dir "$TMP" >>"$TMP/redis.log" 2>&1 &
        REDIS_PID=$!
        i=0; until redis-cli -p "$RPORT" ping >/dev/null 2>&1 || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
        redis-cli -p "$RPORT" ping >/dev/null 2>&1 && return 0
        kill -9 "$REDIS_PID" 2>/dev/null; wait "$REDIS_PID" 2>/dev/null
        tries=$((tries + 1))
        [ $tries -ge 5 ] && { bad "redis-server did not start on 127.0.0.1:$RPORT" "$(tail -5 "$TMP/redis.log")"; return 1; }
        sleep 2
    done
}
kill_redis() { kill -9 "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null; }
start_redis no
URL="redis://127.0.0.1:$RPORT"

# Fail closed: a Redis that would lose acknowledged jobs is refused, the fix named.
for cmd in serve worker; do
    timeout 30 "$KGYM" $cmd --redis "$URL" --workers 0 --port 0 >"$TMP/refused-$cmd.out" 2>&1; rc=$?
    if [ $rc -eq 1 ] && grep -q "redis at 127.0.0.1:$RPORT has appendonly no: a restart of Redis would lose every acknowledged job; start it with --appendonly yes.*or pass --redis-volatile to accept that" "$TMP/refused-$cmd.out"
    then ok "kgym $cmd refuses a Redis without persistence (exit 1, naming --appendonly yes and --redis-volatile)"
    else bad "kgym $cmd refuses a Redis without persistence (exit $rc)" "$(cat "$TMP/refused-$cmd.out")"; fi
done

# The worker: a lease longer than Redis is away in part 2 (a result is kept while the lease is surely held);
# the `hang` candidate ends at its tiny_run limit: an evaluation a few seconds long.
"$KGYM" serve --redis "$URL" --redis-volatile --workers 0 --port 0 --port-file "$TMP/port" >"$TMP/api.log" 2>&1 &
API=$!; PIDS="$API"
"$KGYM" worker --redis "$URL" --redis-volatile --device "$DEVICE" --lease 20 --stage-timeout compile=30 \
    --stage-timeout tiny_run=3 >"$TMP/w.log" 2>&1 &
W=$!; PIDS="$PIDS $W"
i=0; while [ ! -s "$TMP/port" ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
PORT=$(cat "$TMP/port")
i=0; while ! grep -q 'worker(s) on' "$TMP/w.log" && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
checks health 200 'h["store"]["durable"] is False and "appendonly no" in h["store"]["durability"] and h["store"]["data_lost"] == 0'

checks submit before ok
checks wait before done 'd["result"]["verdict"] == "correct"'

# Redis goes away.
kill_redis
t0=$(cpu_ticks "$W"); sleep 4; t1=$(cpu_ticks "$W")
ticks=$((t1 - t0)); hz=$(getconf CLK_TCK)
# A worker spinning on failed claims burns a core (4 s of CPU in 4 s);
# backing off, it uses next to nothing.  Half a core is the line.
if [ "$ticks" -lt $((hz * 2)) ]; then ok "the worker backs off while Redis is down ($ticks CPU ticks in 4 s, $hz per s)"
else bad "the worker spins while Redis is down ($ticks CPU ticks in 4 s, $hz per s)"; fi
grep -q "cannot take jobs" "$TMP/w.log" && ok "the worker says why it takes no jobs" || bad "worker log" "$(tail "$TMP/w.log")"
checks store_down Redis

# Redis comes back empty: the consumer group must be made again, and the loss is said.
start_redis no
checks submit after ok
checks wait after done 'd["result"]["verdict"] == "correct"'
grep -q "the store answers again" "$TMP/w.log" && ok "the worker noticed Redis is back" || bad "worker recovery log" "$(tail "$TMP/w.log")"
checks health 200 'h["store"]["data_lost"] == 1 and h["store"]["data_lost_at"].endswith("Z")'
for n in api w; do
    if grep -q "ALERT: redis at 127.0.0.1:$RPORT LOST ITS DATA: the mark kgym:epoch .* is \(gone\|replaced\)" "$TMP/$n.log"
    then ok "$n: the lost data set is said loudly"; else bad "$n: the lost data set is said loudly" "$(tail "$TMP/$n.log")"; fi
done

# 2. Redis with persistence: an API server without --redis-volatile starts and says so.
kill_redis
start_redis yes
stop_pids $API
"$KGYM" serve --redis "$URL" --workers 0 --port 0 --port-file "$TMP/port2" >"$TMP/api2.log" 2>&1 &
API=$!; PIDS="$W $API"
i=0; while [ ! -s "$TMP/port2" ] && [ $i -lt 600 ] && kill -0 $API 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
PORT=$(cat "$TMP/port2")
checks health 200 'h["store"]["durable"] is True and h["store"]["appendfsync"] == "everysec" and "durability" not in h["store"] and h["store"]["data_lost"] == 0'

# Redis killed mid-evaluation and away > 3.5 s after its end: the result is kept and stored, not failed.
checks post slow hang 0
checks running slow
kill_redis
i=0; until grep -q "job slow: cannot store its outcome" "$TMP/w.log" || [ $i -ge 300 ]; do sleep 0.1; i=$((i + 1)); done
sleep 4
start_redis yes
checks wait slow done 'd["attempts"] == 1 and d["result"]["verdict"] == "timeout"'
grep -q "job slow: outcome stored after [0-9]* retries (its result)" "$TMP/w.log" \
    && ok "the worker kept the result until Redis was back" || bad "the worker kept the result" "$(grep slow "$TMP/w.log")"
checks health 200 'h["store"]["data_lost"] == 0'
grep -q "LOST ITS DATA" "$TMP/api2.log" && bad "no loss said after a restart with persistence" "$(cat "$TMP/api2.log")" \
    || ok "no loss said after a restart with persistence"

# A worker stopped while it retries a result stops at once (the job stays running; its lease hands it over).
checks submit slow2 hang  # force_refresh: not answered from slow's result
checks running slow2
kill_redis
i=0; until grep -q "job slow2: cannot store its outcome" "$TMP/w.log" || [ $i -ge 300 ]; do sleep 0.1; i=$((i + 1)); done
t0=$(date +%s%N); kill -TERM "$W"; wait "$W"; rc=$?; t1=$(date +%s%N); PIDS="$API"
ms=$(( (t1 - t0) / 1000000 ))
if [ $rc -eq 0 ] && [ $ms -lt 4000 ] && ! grep -q "still running" "$TMP/w.log"
then ok "a worker stopped while it retries a result stops at once ($ms ms, exit 0)"
else bad "a worker stopped while it retries a result stops at once ($ms ms, exit $rc)" "$(tail -5 "$TMP/w.log")"; fi

# 3. Redis back without persistence under a server that did not accept that: no job is taken.
start_redis no
checks store_down "appendonly no"

stop_pids $API
PIDS=""
no_sanitizer_reports
finish
