#!/bin/sh
# kgym serve (ASan build) on loopback with a temp database: every endpoint,
# every bad-input class, auth, limits (429, 413), restart with queued jobs,
# a server killed while a job runs (the job is run again), a job that kills
# its server every time (stopped after --max-attempts), clean shutdown.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve/lib.sh"
# A running job is the fixture hang.py (a busy loop in forward).
# Evaluation children of a server killed with SIGKILL are ended by its
# guardian (test_serve_faults.sh checks that); as a net, so that a failure
# there leaves nothing running, they carry TMPDIR=$TMP (their work folders
# live there), which is how we find and end them, by pid.
export TMPDIR="$TMP"
SERVER_PID=""
reap_orphans() {
    for e in /proc/[0-9]*/environ; do
        p=${e#/proc/}; p=${p%/environ}
        [ "$p" = "$$" ] && continue
        { tr '\0' '\n' <"$e" | grep -qx "TMPDIR=$TMP" && kill -9 "$p"; } 2>/dev/null
    done
}
cleanup() { [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2>/dev/null; reap_orphans; rm -rf "$TMP"; }
trap cleanup EXIT

kill_server() { kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null; SERVER_PID=""; reap_orphans; }

# 1. Every endpoint, then every class of bad input.
if start_server api --workers 1 --db "$TMP/api.db" --max-code-bytes 65536 --max-body-bytes 1048576 \
        --stage-timeout tiny_run=3; then
    checks api
    checks bad 65536 1048576
    stop_server api
fi

# 2. Bearer-token auth.
if start_server auth --workers 0 --db "$TMP/auth.db" --token s3cret-token; then
    checks auth s3cret-token
    stop_server auth
fi

# 2b. Without a token: only Host names of this server, and --allow-host's (DNS rebinding).
if start_server hosts --workers 0 --db "$TMP/hosts.db" --allow-host kgym.test; then
    checks hosts kgym.test
    stop_server hosts
fi

# 3. A full queue, then a server killed with jobs queued: a new server on the
#    same database runs them all.
if start_server full --workers 0 --db "$TMP/full.db" --max-queue 3 --sync-timeout 1; then
    checks full
    kill_server
    if start_server full2 --workers 1 --db "$TMP/full.db"; then
        checks after_restart q0,q1,sync-wait
        checks wait q0 done 'd["result"]["verdict"] == "correct" and d["attempts"] == 1'
        checks wait q1 done 'd["result"]["verdict"] == "incorrect"'
        stop_server full2
    fi
fi

# 4. A server killed while a job runs: the next one runs it again; a job whose
#    evaluation was interrupted --max-attempts times is failed, not re-run.
if start_server crash1 --workers 1 --db "$TMP/crash.db" --max-attempts 2 --stage-timeout tiny_run=300; then
    checks submit slow1 hang
    checks submit after1 ok
    checks running slow1
    kill_server
    if start_server crash2 --workers 1 --db "$TMP/crash.db" --max-attempts 2 --stage-timeout tiny_run=300; then
        grep -q "1 queued again" "$TMP/crash2.log" && ok "restart re-queues the running job" || bad "restart re-queues" "$(cat "$TMP/crash2.log")"
        checks running slow1
        kill_server
    fi
    if start_server crash3 --workers 1 --db "$TMP/crash.db" --max-attempts 2; then
        grep -q "1 failed after 2 attempts" "$TMP/crash3.log" && ok "restart stops the poison job" || bad "poison job" "$(cat "$TMP/crash3.log")"
        checks wait slow1 failed '"interrupted 2 times" in d["error"] and d["attempts"] == 2 and d["kernelgym"]["error_code"] == "SYSTEM_ERROR"'
        checks wait after1 done 'd["result"]["verdict"] == "correct"'
        stop_server crash3
    fi
fi

# 5. In-flight dedup: two workers, identical jobs at once.
if start_server dedup --workers 2 --db "$TMP/dedup.db"; then
    checks inflight
    stop_server dedup
fi

# 5b. Spare threads (--spare-workers): a twin that follows an evaluation holds no evaluation slot.
if start_server spare --workers 2 --spare-workers 1 --db "$TMP/spare.db"; then
    checks spare
    stop_server spare
fi

# 6. Orphans are reaped.  The server is a child subreaper: a process an evaluation orphans (here a candidate's
#    double-forked grandchild, outside the runner's process group; --no-sandbox: no PID namespace ends it with
#    the runner) is re-parented to it, outlives the evaluation and ends later.  It must not stay a zombie of the
#    server, and the judge's and runner's own exit statuses must still be the supervisor's (a proper verdict).
sed -e '1i import os\nimport time' -e "s|^    def forward(self, x):|&\\
        if not getattr(ModelNew, \"forked\", False):\\
            ModelNew.forked = True\\
            pid = os.fork()\\
            if pid == 0:\\
                os.setsid()\\
                if os.fork() == 0:\\
                    open(\"$TMP/orphan.pid\", \"w\").write(str(os.getpid()))\\
                    time.sleep(2)\\
                os._exit(0)\\
            os.waitpid(pid, 0)|" tests/fixtures/candidates/ok.py >"$TMP/orphan.py"
zombies_of() { # PID: its zombie children
    for f in /proc/[0-9]*/stat; do
        st=$(sed 's/.*) //' "$f" 2>/dev/null) || continue
        set -- $st
        [ "$1" = Z ] && [ "$2" = "$SERVER_PID" ] && echo "${f#/proc/}" | cut -d/ -f1
    done
}
if start_server orphans --workers 1 --db "$TMP/orphans.db" --no-sandbox --policy tests/fixtures/hacks/runtime_only.json; then
    checks submit orphan-1 "$TMP/orphan.py"
    checks wait orphan-1 done 'd["result"]["verdict"] in ("correct", "hacked") and d["result"]["process"]["end"] == "completed"'
    i=0; while [ ! -s "$TMP/orphan.pid" ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
    gpid=$(cat "$TMP/orphan.pid" 2>/dev/null)
    i=0; while [ -n "$gpid" ] && [ -e "/proc/$gpid" ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
    z=$(zombies_of "$SERVER_PID")
    if [ -n "$gpid" ] && [ ! -e "/proc/$gpid" ] && [ -z "$z" ]; then
        ok "an orphaned grandchild ($gpid) that ended after its evaluation was reaped: no zombie under the server"
    else
        bad "orphan reaped (grandchild '$gpid'; zombies of the server: '$z')" "$(ps -o pid,ppid,stat,comm --ppid "$SERVER_PID" 2>&1)"
    fi
    checks submit orphan-2 ok
    checks wait orphan-2 done 'd["result"]["verdict"] == "correct"'
    stop_server orphans
fi

# 7. Usage errors.
"$KGYM" serve --port 99999 >/dev/null 2>"$TMP/u.err"; rc=$?
[ $rc -eq 2 ] && ok "serve: bad --port is a usage error" || bad "serve --port 99999 (exit $rc)" "$(cat "$TMP/u.err")"
"$KGYM" serve --device cpu --workers 0 --host not-an-ip --port 0 --db "$TMP/u.db" >/dev/null 2>"$TMP/u.err"; rc=$?
[ $rc -eq 2 ] && grep -q "IPv4" "$TMP/u.err" && ok "serve: bad --host" || bad "serve --host not-an-ip (exit $rc)" "$(cat "$TMP/u.err")"
"$KGYM" serve --device cpu --workers 0 --port 0 --db /nonexistent/dir/x.db >/dev/null 2>"$TMP/u.err"; rc=$?
[ $rc -eq 1 ] && grep -q "x.db" "$TMP/u.err" && ok "serve: unusable --db" || bad "serve --db /nonexistent (exit $rc)" "$(cat "$TMP/u.err")"
# An empty or blank token (an unset $VAR on a command line, an empty KGYM_TOKEN) used to start a server without
# auth and without a word: refused, naming where it came from.  (timeout: a server that starts is a failure.)
refused() { # WHAT NEEDLE CMD...: the command exits 2 at once, its error naming NEEDLE
    what=$1; needle=$2; shift 2
    timeout 30 "$@" >/dev/null 2>"$TMP/u.err"; rc=$?
    [ $rc -eq 2 ] && grep -q -- "$needle" "$TMP/u.err" && ok "serve: $what refused (exit 2: $(head -1 "$TMP/u.err" | cut -c1-80)...)" \
        || bad "serve: $what refused (exit $rc)" "$(cat "$TMP/u.err")"
}
U="$KGYM serve --device cpu --workers 0 --port 0 --db $TMP/u.db"
refused "--token ''" "--token is empty" $U --token ''
refused "--token ' '" "--token is only whitespace" $U --token ' '
refused "--token with a space inside" "--token holds a space" $U --token 'ab cd'
refused "KGYM_TOKEN=''" "KGYM_TOKEN is empty" env KGYM_TOKEN= $U
refused "KGYM_TOKEN of whitespace" "KGYM_TOKEN is only whitespace" env "KGYM_TOKEN=	 " $U
refused "--allow-host with a port" "--allow-host needs a host name" $U --allow-host kgym.test:80
refused "--spare-workers with --redis" "--spare-workers is for a server that owns its queue" $U --spare-workers 1 --redis redis://127.0.0.1:1
refused "--spare-workers of a word" "--spare-workers needs a number" $U --spare-workers many
finish
