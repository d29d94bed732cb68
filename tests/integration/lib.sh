# Shared helpers of the integration tests (sourced).  Each test counts its own
# checks and ends with the line "N passed, N failed".
cd "$(dirname "$0")/../.."
KGYM=${KGYM_BIN:-build/asan/kgym}
PY=${KGYM_PYTHON:-.venv/bin/python}
DEVICE=${KGYM_DEVICE:-cpu}
KB=${KGYM_KERNELBENCH:-../shared/kernelbench}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
PASS=0; FAIL=0
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
ok()   { PASS=$((PASS + 1)); echo "ok   $1"; }
bad()  { FAIL=$((FAIL + 1)); echo "FAIL $1"; [ -n "$2" ] && echo "$2" | head -20; }
# jget FILE EXPR: evaluates a Python expression over the JSON document r.
jget() { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null; }
finish() { echo "$PASS passed, $FAIL failed"; [ "$FAIL" -eq 0 ]; }
