#!/bin/sh
# Fault injection (issue 13): jobs submitted in batches while the server (a
# database), or the API server, the workers and Redis (a fleet) are SIGKILLed
# at random moments and started again; every acknowledged job must end
# exactly once with its candidate's verdict.  The seed is printed; set
# KGYM_CHAOS_SEED to replay a run.  See tests/integration/serve/chaos.py.
# In `make test` each mode runs 240 jobs through 4 kills: one in 8 a real candidate, the rest replies with no code
# (C answers them without Python, so they cost milliseconds but take every path a job takes); a soak sets more, e.g.
# KGYM_CHAOS_JOBS=4000 KGYM_CHAOS_KILLS=40 sh tests/integration/test_serve_chaos.sh
. "$(dirname "$0")/lib.sh"
export TMPDIR="$TMP"
SEED=${KGYM_CHAOS_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
run_chaos() { # MODE JOBS KILLS
    "$PY" tests/integration/serve/chaos.py "$1" "$KGYM" "$DEVICE" "$TMP" "$2" "$3" "$SEED" >"$TMP/chaos.out" 2>&1
    cat "$TMP/chaos.out"
    PASS=$((PASS + $(grep -c '^ok' "$TMP/chaos.out")))
    FAIL=$((FAIL + $(grep -c '^FAIL' "$TMP/chaos.out")))
    if grep -q '^Traceback' "$TMP/chaos.out"; then FAIL=$((FAIL + 1)); echo "FAIL chaos.py $1 crashed"; fi
}
JOBS=${KGYM_CHAOS_JOBS:-240}
KILLS=${KGYM_CHAOS_KILLS:-4}
run_chaos sqlite "$JOBS" "$KILLS"
if command -v redis-server >/dev/null; then run_chaos redis "$JOBS" "$KILLS"; else echo "skip: no redis-server (fleet chaos)"; fi
if grep -l "Sanitizer" "$TMP"/chaos-*.log; then bad "no sanitizer reports" "$(grep -h -A5 Sanitizer "$TMP"/chaos-*.log | head -30)"
else ok "no sanitizer reports in any log"; fi
finish
