"""Fault injection for `kgym serve` (issue 13), run by tests/integration/test_serve_chaos.sh.

Usage: chaos.py MODE KGYM DEVICE TMPDIR JOBS KILLS SEED
  MODE sqlite: one server (2 worker threads) on a database; it is SIGKILLed KILLS times at random moments
               and started again on the same database.
  MODE redis:  redis-server (appendfsync always), a stateless API server and two `kgym worker`s; KILLS times a
               random one of them is SIGKILLed and started again.
Meanwhile a client submits JOBS jobs in batches of 10 with a batch_id (a retry after a lost answer queues nothing
twice), retrying until each batch is acknowledged (202).  One job in 8 is a real candidate (correct, invalid syntax or
wrong, evaluated in Python); the others are model replies with no code, which C answers without Python in
milliseconds but which go through the store, the queue, the workers and the kills like any job: hundreds of jobs
cost about what two dozen evaluations do.  At the end every acknowledged job must have ended exactly
once: it exists, once, in a final state.  Prints "ok NAME" / "FAIL NAME" lines; the shell script counts them."""
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

MODE, KGYM, DEVICE, TMP = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
JOBS, KILLS, SEED = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
rng = random.Random(SEED)
REF = open("tests/fixtures/tasks/add_one.py").read()
CANDS = {n: open(f"tests/fixtures/candidates/{n}.py").read() for n in ("ok", "syntax_error", "wrong_value")}
BATCH = 10
EXPECTED = {"ok": "correct", "syntax_error": "invalid", "wrong_value": "incorrect", "no_code": "invalid"}


def kind(k):
    """What job k is: one in 8 a real candidate (in turn ok, syntax_error, wrong_value), else a reply with no code."""
    return ("ok", "syntax_error", "wrong_value")[(k // 8) % 3] if k % 8 == 0 else "no_code"


def code_of(k):
    name = kind(k)
    text = CANDS[name] if name != "no_code" else "I would fuse the two loops and use a larger block size here.\n"
    # Every other job is unique (evaluated); the rest repeat content (answered from the store).
    return text + (f"\n# job {k}\n" if (k // 8 if name != "no_code" else k) % 2 else "")
procs = {}  # name -> Popen
lock = threading.Lock()


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name, flush=True)
    if not cond and detail:
        print(str(detail)[:1500], flush=True)


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ports import free_port  # noqa: E402 — below the ephemeral range: a restart on it finds it free (ports.py)

RPORT = free_port()
port = free_port()  # the API server's, kept across its restarts (the old way: 0 at first, inside the ephemeral range)
URL = f"redis://127.0.0.1:{RPORT}"
PORT_FILE = os.path.join(TMP, "chaos.port")


def log(name):
    return open(os.path.join(TMP, f"chaos-{name}.log"), "a")


def start(name):
    """Starts (or starts again) one process of the fleet and waits until it answers."""
    global port
    eval_flags = ["--device", DEVICE, "--stage-timeout", "compile=30", "--stage-timeout", "tiny_run=20"]
    if name == "redis":
        cmd = ["redis-server", "--port", str(RPORT), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
               "--appendfsync", "always", "--dir", TMP]
    elif name == "server" and MODE == "sqlite":
        cmd = [KGYM, "serve", "--workers", "2", "--port", str(port or 0), "--port-file", PORT_FILE, "--db",
               os.path.join(TMP, "chaos.db"), "--max-attempts", "10"] + eval_flags
    elif name == "server":
        cmd = [KGYM, "serve", "--redis", URL, "--workers", "0", "--port", str(port or 0), "--port-file", PORT_FILE]
    else:
        cmd = [KGYM, "worker", "--redis", URL, "--lease", "3", "--max-attempts", "10"] + eval_flags
    if name == "server" and os.path.exists(PORT_FILE):
        os.unlink(PORT_FILE)
    p = subprocess.Popen(cmd, stdout=log(name), stderr=subprocess.STDOUT, start_new_session=False)
    with lock:
        procs[name] = p
    deadline = time.time() + 180
    while time.time() < deadline:
        if name == "redis":
            try:
                socket.create_connection(("127.0.0.1", RPORT), timeout=1).close()
                return
            except OSError:
                pass
        elif name == "server":
            if os.path.exists(PORT_FILE) and open(PORT_FILE).read().strip():
                port = int(open(PORT_FILE).read())
                return
        else:
            return  # a worker retries Redis on its own
        if p.poll() is not None:
            # A port just freed by a SIGKILLed server may still be taken for a moment: try again.
            time.sleep(0.5)
            p = subprocess.Popen(cmd, stdout=log(name), stderr=subprocess.STDOUT)
            with lock:
                procs[name] = p
        time.sleep(0.1)
    raise RuntimeError(f"{name} did not start")


def call(method, path, body=None, timeout=30):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                               headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=timeout) as f:
            return f.status, json.load(f)
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.load(e)
        except ValueError:
            return e.code, None
    except (OSError, ValueError):
        return 0, None  # the server is down (killed) or the answer was cut


acked = {}  # id -> batch
submitted_batches = 0
done_submitting = threading.Event()


def submitter():
    global submitted_batches
    nb = (JOBS + BATCH - 1) // BATCH
    for b in range(nb):
        jobs = []
        for i in range(BATCH):
            k = b * BATCH + i
            if k >= JOBS:
                break
            jobs.append({"reference_code": REF, "kernel_code": code_of(k)})
        body = {"batch_id": f"chaos-{SEED}-{b}", "jobs": jobs}
        while True:
            s, d = call("POST", "/v1/jobs", body)
            if s == 202:
                for j in d["jobs"]:
                    acked[j["id"]] = b
                break
            time.sleep(0.2)  # down, 503 or 429: retry the same batch (same ids)
        submitted_batches += 1
        time.sleep(rng.uniform(0.1, 0.8))  # spread over the kills
    done_submitting.set()


def killer():
    targets = ["server"] if MODE == "sqlite" else ["server", "worker1", "worker2", "redis"]
    for k in range(KILLS):
        time.sleep(rng.uniform(0.5, 3.0))
        name = rng.choice(targets)
        with lock:
            p = procs[name]
        p.send_signal(signal.SIGKILL)
        p.wait()
        print(f"     kill {k + 1}: {name} (pid {p.pid}) SIGKILLed after {submitted_batches} batches", flush=True)
        time.sleep(rng.uniform(0.1, 1.0))
        start(name)


def main():
    names = ["server"] if MODE == "sqlite" else ["redis", "server", "worker1", "worker2"]
    for n in names:
        start(n)
    print(f"     {MODE}: {JOBS} jobs, {KILLS} kills, seed {SEED}", flush=True)
    ts = threading.Thread(target=submitter)
    tk = threading.Thread(target=killer)
    ts.start()
    tk.start()
    tk.join()
    ts.join()
    check(f"{MODE}: every batch acknowledged in the end ({len(acked)} jobs)", len(acked) == JOBS, len(acked))
    # Every acknowledged job ends, exactly once.
    deadline = time.time() + 600
    states = {}
    for jid in sorted(acked):
        while time.time() < deadline:
            s, d = call("GET", f"/v1/jobs/{jid}?wait=30", timeout=60)
            if s == 200 and d["status"] in ("done", "failed", "cancelled"):
                states[jid] = d
                break
            if s == 404:
                states[jid] = None
                break
            time.sleep(0.2)
    lost = [j for j in acked if j in states and states[j] is None]
    unfinished = [j for j in acked if j not in states]
    check(f"{MODE}: no acknowledged job lost", not lost, lost)
    check(f"{MODE}: every acknowledged job ended", not unfinished, unfinished)
    s, listing = call("GET", "/v1/jobs?limit=10000")
    ids = [j["id"] for j in (listing or {}).get("jobs", []) if j["id"].startswith(f"chaos-{SEED}-")]
    check(f"{MODE}: each job stored once, none twice ({len(ids)} listed)",
          sorted(ids) == sorted(set(ids)) and set(ids) == set(acked), (len(ids), len(set(ids)), len(acked)))
    verdicts = {}
    for d in states.values():
        if d:
            verdicts[d["status"] + "/" + str(d["verdict"])] = verdicts.get(d["status"] + "/" + str(d["verdict"]), 0) + 1
    print(f"     outcomes: {verdicts}", flush=True)
    wrong = []
    for jid, d in states.items():
        k = int(jid.rsplit("-", 2)[-2]) * BATCH + int(jid.rsplit("-", 1)[-1])
        want = EXPECTED[kind(k)]
        if d and not (d["status"] == "done" and d["verdict"] == want):
            wrong.append((jid, d["status"], d["verdict"], d.get("error")))
    check(f"{MODE}: every job's outcome is its candidate's verdict (none failed by the kills)", not wrong, wrong)


try:
    main()
finally:
    for p in procs.values():
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs.values():
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
