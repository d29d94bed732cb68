#!/bin/sh
# kgym serve (ASan build) under the faults of issues 13 and 34: a second server on a
# port in use, idle connections and one client holding every connection it
# may (503 + Retry-After, not a silent close), the hardening checks (cross-site POST, NaN, %00, duplicate ids,
# batch retries, unknown fields, foreign Host names), no evaluation outliving a SIGKILLed server, 1,100
# abandoned waiting requests (a fresh client still served), concurrent submissions of one new task_id,
# SIGTERM with requests waiting (exits within its bound), and as root a database on a full tmpfs (every 202
# is stored, the rest get 503), a result that cannot be written while the
# disk is full (retried, never left running), and a deleted database file
# (503, /health unhealthy).  Root-only parts skip with a message otherwise.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve/lib.sh"
export TMPDIR="$TMP"
SERVER_PID=""; MNT=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill -9 $SERVER_PID 2>/dev/null
    [ -n "$MNT" ] && umount -l "$MNT" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

py() { "$PY" - "$PORT" "$@" >"$TMP/py.out" 2>&1; rc=$?; cat "$TMP/py.out"; return $rc; }

# 1. A second server on a port in use refuses to start; the first keeps
#    answering every request (it used to share the port and lose half).
if start_server one --workers 0 --db "$TMP/one.db"; then
    "$KGYM" serve --device "$DEVICE" --workers 0 --port "$PORT" --db "$TMP/two.db" >"$TMP/two.log" 2>&1 &
    TWO=$!
    i=0; while kill -0 $TWO 2>/dev/null && [ $i -lt 100 ]; do sleep 0.2; i=$((i + 1)); done
    if kill -0 $TWO 2>/dev/null; then kill -9 $TWO; bad "a second server on a port in use exits" "$(cat "$TMP/two.log")"
    else
        wait $TWO; rc=$?
        [ $rc -eq 1 ] && grep -q "port is in use" "$TMP/two.log" && ok "a second server on port $PORT exits 1: 'port is in use'" \
            || bad "second server: exit $rc, a clear error" "$(cat "$TMP/two.log")"
    fi
    checks hardening
    checks hosts
    stop_server one
fi

# 2. Lock-out: idle connections are closed after --idle-timeout (not
#    --sync-timeout + 120 s); one client address holding all the
#    connections it may does not lock out another address; a client
#    dripping its headers (slowloris) is cut off after --idle-timeout, one
#    dripping its body after --body-timeout.
if start_server idle --workers 0 --db "$TMP/idle.db" --idle-timeout 2 --max-connections 20 \
        --max-client-connections 5 --sync-timeout 1800 --body-timeout 4; then
    py <<'EOF' && ok "idle and per-client limits hold, the connection over the limit answered 503 + Retry-After (see above)" || bad "idle and per-client limits"
import socket, sys, time, urllib.request
port = int(sys.argv[1])
def health(src=None, timeout=5):
    s = socket.socket()
    s.settimeout(timeout)
    if src:
        s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    data = b""
    try:
        while True:
            c = s.recv(4096)
            if not c:
                break
            data += c
    except OSError:
        pass
    s.close()
    if not data.startswith(b"HTTP/1."):
        return "no answer"
    code = data.split(b" ", 2)[1].decode()
    return code + (" Retry-After" if b"\r\nRetry-After: " in data else "")
held = []
for _ in range(5):
    s = socket.create_connection(("127.0.0.1", port))
    held.append(s)
time.sleep(0.3)
first = health()
other = health("127.0.0.2")
print("with 5 idle connections from 127.0.0.1: another from 127.0.0.1 ->", first, "; from 127.0.0.2 ->", other)
# The one over the limit is told why and when to come back (it used to be closed without a word), and closed.
time.sleep(3)  # past --idle-timeout 2
closed = 0
for s in held:
    s.settimeout(2)
    try:
        closed += s.recv(1) == b""
    except OSError:
        closed += 1
after = health()
print(f"after the idle timeout: {closed}/5 idle connections closed by the server; a new request -> {after}")
sys.exit(0 if first == "503 Retry-After" and other == "200" and closed == 5 and after == "200" else 1)
EOF
    py <<'EOF' && ok "a slowloris client (a header byte every 0.5 s) is cut off at the header deadline" \
        || bad "a slowloris client holds its connection"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(0.5)
t0, closed = time.time(), False
for b in b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 100:
    try:
        s.sendall(bytes([b]))
        closed = s.recv(1) == b""
    except socket.timeout:
        pass
    except OSError:
        closed = True
    if closed:
        break
print("slowloris: connection closed by the server: %s after %.1f s" % (closed, time.time() - t0))
sys.exit(0 if closed else 1)
EOF
    py <<'EOF' && ok "a client dripping its body (a byte every 0.5 s, never silent 2 s) is cut off at --body-timeout 4" \
        || bad "a slow body holds its connection"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(0.5)
s.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n")
t0, closed = time.time(), False
for b in b"{" + b" " * 398:
    try:
        s.sendall(bytes([b]))
        closed = s.recv(1) == b""
    except socket.timeout:
        pass
    except OSError:
        closed = True
    if closed or time.time() - t0 > 30:
        break
took = time.time() - t0
print("slow body: connection closed by the server: %s after %.1f s" % (closed, took))
sys.exit(0 if closed and 3.5 < took < 12 else 1)
EOF
    stop_server idle
fi

# 3. No evaluation outlives its server: a hanging candidate's processes end
#    when the server is SIGKILLed (its guardian), and a server start kills
#    what a dead server left when the guardian died too.
descendants() { for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do echo "$c"; descendants "$c"; done; }
alive() { # how many of the pids live (a zombie is dead)
    n=0; for p in $1; do st=$(ps -o stat= -p "$p" 2>/dev/null); case "$st" in ""|Z*) ;; *) n=$((n + 1)) ;; esac; done; echo $n; }
wait_gone() { i=0; while [ "$(alive "$1")" -ne 0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done; alive "$1"; }
eval_procs() { # SERVER_PID: the evaluation's processes (not the zygote, not the guardian)
    for p in $(descendants "$1"); do
        case "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" in *"$KGYM"*) ;; *) echo "$p" ;; esac
    done
}
for round in guardian restart; do
    if start_server "orphan-$round" --workers 1 --db "$TMP/orphan-$round.db" --stage-timeout tiny_run=600; then
        checks submit "hang-$round" hang
        checks running "hang-$round"
        sleep 1
        procs=$(eval_procs "$SERVER_PID")
        guardian=$(ps -o pid= --ppid "$SERVER_PID" | while read -r p; do
            case "$(tr '\0' ' ' <"/proc/$p/cmdline")" in *"$KGYM"*) echo "$p" ;; esac; done)
        [ -n "$procs" ] && [ -n "$guardian" ] && ok "$round: the evaluation runs ($(echo $procs | wc -w) processes) and a guardian watches" \
            || bad "$round: evaluation processes and guardian found ('$procs', '$guardian')"
        # Stopped, they cannot end on their own (the judge noticing its
        # server is gone): only a kill ends them.
        kill -STOP $procs
        if [ "$round" = guardian ]; then
            kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null; SERVER_PID=""
            left=$(wait_gone "$procs")
            [ "$left" -eq 0 ] && ok "guardian: a SIGKILLed server's evaluation is killed with it" \
                || { bad "guardian: $left evaluation process(es) outlive the server"; kill -9 $procs 2>/dev/null; }
        else
            kill -9 "$guardian" "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null; SERVER_PID=""
            sleep 1
            [ "$(alive "$procs")" -ne 0 ] && ok "restart: with its guardian killed too, the evaluation outlives the server" \
                || bad "restart: the evaluation should still run before the next start"
            if start_server orphan-next --workers 0 --db "$TMP/orphan2.db"; then
                left=$(wait_gone "$procs")
                [ "$left" -eq 0 ] && grep -q "killed .* process(es) left by a server that died" "$TMP/orphan-next.log" \
                    && ok "restart: the next server start kills what the dead server left" \
                    || { bad "restart: $left process(es) left" "$(cat "$TMP/orphan-next.log")"; kill -9 $procs 2>/dev/null; }
                stop_server orphan-next
            fi
        fi
    fi
done

# 4. Waiting requests (issue 34).  1,100 POST /evaluate on a server whose queue never moves (no workers, as a busy
#    fleet's), from 20 addresses, kept open then abandoned: no thread held by any, a fresh address served
#    meanwhile and after, none reset without an answer.  Two different bodies with one new task_id at once: the
#    idempotent answer, never 409.
if start_server abandon --workers 0 --db "$TMP/abandon.db"; then
    checks abandon "$SERVER_PID"
    checks race 100
    stop_server abandon
fi
#    SIGTERM with requests waiting and a job running (a hanging candidate): the server exits within
#    KG_SERVICE_STOP_S (10 s), every waiting request answered 503 with Retry-After; the jobs are kept (the next
#    server has them, the running one queued again).
if start_server stopw --workers 1 --db "$TMP/stopw.db" --stage-timeout tiny_run=600; then
    checks submit stop-hang hang
    checks running stop-hang
    checks stop_waits "$SERVER_PID" 10
    case "$(ps -o stat= -p "$SERVER_PID" 2>/dev/null)" in ""|Z*) ;; *) kill -9 "$SERVER_PID" ;; esac  # it hung
    wait "$SERVER_PID"; rc=$?; SERVER_PID=""
    [ $rc -eq 0 ] && ok "...and exits 0" || bad "the stopped server exits 0 (exit $rc)" "$(tail -5 "$TMP/stopw.log")"
    if start_server stopw2 --workers 0 --db "$TMP/stopw.db"; then
        grep -q "1 queued again" "$TMP/stopw2.log" && ok "the next server queues the interrupted job again" \
            || bad "the interrupted job is queued again" "$(cat "$TMP/stopw2.log")"
        checks health 200 'h["queue"]["pending"] == 34'
        stop_server stopw2
    fi
fi

#    Jobs that end while the server stops, with requests waiting (issue 34): a worker that ends a job wakes the
#    waiting requests, also during the drain after SIGTERM; the waits were freed before that drain, and the wake
#    wrote into freed memory (an ASan heap-use-after-free that test_serve.sh's api server once ended with).  held:
#    KGYM_FAULT_LATE_JOB_END=1 holds each worker's notice until the stop (the report every time before the fix);
#    cancel: no fault injection, a running job cancelled just before SIGTERM ends during the stop.
r=0
for mode in held cancel held cancel; do
    r=$((r + 1))
    if [ $mode = held ]; then export KGYM_FAULT_LATE_JOB_END=1; n=2; else n=1; fi
    if start_server stopend$r --workers $n --db "$TMP/stopend$r.db" --stage-timeout tiny_run=600; then
        checks stop_ending "$SERVER_PID" 10 $mode
        server_ended stopend$r
    fi
    unset KGYM_FAULT_LATE_JOB_END
done

# 5. (root) The database on a 2 MiB tmpfs: a full disk.
if [ "$(id -u)" -ne 0 ]; then
    echo "skip: the full-disk and deleted-database checks need root (a tmpfs mount)"
elif ! { mkdir -p "$TMP/mnt" && mount -t tmpfs -o size=2m tmpfs "$TMP/mnt"; } 2>"$TMP/mount.err"; then
    echo "skip: cannot mount a tmpfs: $(cat "$TMP/mount.err")"
else
    MNT="$TMP/mnt"
    # 5a. 60 requests of ~50 kB on a workerless server: every 202 is stored
    #     (the rest are 503 with Retry-After), across a restart.
    if start_server full --workers 0 --db "$MNT/jobs.db"; then
        py "$TMP/acked" <<'EOF'
import json, sys, urllib.error, urllib.request
port, out = sys.argv[1], sys.argv[2]
ref = open("tests/fixtures/tasks/add_one.py").read()
acked, codes, retry = [], {}, True
for i in range(60):
    body = json.dumps({"task_id": f"t{i}", "reference_code": ref, "kernel_code": "# pad\n" + "x = 1\n" * 8000 + str(i)}).encode()
    r = urllib.request.Request(f"http://127.0.0.1:{port}/v1/jobs", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r) as f:
            c = f.status
    except urllib.error.HTTPError as e:
        c = e.code
        retry = retry and (c != 503 or e.headers.get("Retry-After") is not None)
    codes[c] = codes.get(c, 0) + 1
    if c == 202:
        acked.append(f"t{i}")
open(out, "w").write("\n".join(acked))
print("answers:", codes, "; every 503 has Retry-After:", retry)
EOF
        grep -q "503" "$TMP/py.out" && grep -q "Retry-After: True" "$TMP/py.out" \
            && ok "a full disk: requests refused with 503 + Retry-After" || bad "a full disk gives 503 + Retry-After"
        kill -9 $SERVER_PID; wait $SERVER_PID 2>/dev/null; SERVER_PID=""
        if start_server full2 --workers 0 --db "$MNT/jobs.db"; then
            py "$TMP/acked" <<'EOF' && ok "every acknowledged job survives a full disk and a SIGKILL" || bad "acknowledged jobs lost"
import json, sys, urllib.error, urllib.request
port, ids = sys.argv[1], open(sys.argv[2]).read().split()
lost = []
for i in ids:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/jobs/{i}").read()
    except urllib.error.HTTPError:
        lost.append(i)
print(f"{len(ids)} acknowledged, {len(lost)} lost: {lost}")
sys.exit(1 if lost or not ids else 0)
EOF
            kill -9 $SERVER_PID; wait $SERVER_PID 2>/dev/null; SERVER_PID=""
        fi
    fi
    # 5b. A result that cannot be written (the disk fills while the job
    #     runs) is retried; once there is room the job ends (it used to
    #     stay "running" until a restart).
    rm -f "$MNT"/*
    if start_server result --workers 1 --db "$MNT/res.db" --stage-timeout tiny_run=4; then
        checks submit slow hang
        checks running slow
        dd if=/dev/zero of="$MNT/filler" bs=4k 2>/dev/null
        i=0; while ! grep -q "cannot store its outcome" "$TMP/result.log" && [ $i -lt 300 ]; do sleep 0.2; i=$((i + 1)); done
        grep -q "cannot store its outcome" "$TMP/result.log" && ok "the result write failed on the full disk (retrying)" \
            || bad "the result write fails on a full disk" "$(tail "$TMP/result.log")"
        rm -f "$MNT/filler"
        checks wait slow done 'd["result"]["verdict"] == "timeout"'
        stop_server result
    fi
    # 5c. The database file deleted under a running server.
    rm -f "$MNT"/*
    if start_server gone --workers 0 --db "$MNT/gone.db"; then
        rm -f "$MNT/gone.db"
        checks store_down deleted
        stop_server gone
    fi
fi
finish
