#!/bin/sh
# Attack fixtures (tests/fixtures/attacks/, expectations in its MANIFEST.tsv): every fixture is a complete
# candidate for the add_one task that cheats (computes where a recorder would not look, switches the harness's
# checks off, corrupts the comparison or the reference, slips past the static checks) or is an honest kernel
# plus one hostile action against the sandbox.  Under a secure kgym:
#   (a) no fixture is `correct` and none earns a reward; `hacked` ones are recognised, `incorrect` ones at most
#       break their own output;
#   (b) no must-not-happen effect is seen: KGATK-EFFECT lines in the child's stdout, marker files under
#       /tmp/kgym-attack-markers, kgatk-* files in /dev/shm, a TCP connection to our listener, KGYM_TOKEN in
#       the result, a killed kgym;
#   (c) kgym survives: every bench exits 0 and every fixture has a result;
#   (d) no process a fixture started is alive afterwards (their names/command lines carry "kgatk-");
#   (e) no descriptor reaches a runner: every bench runs with --out and with files of its caller's open on fds 3
#       and 7 (p_fd_forge appends a forged result line to every descriptor it holds): both stay intact.
# Fixtures that kill kgym's process tree or fork hundreds of processes run in benches of their own.
# Two passes: the default policy, then (where tests/fixtures/hacks/runtime_only.json exists) static findings
# demoted to warnings, so the runtime checks and the sandbox must stop each attack by themselves.
. "$(dirname "$0")/lib.sh"
T=tests/fixtures/tasks/add_one.py
A=tests/fixtures/attacks
M=$A/MANIFEST.tsv
MARKERS=/tmp/kgym-attack-markers
PORT=27311
TOKEN="kgatk-token-$$-$(date +%s)"
export KGYM_TOKEN="$TOKEN"
ALONE="p_kill_parent.py p_kill_all.py p_fork_bomb.py"
# The judge's compiled-comparison cache, as kgym's own processes name it (child._enable_fused_compare), the
# machine's shared Triton C modules (tritoncache._location), and every home a fixture might guess: p_judge_cache
# plants files in both and overwrites what it finds.
JUDGE_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/kgym/judge-triton"
if [ "$(id -u)" = 0 ]; then MODULES_CACHE=/var/cache/kgym/triton-modules
else MODULES_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/kgym/triton-modules"; fi
# Every directory the harness's Python imports from, as it starts (the s_rewrite_* fixtures try to plant modules,
# .pth files and bytecode there): nothing named kgatk* may appear in one.
IMPORT_DIRS=$("$PY" -c 'import sys; print("\n".join(p for p in sys.path if p))'; echo "$(pwd)/harness")
# cache_snapshot FILE: path and SHA-256 of every file under both caches (empty when there is none yet).
cache_snapshot() {
    "$PY" - "$JUDGE_CACHE" "$MODULES_CACHE" >"$1" <<'PYEOF'
import hashlib, json, os, sys
snap = {}
for root, _dirs, files in (w for top in sys.argv[1:] for w in os.walk(top)):
    for n in files:
        p = os.path.join(root, n)
        try:
            snap[p] = hashlib.sha256(open(p, "rb").read()).hexdigest()
        except OSError as e:
            snap[p] = f"unreadable: {e}"
print(json.dumps(snap))
PYEOF
}

# A TCP listener on 127.0.0.1:$PORT that records every connection (the network probes connect to it).
# It says it is listening (tcp.bound): a listener that could not bind would let every network probe pass without
# testing anything (the flakiness audit, twenty-fifth session).  27311 lies below the kernel's ephemeral range (was
# 47311, inside it: another process's outgoing connection could hold it; tests/integration/serve/ports.py).
"$PY" - "$PORT" "$TMP/tcp.log" "$TMP/tcp.bound" >/dev/null 2>&1 <<'PYEOF' &
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16); s.settimeout(1.0)
open(sys.argv[3], "w").close()
end = time.time() + 900
while time.time() < end:
    try:
        c, peer = s.accept()
    except socket.timeout:
        continue
    c.settimeout(1.0)
    try:
        data = c.recv(200)
    except OSError:
        data = b""
    with open(sys.argv[2], "a") as f:
        f.write(f"{peer} {data!r}\n")
    c.close()
PYEOF
LISTENER=$!
trap 'kill $LISTENER 2>/dev/null; rm -rf "$TMP"' EXIT
i=0; while [ ! -e "$TMP/tcp.bound" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$TMP/tcp.bound" ] && ok "the TCP listener is up on 127.0.0.1:$PORT" ||
    bad "the TCP listener could not bind 127.0.0.1:$PORT (in use?): the network probes would test nothing"

# The manifest as bench jsonl files: one shared bench, and one bench per fixture that must run alone.
: >"$TMP/main.jsonl"
tail -n +2 "$M" | while IFS="$(printf '\t')" read -r f v m; do
    line=$(printf '{"task": "%s", "candidate": "%s/%s"}' "$T" "$A" "$f")
    case " $ALONE " in
        *" $f "*) echo "$line" >"$TMP/alone-${f%.py}.jsonl" ;;
        *) echo "$line" >>"$TMP/main.jsonl" ;;
    esac
done
[ "$(tail -n +2 "$M" | wc -l)" -ge 30 ] && [ "$(ls $A/*.py | wc -l)" = "$(tail -n +2 "$M" | wc -l)" ] &&
    ok "MANIFEST.tsv lists every fixture in $A ($(ls $A/*.py | wc -l))" || bad "MANIFEST.tsv does not match $A/*.py"

# run_pass P BENCH-FLAGS...: one pass over every fixture, results in $TMP/P-*.json.
run_pass() {
P=$1; shift
# Start clean: markers and /dev/shm files of an earlier run would read as this run's effects.
rm -rf "$MARKERS"; mkdir -p "$MARKERS"; chmod 1777 "$MARKERS"
rm -f /dev/shm/kgatk-* /tmp/kgatk-*
find /tmp -maxdepth 4 -path '/tmp/kgym-*' -name 'kgatk-*' -exec rm -rf {} + 2>/dev/null
ls /dev/shm >"$TMP/shm.before" 2>/dev/null
cache_snapshot "$TMP/$P.cache.before"

: >"$TMP/tcp.log"
# bench NAME: runs $TMP/NAME.jsonl; (c) kgym must exit 0 and answer for every fixture; (e) with its results also
# written to $TMP/NAME.out and a file of ours open on its fds 3 and 7.
echo "caller line" >"$TMP/$P.caller"
bench() {
    n=$1; shift
    "$KGYM" bench --device "$DEVICE" --jsonl "$TMP/${n#*-}.jsonl" --jobs 2 --json --stage-timeout tiny_run=60 \
        --out "$TMP/$n.out" "$@" >"$TMP/$n.json" 2>"$TMP/$n.err" 3>>"$TMP/$P.caller" 7>>"$TMP/$P.caller"
    rc=$?
    if [ $rc -eq 0 ]; then ok "kgym bench survived $n (exit 0)"
    else bad "kgym bench did not survive $n (exit $rc)" "$(tail -5 "$TMP/$n.err")"; fi
}
bench "$P-main" "$@"
for f in $ALONE; do bench "$P-alone-${f%.py}" "$@"; done
mv "$TMP/tcp.log" "$TMP/$P.tcp"
cache_snapshot "$TMP/$P.cache.after"
# The survivor writes its marker 5 s after it started: give it the time.
sleep 7

# (a), (b), (c) per fixture.
"$PY" - "$M" "$TMP" "$P" "$MARKERS" "$TOKEN" "$DEVICE" "$HOME" "$IMPORT_DIRS" >"$TMP/checks" <<'PYEOF'
import glob, json, os, sys
manifest, tmp, pass_, markers, token, device, home, import_dirs = sys.argv[1:]
# Modules, .pth files or bytecode planted where Python imports from (outlive the evaluation: the next zygote).
import_planted = sorted(p for d in import_dirs.splitlines() if d
                        for p in glob.glob(os.path.join(d, "kgatk*")) + glob.glob(os.path.join(d, "__pycache__", "kgatk*")))
# (e) the files of kgym's and of its caller's that were open while the runners ran.
out_lines = [l for n in glob.glob(os.path.join(tmp, pass_ + "-*.out")) for l in open(n).read().splitlines()]
def forged(line):
    try:
        doc = json.loads(line)
    except ValueError:
        return True
    return doc.get("task") == "kgatk-p_fd_forge" or not (doc.get("schema") == "kgym.result/1" or "error" in doc)
forged_out = [l[:120] for l in out_lines if forged(l)]
caller = open(os.path.join(tmp, pass_ + ".caller")).read()
cache_before = json.load(open(os.path.join(tmp, pass_ + ".cache.before")))
cache_after = json.load(open(os.path.join(tmp, pass_ + ".cache.after")))
# The judge may add compiled kernels to its cache (and launchers to the shared modules) during the pass; nothing
# they had may change, and nothing a fixture names may appear in any home seen from outside the sandbox.
cache_changed = sorted(p for p, h in cache_before.items() if cache_after.get(p, h) != h)
planted = sorted({p for h in {home, "/root", *glob.glob("/home/*")} for sub in (".cache/kgym", "kgym")
                  for p in glob.glob(os.path.join(h, sub, "**", "kgatk-*"), recursive=True)}
                 | set(glob.glob("/var/cache/kgym/**/kgatk-*", recursive=True)))
cpu = device == "cpu"
results = {}
for path in glob.glob(os.path.join(tmp, pass_ + "-*.json")):
    try:
        doc = json.load(open(path))
    except ValueError:
        continue
    for e in doc.get("results", []):
        results[os.path.basename(e.get("candidate", ""))] = e
tcp = open(os.path.join(tmp, pass_ + ".tcp")).read() if os.path.exists(os.path.join(tmp, pass_ + ".tcp")) else ""
for line in open(manifest).read().splitlines()[1:]:
    fixture, want, want_runtime, effects = line.split("\t")
    name = fixture[:-3]
    e = results.get(fixture)
    if e is None:
        print(f"FAIL {pass_}: {fixture}: no result (kgym did not answer for it)")
        continue
    r = e.get("result") or {}
    verdict, reward = r.get("verdict"), r.get("reward")
    kinds = sorted({h.get("type") for h in r.get("hacks", [])})
    if pass_ == "default":
        # The whole defence: every attack is refused outright (reward 0).
        allowed = {"hacked": {"hacked"}, "incorrect": {"incorrect", "hacked"}}.get(want)
        good = verdict is not None and verdict != "correct" and reward == 0 and (allowed is None or verdict in allowed)
    else:
        # The runtime layer and the sandbox alone (MANIFEST.tsv's runtime_only column):
        #   hacked: recognised; sandbox: killed by the runner's seccomp filter (sandbox_violation);
        #   sandbox_cpu: so on the CPU (no processes or programs there), elsewhere at least refused;
        #   incorrect: the trick only breaks its own output; refused: no effect and no full reward;
        #   hacked_cpu: recognised on the CPU; elsewhere refused (the same trick fails there by itself: a CUDA
        #             tensor has no .numpy());
        #   open_cpu: on the CPU only the static layer sees it (docs/threat-model.md says why), elsewhere refused
        #             (on a GPU the default coverage floor, 0.5: torch's kernels count against the candidate);
        #   contained_gpu: so on the CPU; on a GPU, where the runner may start the compiler toolchain, the
        #             action fails inside the sandbox (Landlock executes no shell; a private /dev/shm) and has
        #             no effect, the verdict is free (the kernel itself is honest);
        #   open: only the static layer sees it anywhere (host compute: the GPU profile shows only the kernels);
        #   contained: the action succeeds only inside the runner's own view (its private homes and workdir): the
        #             verdict is free (the kernel itself is honest), the effect check outside decides.
        want = want_runtime
        if want == "sandbox_cpu":
            want = "sandbox" if cpu else "refused"
        if want == "contained_gpu":
            want = "sandbox" if cpu else "open"
        if want == "open_cpu":
            want = "open" if cpu else "refused"
        if want == "hacked_cpu":
            want = "hacked" if cpu else "refused"
        refused = verdict is not None and verdict != "correct" and reward is not None and reward < 1
        good = {"hacked": verdict == "hacked" and reward == 0,
                "sandbox": verdict == "hacked" and "sandbox_violation" in kinds and reward == 0,
                "incorrect": verdict in ("incorrect", "hacked") and refused,
                "refused": refused,
                "open": verdict is not None,
                "contained": verdict is not None}[want]
    print(("ok   " if good else "FAIL ") + f"{pass_}: {fixture}: verdict {verdict} reward {reward} hacks {kinds} "
          f"(expected {want})")
    if not good:
        print("     " + str(r.get("feedback") or e.get("error"))[:300].replace("\n", " ")
              + f" (profile coverage {(r.get('profile') or {}).get('coverage')})")
    proc = r.get("process") or {}
    out = (proc.get("stdout") or "") + (proc.get("stderr") or "")
    seen = []
    if "stdout_marker" in effects and f"KGATK-EFFECT {name}" in out:
        seen.append("stdout_marker: " + out.split(f"KGATK-EFFECT {name}", 1)[1].split("\n", 1)[0][:200])
    if os.path.exists(os.path.join(markers, name)):
        seen.append(f"marker_file {markers}/{name}")
    shm = glob.glob(f"/dev/shm/kgatk-*{name}*")
    if shm:
        seen.append(f"shm_file {shm}")
    if name in tcp:
        seen.append("tcp_connect to the listener")
    # Files planted for later evaluations: every evaluation's workdir is gone after it, so a kgatk-* file under
    # /tmp/kgym-* (or /tmp) seen from outside lay in a directory that outlives evaluations.
    left = glob.glob(f"/tmp/kgym-*/**/kgatk-*{name}*", recursive=True) + glob.glob(f"/tmp/kgatk-*{name}*")
    if "slot_plant" in effects and left:
        seen.append(f"slot_plant: {left[:3]}")
    if "judge_cache" in effects and (cache_changed or planted):
        seen.append(f"judge_cache: changed {cache_changed[:3]} planted {planted[:3]}")
    if token in json.dumps(e):
        seen.append("token_leak: KGYM_TOKEN in the result")
    if "import_path" in effects and [p for p in import_planted if name in p]:
        seen.append(f"import_path: {[p for p in import_planted if name in p][:3]}")
    if "fd_forge" in effects and (forged_out or caller != "caller line\n"):
        seen.append(f"fd_forge: forged lines in --out {forged_out[:2]}, caller's file now {caller[:200]!r}")
    # A candidate that fills its folder: the folder is limited (its KGATK-EFFECT line otherwise) and, where the
    # limit was in force and the fixture ran, the feedback says so.
    limited = any(a.startswith("workdir_limit:") for a in (r.get("sandbox") or {}).get("active") or [])
    if "workdir_feedback" in effects and limited and "p_fill_workdir:" in out and \
            "writable folder is limited" not in (r.get("feedback") or ""):
        seen.append("workdir_feedback: the feedback does not name the folder's limit: "
                    + str(r.get("feedback"))[:200])
    print(("ok   " if not seen else "FAIL ") + f"{pass_}: {fixture}: no must-not-happen effect ({effects})"
          + ("" if not seen else ": " + "; ".join(seen)))
PYEOF
while IFS= read -r l; do
    case $l in "ok   "*) ok "${l#ok   }" ;; "FAIL "*) bad "${l#FAIL }" ;; *) echo "$l" ;; esac
done <"$TMP/checks"

# (d) nothing a fixture started is still alive, and /dev/shm holds no new file.
# (zombies are not alive: their state in /proc/PID/stat is Z)
alive=$(for p in $( (pgrep kgatk- ; pgrep -f 'kgatk-') 2>/dev/null | sort -u); do
    [ "$p" != $$ ] && [ "$(cut -d')' -f2 /proc/$p/stat 2>/dev/null | awk '{print $1}')" != Z ] && [ -e /proc/$p ] && echo "$p"
done)
if [ -z "$alive" ]; then ok "$P: no fixture process is alive after the benches"
else
    bad "$P: $(echo $alive | wc -w) fixture processes still alive: $(echo $alive | cut -c1-200)" "$(ps -o pid,ppid,comm,args -p "$(echo $alive | tr ' ' ,)" 2>/dev/null)"
    for p in $alive; do kill -9 "$p" 2>/dev/null; done
fi
ls /dev/shm >"$TMP/shm.after" 2>/dev/null
new=$(comm -13 "$TMP/shm.before" "$TMP/shm.after" | grep -v '^sem\.' )
if [ -z "$new" ]; then ok "$P: no new file left in /dev/shm"
else bad "$P: new files left in /dev/shm: $(echo $new)"; rm -f /dev/shm/kgatk-*; fi
}

# KGYM_ATTACK_PASSES picks the passes (default: both; a GPU session may run them in separate commands).
PASSES=${KGYM_ATTACK_PASSES:-default runtime}
case " $PASSES " in *" default "*) run_pass default ;; esac
# On a GPU the profile is the runtime account of who computed: the default floor on the candidate's share of
# device time (0.5, docs/threat-model.md "Coverage floor") applies to both passes; no flag sets it here.
case " $PASSES " in *" runtime "*)
    [ -f tests/fixtures/hacks/runtime_only.json ] && run_pass runtime --policy tests/fixtures/hacks/runtime_only.json ;;
esac

# On a GPU the judge compares outputs of 2^20 elements or more with its compiled kernel (from the cache
# p_judge_cache went after): after the passes it must still tell a right answer from a wrong one.
if [ "$DEVICE" != cpu ]; then
    sed -e 's/^batch_size = .*/batch_size = 2048/' -e 's/^dim = .*/dim = 1024/' $T >"$TMP/add_one_big.py"
    for c in ok:correct wrong_value:incorrect; do
        "$KGYM" eval --device "$DEVICE" --task "$TMP/add_one_big.py" --kernel "tests/fixtures/candidates/${c%%:*}.py" \
            --json >"$TMP/big-${c%%:*}.json" 2>"$TMP/big.err"
        v=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"])' "$TMP/big-${c%%:*}.json" 2>&1)
        [ "$v" = "${c#*:}" ] && ok "after the attacks, a 2M-element output of ${c%%:*}.py is still judged ${c#*:}" ||
            bad "after the attacks, ${c%%:*}.py on a 2M-element output: $v (expected ${c#*:})" "$(tail -3 "$TMP/big.err")"
    done
fi
finish
