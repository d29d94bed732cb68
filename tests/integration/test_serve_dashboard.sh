#!/bin/sh
# The dashboard (GET /) in headless Chromium: after one finished job it shows
# the worker, the job with its verdict, and a screenshot is taken.  Skipped
# (0 passed, 0 failed) when no chromium is installed (apt-get install chromium).
. "$(dirname "$0")/lib.sh"
CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome)
if [ -z "$CHROME" ]; then echo "skip: no chromium"; finish; exit 0; fi
export TMPDIR="$TMP"
"$KGYM" serve --device "$DEVICE" --port 0 --port-file "$TMP/port" --db "$TMP/d.db" --workers 1 >"$TMP/log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$TMP"' EXIT
i=0; while [ ! -s "$TMP/port" ] && [ $i -lt 900 ]; do sleep 0.2; i=$((i + 1)); done
PORT=$(cat "$TMP/port")
"$PY" - "$PORT" <<'PYEOF' >"$TMP/eval.out" 2>&1
import json, sys, urllib.request
ref = open("tests/fixtures/tasks/add_one.py").read(); k = open("tests/fixtures/candidates/ok.py").read()
r = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/evaluate", method="POST",
    data=json.dumps({"task_id": "dash-job-1", "reference_code": ref, "kernel_code": k}).encode(),
    headers={"Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(r))["kgym"]["verdict"])
PYEOF
grep -qx correct "$TMP/eval.out" && ok "a job finished before the page loads" || bad "evaluation" "$(cat "$TMP/eval.out")"
run_chrome() { # chromium flags...: headless, no sandbox (root in CI), bounded
    timeout 90 "$CHROME" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
        --user-data-dir="$TMP/profile" --window-size=1280,1000 --virtual-time-budget=8000 "$@" \
        "http://127.0.0.1:$PORT/" 2>>"$TMP/chrome.err"
}
run_chrome --dump-dom >"$TMP/dom.html"
if grep -q 'data-id="dash-job-1"' "$TMP/dom.html" && grep -q '<td class="correct">correct</td>' "$TMP/dom.html" &&
    grep -q 'cpu#0' "$TMP/dom.html"; then
    ok "the rendered page lists the finished job with its verdict and the worker"
else bad "dashboard DOM" "$(head -c 3000 "$TMP/dom.html"; tail -5 "$TMP/chrome.err")"; fi
(cd "$TMP" && run_chrome --screenshot="$TMP/dashboard.png" >/dev/null)
# A PNG of the window's size: signature, IHDR width and height.
if "$PY" -c "
import struct,sys
b=open(sys.argv[1],'rb').read()
assert b[:8]==b'\x89PNG\r\n\x1a\n' and b[12:16]==b'IHDR'
w,h=struct.unpack('>II',b[16:24]); assert (w,h)==(1280,1000) and len(b)>20000, (w,h,len(b))
" "$TMP/dashboard.png" 2>"$TMP/png.err"; then
    ok "screenshot taken (1280x1000 PNG)"
    [ -n "$KGYM_SCREENSHOT_DIR" ] && cp "$TMP/dashboard.png" "$KGYM_SCREENSHOT_DIR/"
else bad "screenshot" "$(cat "$TMP/png.err"; tail -5 "$TMP/chrome.err")"; fi
finish
