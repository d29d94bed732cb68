#!/bin/sh
# Runs every kgym test and prints one closing line "N passed, N failed".
#   unit:        build/asan/tests/test_*   (C, ASan/UBSan)
#   python:      python/tests and harness/tests with pytest
#   integration: tests/integration/test_*.sh against build/asan/kgym (on the CPU the service's suites in a second
#                lane beside the others; KGYM_TEST_LANES=1: one at a time)
# KGYM_SUITES="unit python integration" (the default) chooses suites;
# KGYM_ONLY_UNIT=1 is KGYM_SUITES=unit.
cd "$(dirname "$0")/.."
PY=${KGYM_PYTHON:-.venv/bin/python}
total_pass=0; total_fail=0; failed_suites=""
log=$(mktemp)
count() { # $1 = suite name, output in $log
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/'); f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    [ -z "$line" ] && { p=0; f=1; }
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    [ "$f" -ne 0 ] && failed_suites="$failed_suites $1"
}
SUITES=${KGYM_SUITES:-unit python integration}
[ -n "$KGYM_ONLY_UNIT" ] && SUITES=unit
has() { case " $SUITES " in *" $1 "*) return 0 ;; esac; return 1; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for t in build/asan/tests/test_*; do
    has unit || break
    [ -x "$t" ] || continue
    echo "== $t"
    "$t" >"$log" 2>&1; rc=$?
    cat "$log"
    [ $rc -ne 0 ] && ! grep -qE '^[0-9]+ passed, [1-9][0-9]* failed' "$log" && echo "0 passed, 1 failed" >>"$log"
    count "$t"
done
if has python; then
    for d in python/tests harness/tests; do
        [ -d "$d" ] || continue
        echo "== pytest $d"
        t0=$(date +%s)
        "$PY" -m pytest -q -p no:cacheprovider "$d" >"$log" 2>&1
        cat "$log"
        echo "   ($(( $(date +%s) - t0 )) s)"
        line=$(grep -E '[0-9]+ (passed|failed)' "$log" | tail -1)
        p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+'); f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
        e=$(echo "$line" | grep -oE '[0-9]+ error' | grep -oE '[0-9]+')
        p=${p:-0}; f=$(( ${f:-0} + ${e:-0} ))
        [ -z "$line" ] && f=1
        total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
        [ "$f" -ne 0 ] && failed_suites="$failed_suites $d"
    done
fi
# Integration suites.  On the CPU (CI: 2 cores, a 20-minute budget) the service's suites (test_serve*) run in a
# second lane beside the others: they mostly wait (leases, heartbeats, injected faults: test_serve_faults used 28 s
# of CPU in 112 s), so the lane costs the first little and saves their wall (measured: ~340 s of wall, ~190 s of
# CPU).  Concurrent kgym processes draw runner uids from the machine-wide slots (pair.c) and servers take ports from
# the kernel.  On a GPU (timing suites) and with KGYM_TEST_LANES=1 every suite runs alone, in order.
run_suite() { # $1 = script, $2 = where its output goes; prints nothing, returns nothing
    t0=$(date +%s)
    sh "$1" >"$2" 2>&1; rc=$?
    echo "   ($(( $(date +%s) - t0 )) s)" >>"$2"  # CI's budget is 20 minutes: which suite takes it
    [ $rc -ne 0 ] && ! grep -qE '^[0-9]+ passed, [1-9][0-9]* failed' "$2" && echo "0 passed, 1 failed" >>"$2"
}
if has integration; then
    lanes=${KGYM_TEST_LANES:-2}
    case ${KGYM_DEVICE:-cpu} in cpu) ;; *) lanes=1 ;; esac
    lane_dir=$(mktemp -d)
    second=""
    if [ "$lanes" -ge 2 ]; then
        for t in tests/integration/test_serve*.sh; do [ -f "$t" ] && second="$second $t"; done
        ( for t in $second; do run_suite "$t" "$lane_dir/$(basename "$t").log"; done ) &
        lane_pid=$!
    fi
    for t in tests/integration/test_*.sh; do
        [ -f "$t" ] || continue
        case " $second " in *" $t "*) continue ;; esac
        echo "== $t"
        run_suite "$t" "$log"
        cat "$log"
        count "$t"
    done
    if [ -n "$second" ]; then
        wait "$lane_pid"
        for t in $second; do
            echo "== $t (second lane)"
            cp "$lane_dir/$(basename "$t").log" "$log" 2>/dev/null || echo "0 passed, 1 failed" >"$log"
            cat "$log"
            count "$t"
        done
    fi
    rm -rf "$lane_dir"
fi
rm -f "$log"
[ -n "$failed_suites" ] && echo "failing suites:$failed_suites"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
