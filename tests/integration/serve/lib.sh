# Helpers of the `kgym serve` integration tests (sourced after ../lib.sh).
CH=tests/integration/serve/checks.py

start_server() { # NAME ARGS...: starts a server on a free port, sets PORT and SERVER_PID
    name=$1; shift
    rm -f "$TMP/port"
    "$KGYM" serve --device "$DEVICE" --port 0 --port-file "$TMP/port" --kernelbench "$KB" \
        --stage-timeout compile=30 "$@" >>"$TMP/$name.log" 2>&1 &
    SERVER_PID=$!
    i=0
    while [ ! -s "$TMP/port" ] && [ $i -lt 900 ] && kill -0 $SERVER_PID 2>/dev/null; do sleep 0.2; i=$((i + 1)); done
    PORT=$(cat "$TMP/port" 2>/dev/null)
    if [ -z "$PORT" ]; then bad "server $name starts" "$(tail -20 "$TMP/$name.log")"; return 1; fi
}
stop_server() { # NAME: SIGTERM, expects exit 0 and no sanitizer report
    kill -TERM "$SERVER_PID"; server_ended "$1"
}
server_ended() { # NAME: a server already sent SIGTERM (and maybe reaped by the shell): expects exit 0, no report
    wait "$SERVER_PID"; rc=$?; SERVER_PID=""
    if [ $rc -eq 0 ] && ! grep -q "Sanitizer" "$TMP/$1.log"; then ok "server $1 stops cleanly (exit 0, no sanitizer report)"
    else
        # A sanitizer report's first lines name the fault and its stacks; its tail is shadow bytes.
        rep=$(grep -A60 -m1 "ERROR: .*Sanitizer\|runtime error:" "$TMP/$1.log")
        bad "server $1 stops cleanly (exit $rc)" "${rep:-$(tail -30 "$TMP/$1.log")}"
        if [ -n "$KGYM_KEEP_LOGS" ]; then cp "$TMP/$1.log" "$KGYM_KEEP_LOGS/" 2>/dev/null; fi
    fi
}
checks() { # GROUP ARGS...: runs checks.py against $PORT and counts its lines
    g=$1; shift
    "$PY" $CH "$g" "$PORT" "$@" >"$TMP/checks.out" 2>&1
    cat "$TMP/checks.out"
    PASS=$((PASS + $(grep -c '^ok' "$TMP/checks.out")))
    FAIL=$((FAIL + $(grep -c '^FAIL' "$TMP/checks.out")))
    if grep -q '^Traceback' "$TMP/checks.out"; then FAIL=$((FAIL + 1)); echo "FAIL checks.py $g crashed"; fi
}
stop_pids() { # PID...: SIGTERM each, expects exit 0
    for p in "$@"; do
        kill -TERM "$p"; wait "$p"; rc=$?
        [ $rc -eq 0 ] && ok "process $p stops cleanly" || bad "process $p stops cleanly (exit $rc)"
    done
}
no_sanitizer_reports() { # after every process stopped: no ASan/UBSan report in any log
    if grep -l "Sanitizer" "$TMP"/*.log; then bad "no sanitizer reports" "$(grep -h -A5 Sanitizer "$TMP"/*.log | head -30)"
    else ok "no sanitizer reports in any log"; fi
}

# fleet_setup: what a Redis fleet test needs before its servers start: a durable redis-server (appendonly) on a
# free loopback port (URL, RPORT, REDIS_PID), PIDS for the test's own processes, and an EXIT trap that kills
# them, Redis and every evaluation child of a killed worker (they carry TMPDIR=$TMP), then keeps logs if
# KGYM_KEEP_LOGS names a folder.
fleet_setup() {
    export TMPDIR="$TMP"
    PIDS=""
    RPORT=$("$PY" tests/integration/serve/ports.py) # below the ephemeral range: free across restarts
    redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly yes --dir "$TMP" >"$TMP/redis.log" 2>&1 &
    REDIS_PID=$!
    trap fleet_cleanup EXIT
    i=0; until redis-cli -p "$RPORT" ping >/dev/null 2>&1 || [ $i -ge 50 ]; do sleep 0.1; i=$((i + 1)); done
    URL="redis://127.0.0.1:$RPORT"
}
reap_orphans() { # evaluation children of killed workers carry TMPDIR=$TMP
    for e in /proc/[0-9]*/environ; do
        p=${e#/proc/}; p=${p%/environ}
        [ "$p" = "$$" ] && continue
        case " $PIDS $REDIS_PID " in *" $p "*) continue ;; esac
        { tr '\0' '\n' <"$e" | grep -qx "TMPDIR=$TMP" && kill -9 "$p"; } 2>/dev/null
    done
}
fleet_cleanup() {
    for p in $PIDS $REDIS_PID; do kill -9 "$p" 2>/dev/null; done; reap_orphans
    [ -n "$KGYM_KEEP_LOGS" ] && cp "$TMP"/*.log "$KGYM_KEEP_LOGS"/ 2>/dev/null
    rm -rf "$TMP"
}
