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
    kill -TERM "$SERVER_PID"; wait "$SERVER_PID"; rc=$?; SERVER_PID=""
    if [ $rc -eq 0 ] && ! grep -q "Sanitizer" "$TMP/$1.log"; then ok "server $1 stops cleanly (exit 0, no sanitizer report)"
    else bad "server $1 stops cleanly (exit $rc)" "$(tail -30 "$TMP/$1.log")"; fi
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
