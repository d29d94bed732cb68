#!/bin/sh
# The dashboard (GET /) in headless Chromium.  Before the page loads: a
# correct job, an incorrect one, an identical copy of the first under a
# 128-character id (answered from the cache), and a job written straight
# into the database with a hostile id and hostile result text (the API
# refuses such ids; a store shared with other writers need not).  The
# rendered DOM must show: the throughput chart drawn from those jobs' history
# on first load, the long id ellipsized without widening the page, the
# cached answer counted as such, a readable report at #job=<id>, and the
# hostile text as text.  Two screenshots: the page, and a report.  Skipped
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
LONG=dash-long-$(printf '%0118d' 0 | tr 0 x)
HOSTILE='<img src=x onerror=document.body.setAttribute("data-pwned",1)>'
"$PY" - "$PORT" "$LONG" "$TMP/d.db" "$HOSTILE" <<'PYEOF' >"$TMP/eval.out" 2>&1
import json, sqlite3, sys, time, urllib.request
port, long_id, db, hostile = sys.argv[1:5]
ref = open("tests/fixtures/tasks/add_one.py").read()
ok = open("tests/fixtures/candidates/ok.py").read()
wrong = open("tests/fixtures/candidates/wrong_value.py").read()
def post(path, body):
    r = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method="POST", data=json.dumps(body).encode(),
                               headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(r))
print(post("/evaluate", {"task_id": "dash-job-1", "reference_code": ref, "kernel_code": ok})["kgym"]["verdict"])
print(post("/evaluate", {"task_id": "dash-wrong", "reference_code": ref, "kernel_code": wrong})["kgym"]["verdict"])
print("cached" if post("/v1/jobs", {"id": long_id, "reference_code": ref, "kernel_code": ok})["cached"] else "queued")
# Hostile text wherever the report prints job or result fields.
stage = {"name": hostile, "status": "fail", "ms": 1.0, "detail": hostile}
variant = {"name": hostile, "status": "failed", "description": hostile, "reason": hostile, "mismatches": 1, "elements": 2}
result = {"verdict": "incorrect", "reward": 0.7, "feedback": "feedback " + hostile, "stages": [stage],
          "hacks": [{"type": hostile, "stage": "static", "message": hostile}], "warnings": [],
          "correctness": {"passed": False, "variants": [variant], "passed_count": 0, "failed_count": 1,
                          "error_count": 0, "skipped_count": 0},
          "error": {"stage": "correctness", "type": hostile, "message": hostile, "frames": []},
          "timing": {"method": "interleaved_rounds", "rounds_run": 3, "iters": 50, "gpu": hostile,
                     "reference_mode": "eager", "speedup": 1.5, "remeasured": 1, "noisy": False,
                     "candidate_ms": {"trimmed_mean": 1.0, "median": 1.0, "cv": 0.01},
                     "reference_ms": {"trimmed_mean": 1.5, "median": 1.5, "cv": 0.01},
                     "checks": [{"rounds": 2, "more": True, "reason": hostile, "clock_basis": "device"},
                                {"rounds": 3, "more": False, "reason": "stable", "clock_basis": "stream"}]},
          "profile": None,
          "process": {"end": "completed", "exit_code": 0, "signal": 0, "stdout": hostile, "stderr": "",
                      "stdout_bytes": 9, "stderr_bytes": 0}}
now = time.time()
c = sqlite3.connect(db, timeout=30)
c.execute("INSERT INTO jobs (id, status, key, request, result, verdict, reward, label, worker, attempts,"
          " submitted_at, started_at, finished_at) VALUES (?, 'done', 'hostile-key', ?, ?, 'incorrect', 0.7, ?, ?, 1,"
          " ?, ?, ?)", (hostile, json.dumps({"task": hostile}), json.dumps(result), hostile, hostile, now - 2, now - 1, now))
c.commit()
print("inserted")
PYEOF
if [ "$(tr '\n' ' ' <"$TMP/eval.out")" = "correct incorrect cached inserted " ]; then
    ok "before the page loads: a correct job, an incorrect one, a cached answer, a hostile row"
else bad "set-up" "$(cat "$TMP/eval.out")"; fi
run_chrome() { # URL-SUFFIX chromium-flags...: headless, no sandbox (root in CI), bounded
    u=$1; shift
    timeout 90 "$CHROME" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
        --user-data-dir="$TMP/profile" --window-size=1280,1000 --virtual-time-budget=8000 "$@" \
        "http://127.0.0.1:$PORT/$u" 2>>"$TMP/chrome.err"
}
# dom FILE PYTHON-EXPR: the expression over the DOM text d is true.
dom() { "$PY" -c "import sys; d=open(sys.argv[1]).read(); sys.exit(0 if ($2) else 1)" "$1"; }
ENC=$("$PY" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$HOSTILE")
run_chrome "#job=$ENC" --dump-dom >"$TMP/dom.html"
D=$TMP/dom.html
why() { echo "$(head -c 3000 "$D"; tail -5 "$TMP/chrome.err")"; }
if dom "$D" "'data-id=\"dash-job-1\"' in d and '<td class=\"clip correct\">correct</td>' in d and 'title=\"cpu#0\">cpu#0<' in d"; then
    ok "the page lists the finished job with its verdict, and the worker"
else bad "dashboard DOM" "$(why)"; fi
# Drawn on first load from the jobs' finished_at: the page polled nothing
# before these jobs ended, so a chart built from live samples only has 0.
if dom "$D" "'data-points=\"30\" data-jobs=\"3\" data-cached=\"1\"' in d"; then
    ok "throughput chart: 30 minutes drawn on first load, 3 evaluated jobs and 1 cached answer in them"
else bad "throughput history" "$(grep -o '<canvas[^>]*>' "$D")"; fi
if dom "$D" "'<td class=\"clip\" title=\"$LONG\">$LONG</td>' in d and '.clip{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}' in d and 'data-overflow=\"0\"' in d"; then
    ok "a 128-character id is ellipsized (full id in its title) and the page is no wider than the window"
else bad "long id" "$(grep -o '<body[^>]*>' "$D"; grep -o "<td[^>]*title=\"$LONG\"[^<]*" "$D")"; fi
if dom "$D" "'<b id=\"f\">3</b><small id=\"fsub\">2 evaluated, 1 cached</small>' in d and 'title=\"answered from the cache: the result of job dash-job-1\">cached</span>' in d"; then
    ok "finished card counts the cached answer (3: 2 evaluated, 1 cached); the job is marked cached"
else bad "cached count" "$(grep -o '<div class="card">finished.\{0,120\}' "$D")"; fi
# An <img> element would serialize with quotes (src="x"); ran, its onerror would set data-pwned on the body.
if dom "$D" "'<img src=\"x\"' not in d and ' data-pwned=\"' not in d and d.count('&lt;img src=x onerror=document.body.setAttribute(\"data-pwned\",1)&gt;') >= 10 and 'data-job=' in d"; then
    ok "a hostile id and hostile result text render as text in the list and in the report"
else bad "escaping" "$(grep -o '.\{80\}img src.\{80\}' "$D" | head -20)"; fi
# The timing's method row says why kgym re-measured (timing.checks: the reasons that asked for a round).
if dom "$D" "'rounds of 50 calls on &lt;img' in d and '(1 re-measured: &lt;img src=x onerror=document.body.setAttribute(\"data-pwned\",1)&gt; on the device-wide clock)' in d"; then
    ok "report: the timing says why it re-measured (the check's reason and clock), as text"
else bad "re-measured why" "$(grep -o 'rounds of 50 calls.\{0,300\}' "$D")"; fi
run_chrome "#job=dash-wrong" --dump-dom >"$TMP/report.html"
D=$TMP/report.html
if dom "$D" "'data-job=\"dash-wrong\"' in d and '<div class=\"big incorrect\">incorrect</div>' in d and '<th>reward</th><td>0.70 <span class=\"muted\" id=\"credit\">(staged credit: partial, for the stages passed; 1.00 only when correct)</span></td>' in d"; then
    ok "report at #job=dash-wrong: verdict, and the reward named for what it is (staged credit)"
else bad "report verdict" "$(why)"; fi
# The wrong candidate fails every CPU variant it runs; the judge stops at the first that fails the stage (the
# plan's rest are not run: the stage's detail says how many): the feedback's count, the variants table's failed
# rows and its heading agree.
NV=$("$PY" -c 'import re, sys; m = re.search(r"Wrong output: (\d+) of \1 checked input variants failed", open(sys.argv[1]).read()); print(m.group(1) if m else 0)' "$D")
if dom "$D" "'<td>correctness</td><td class=\"fail\">fail</td>' in d and '<td>timing</td><td class=\"skipped\">skipped</td>' in d and $NV >= 1 and d.count('<td class=\"failed\">failed</td>') == $NV and 'Variants: 0 passed, $NV failed' in d and 'more not run: the stage had failed' in d and ' not run</h3>' in d"; then
    ok "report: stages with their status, $NV failed variants"
else bad "report stages/variants" "$(grep -o '<table id="stages".\{0,1500\}' "$D")"; fi
if dom "$D" "'<pre id=\"feedback\">Wrong output: $NV of $NV checked input variants failed.' in d and 'elements differ' in d and 'id=\"timing\">not measured' in d and 'id=\"coverage\">not measured' in d and '<details id=\"raw\"><summary>raw JSON</summary>' in d"; then
    ok "report: feedback text, timing and coverage (not measured on CPU), raw JSON in a details element"
else bad "report feedback/timing" "$(grep -o '<pre id="feedback">.\{0,300\}' "$D")"; fi
# A PNG of the window's size: signature, IHDR width and height.
png_ok() {
    "$PY" -c "
import struct,sys
b=open(sys.argv[1],'rb').read()
assert b[:8]==b'\x89PNG\r\n\x1a\n' and b[12:16]==b'IHDR'
w,h=struct.unpack('>II',b[16:24]); assert (w,h)==(1280,1000) and len(b)>20000, (w,h,len(b))
" "$1" 2>"$TMP/png.err"
}
(cd "$TMP" && run_chrome "" --screenshot="$TMP/dashboard.png" >/dev/null)
(cd "$TMP" && run_chrome "#job=dash-wrong" --screenshot="$TMP/dashboard-report.png" >/dev/null)
for p in dashboard dashboard-report; do
    if png_ok "$TMP/$p.png"; then
        ok "screenshot taken: $p.png (1280x1000)"
        [ -n "$KGYM_SCREENSHOT_DIR" ] && cp "$TMP/$p.png" "$KGYM_SCREENSHOT_DIR/"
    else bad "screenshot $p" "$(cat "$TMP/png.err"; tail -5 "$TMP/chrome.err")"; fi
done
finish
