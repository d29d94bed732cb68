#!/bin/sh
# Load benchmark of `kgym serve` (release build, loopback, bounded: a few
# seconds per measurement): requests/s on /health and on a cached result
# (/results/ID and /v1/jobs/ID), and enqueue-to-start latency p50/p99.
#   sh bench/bench_serve.sh [SECONDS=5] [CONNECTIONS=8] [JOBS=200]
cd "$(dirname "$0")/.."
SECS=${1:-5}; CONNS=${2:-8}; JOBS=${3:-200}
KGYM=${KGYM_BIN:-build/kgym}
PY=${KGYM_PYTHON:-.venv/bin/python}
TMP=$(mktemp -d)
cc -O2 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -o "$TMP/bench_serve" bench/bench_serve.c \
    $(pkg-config --cflags --libs jansson) -lpthread || exit 1
"$KGYM" serve --device cpu --port 0 --port-file "$TMP/port" --db "$TMP/b.db" --workers 1 >"$TMP/log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$TMP"' EXIT
i=0; while [ ! -s "$TMP/port" ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
PORT=$(cat "$TMP/port")
# One finished evaluation to read back.
"$PY" - "$PORT" <<'PYEOF'
import json, sys, urllib.request
ref = open("tests/fixtures/tasks/add_one.py").read(); k = open("tests/fixtures/candidates/ok.py").read()
r = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/evaluate", method="POST",
    data=json.dumps({"task_id": "bench-cached", "reference_code": ref, "kernel_code": k}).encode(),
    headers={"Content-Type": "application/json"})
print("warm-up evaluation:", json.load(urllib.request.urlopen(r))["kgym"]["verdict"])
PYEOF
echo "machine: $(nproc) cores; server and load generator share them"
"$TMP/bench_serve" rps "$PORT" /health "$SECS" "$CONNS"
"$TMP/bench_serve" rps "$PORT" /results/bench-cached "$SECS" "$CONNS"
"$TMP/bench_serve" rps "$PORT" /v1/jobs/bench-cached "$SECS" "$CONNS"
"$TMP/bench_serve" latency "$PORT" "$JOBS"
