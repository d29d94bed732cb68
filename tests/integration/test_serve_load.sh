#!/bin/sh
# Load (bounded: 2 s per measurement) on the release build, 2 cores shared
# with the load generator: every request of the load benchmark is answered
# without an error, on /health, on a cached result and on enqueue-to-start.
# The rates are figures of bench/bench_serve.sh (goal >= 5,000 requests/s,
# docs/PERFORMANCE.md), printed here, not asserted: a loaded CI machine
# would make a timed assertion fail for no fault of the server.
. "$(dirname "$0")/lib.sh"
if [ ! -x build/kgym ]; then bad "build/kgym is built (make build)"; finish; exit 1; fi
KGYM_BIN=build/kgym sh bench/bench_serve.sh 2 8 50 >"$TMP/bench.out" 2>&1
cat "$TMP/bench.out"
rate() { grep "^GET $1:" "$TMP/bench.out" | sed -E 's/.* = ([0-9]+) requests\/s.*/\1/'; }
for path in /health /results/bench-cached; do
    r=$(rate "$path")
    if [ -n "$r" ] && [ "$r" -gt 0 ] && grep "^GET $path:" "$TMP/bench.out" | grep -q " 0 errors"; then
        ok "GET $path: $r requests/s answered, no errors"
    else bad "GET $path: '$r' requests/s, or errors (see above)"; fi
done
if grep -q "one at a time.* 0 errors" "$TMP/bench.out" && grep -q "burst of 50.* 0 errors" "$TMP/bench.out"; then
    ok "enqueue-to-start latency measured (p50/p99 above)"
else bad "enqueue-to-start latency benchmark"; fi
finish
