#!/usr/bin/env python3
"""The client and the analysis of bench/fleet.sh: a Redis fleet (`kgym serve --redis`, `kgym worker`) on one machine.

    fleet.py free-port                                    a free loopback TCP port
    fleet.py redis-ping --port P [--wait S]               exit 0 once Redis answers PING
    fleet.py await-workers --url URL --count N [--wait S] exit 0 once /workers/status lists N live workers
    fleet.py run --url URL --redis-port P --list FILE --name NAME --out RUN.json [--kill-device D | --kill-pid PID]
                 [--kill-at F] [--slot PID=LABEL]... [--timeout S] [--wait S]
    fleet.py report --out SUMMARY.json NAME=RUN.json...   the table, the ratio, the PASS/FAIL lines

`run` submits every line of a `kgym bench` list (`{"kernelbench": "level1/19" | "task": PATH, "candidate": PATH}`)
to the API server as one `POST /v1/jobs` batch (chunks of 1,000, the batch limit), follows Redis's `kgym:done`
notifications (one per finished or cancelled job: the exactly-once check counts them), polls `GET /v1/jobs` for
progress, optionally SIGKILLs one worker process once a share of the jobs ended, and when every job ended reads each
job whole (`GET /v1/jobs/{id}`: status, verdict, attempts, worker, cached_from, times) and Redis's `kgym:counts`.
Standard library only (the GPU machine's python3 runs it; it imports nothing of torch).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# One table writer (and one reading of results) for every bench report.
from gpu_report import (ReportError, cache_reasons, fmt, md_table, num, read_pairs, timing_rows,  # noqa: E402
                        verdict_line)

GOAL_RATIO = 1.9  # issue 38: throughput of two GPUs / one GPU on the GRPO-shaped mix
ENDED = ("done", "failed", "cancelled")


def log(msg):
    print(f"fleet: {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------- HTTP


def call(base, method, path, body=None, timeout=120):
    """(status, JSON document or text) of one request; connection errors are retried for a few seconds."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
    for attempt in range(20):
        try:
            with urllib.request.urlopen(req, timeout=timeout) as f:
                status, text = f.status, f.read()
            break
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read()
            break
        except (urllib.error.URLError, ConnectionError, socket.timeout) as e:
            if attempt == 19:
                raise SystemExit(f"fleet.py: {method} {base}{path}: {e}")
            time.sleep(0.5)
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text.decode("utf-8", "replace")


# ------------------------------------------------------------------------------------------ Redis


class Resp:
    """A minimal RESP2 client (the GPU machine has redis-server but no redis-cli or Python package)."""

    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.f = self.sock.makefile("rb")

    def send(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))

    def read(self):
        line = self.f.readline()
        if not line:
            raise ConnectionError("Redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError("Redis: " + rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2].decode("utf-8", "replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError(f"Redis: unexpected reply {line!r}")

    def cmd(self, *args):
        self.send(*args)
        return self.read()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class DoneWatch(threading.Thread):
    """Every `PUBLISH kgym:done ID` while the run lasts: (id, arrival time).  A job that ends twice would publish
    twice; a job that never ends never publishes."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.r = Resp(port, timeout=None)
        self.r.cmd("SUBSCRIBE", "kgym:done")  # the subscription is in force once this answer is read
        self.events = []
        self.error = None

    def run(self):
        try:
            while True:
                m = self.r.read()
                if isinstance(m, list) and len(m) == 3 and m[0] == "message":
                    self.events.append((m[2], time.time()))
        except Exception as e:  # noqa: BLE001 - the connection closed at the end, or Redis went away
            self.error = str(e)


# ------------------------------------------------------------------------------------------ /proc


def owned_by(pid):
    """Processes whose environment carries KGYM_SERVE_OWNER=PID:... (what the worker process PID started: its
    zygote, judges, runners, warm pairs, its guardian), as {pid: command}.  Unreadable ones are left out."""
    mark = f"KGYM_SERVE_OWNER={pid}:".encode()
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == pid:
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read()
            if not any(v.startswith(mark) for v in env.split(b"\0")):
                continue
            with open(f"/proc/{d}/cmdline", "rb") as f:
                out[int(d)] = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:120]
        except OSError:
            continue
    return out


def alive(pid):
    """True while PID runs (a zombie, killed but not yet reaped by its parent, is not running)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# ------------------------------------------------------------------------------------------ parts


def parse_worker(name):
    """(pid, device) from a worker name host:pid:device#i; (None, None) for anything else."""
    if not isinstance(name, str):
        return None, None
    parts = name.split(":", 2)
    if len(parts) < 3 or not parts[1].isdigit():
        return None, None
    return int(parts[1]), parts[2].rsplit("#", 1)[0]


def read_list(path):
    """The pairs of a kgym bench list (gpu_report.read_pairs), each one a fleet job can name."""
    try:
        pairs = read_pairs(path)
    except (ReportError, OSError) as e:
        raise SystemExit(f"fleet.py: {e}")
    for n, p in enumerate(pairs, 1):
        if not isinstance(p, dict) or "candidate" not in p or not (p.get("kernelbench") or p.get("task")):
            raise SystemExit(f"fleet.py: {path}: pair {n} needs \"candidate\" and \"kernelbench\" or \"task\"")
    return pairs


def request_of(pair, job_id, timeout):
    """The job's request: a KernelBench id is resolved by the API server (--kernelbench); a task file goes as
    reference_code.  The candidate's bytes go as kernel_code (a model's reply would go the same way)."""
    with open(pair["candidate"], encoding="utf-8") as f:
        body = {"task_id": job_id, "kernel_code": f.read()}
    if pair.get("kernelbench"):
        body["task"] = pair["kernelbench"]
    else:
        with open(pair["task"], encoding="utf-8") as f:
            body["reference_code"] = f.read()
    if timeout:
        body["timeout"] = timeout
    return body


def job_record(d, index, pair):
    r = d.get("result") if isinstance(d.get("result"), dict) else {}
    t = r.get("timing") if isinstance(r.get("timing"), dict) else {}
    proc = r.get("process") if isinstance(r.get("process"), dict) else {}
    phases = r.get("gpu_phases") if isinstance(r.get("gpu_phases"), dict) else {}
    shared = phases.get("shared") if isinstance(phases.get("shared"), dict) else {}
    excl = phases.get("exclusive") if isinstance(phases.get("exclusive"), dict) else {}
    err = r.get("error") if isinstance(r.get("error"), dict) else {}
    cpu = proc.get("cpu_s") if isinstance(proc.get("cpu_s"), dict) else {}
    cpu_ms = {who: 1000 * num(cpu.get(who)) if num(cpu.get(who)) is not None else None for who in ("judge", "runner")}
    # Where an evaluation's time went, and what an error said: the next run's answer to "why slower" and "why
    # failed" must not need the results, which go with the fleet's Redis.
    return {"id": d.get("id"), "index": index, "task": pair.get("kernelbench") or pair.get("task"),
            "candidate": pair.get("candidate"), "expect": pair.get("expect"), "status": d.get("status"),
            "verdict": d.get("verdict"), "attempts": d.get("attempts"), "worker": d.get("worker"),
            "cached_from": d.get("cached_from"), "submitted_at": d.get("submitted_at"),
            "started_at": d.get("started_at"), "finished_at": d.get("finished_at"), "error": d.get("error"),
            "wall_ms": r.get("wall_ms"), "speedup": t.get("speedup"), "gpu": t.get("gpu"),
            # What the timing-precision table reads (gpu_report.timing_rows): whether two GPUs' evaluations put
            # each other's timing off.
            "timing": {k: t.get(k) for k in ("speedup", "remeasured", "noisy", "round_cv", "checks")} if t else None,
            "stages_ms": {st.get("name"): st.get("ms") for st in r.get("stages") or [] if isinstance(st, dict)},
            "setup_ms": proc.get("setup_ms"), "judge_served": proc.get("judge_served"), "warm": proc.get("warm"),
            "judge_cpu_ms": cpu_ms["judge"], "runner_cpu_ms": cpu_ms["runner"],
            "shared_held_ms": shared.get("held_ms"), "shared_waited_ms": shared.get("waited_ms"),
            "exclusive_held_ms": excl.get("held_ms"), "exclusive_waited_ms": excl.get("waited_ms"),
            "compile_cache": r.get("compile_cache") if isinstance(r.get("compile_cache"), dict) else None,
            "result_error": (f"{err.get('type')}: {err.get('message')}"[:300] if err else None)}


# ------------------------------------------------------------------------------------------ run


class Killer:
    """SIGKILLs one worker process once `at` of the jobs ended; then records what it was running and how long
    what it started outlived it."""

    def __init__(self, base, pid=None, device=None, at=1 / 3):
        self.base, self.pid, self.device, self.at = base, pid, device, at
        self.done = self.stop = False
        self.info = {"at_share": at}

    def target(self):
        if self.pid:
            return self.pid
        s, d = call(self.base, "GET", "/workers/status")
        pids = sorted({parse_worker(w.get("id"))[0] for w in (d.get("worker_list") or [] if s == 200 else [])
                       if parse_worker(w.get("id"))[1] == self.device})
        if len(pids) != 1:
            raise SystemExit(f"fleet.py: no single worker process on {self.device} in /workers/status "
                             f"(found pids {pids})")
        return pids[0]

    def running_on(self, pid):
        """The jobs running now on worker process PID (their ids and names)."""
        out = []
        s, d = call(self.base, "GET", "/v1/jobs?status=running&limit=10000")
        for j in (d.get("jobs") or [] if s == 200 else []):
            s2, full = call(self.base, "GET", f"/v1/jobs/{j['id']}")
            if s2 == 200 and full.get("status") == "running" and parse_worker(full.get("worker"))[0] == pid:
                out.append({"id": full["id"], "attempts": full.get("attempts"), "worker": full.get("worker")})
        return out

    def ready(self, ended, total):
        """Time to kill: a share `at` of the jobs ended and the victim is running one at least (a kill of an idle
        worker would test nothing)."""
        if self.done or ended < self.at * total:
            return False
        if self.pid is None:
            self.pid = self.target()
        return bool(self.running_on(self.pid))

    def fire(self, ended, total):
        pid = self.pid or self.target()
        owned = owned_by(pid)
        t = time.time()
        os.kill(pid, signal.SIGKILL)
        self.done = True
        self.info.update({"pid": pid, "device": self.device, "time": t, "ended_before": ended, "jobs": total,
                          "owned_before": len(owned)})
        log(f"SIGKILL to worker process {pid}{' (' + self.device + ')' if self.device else ''} after {ended} of "
            f"{total} jobs ended; it had started {len(owned)} process(es)")
        # What it was running: its jobs stay `running` under its name until another worker takes them over
        # (a lease later), so a read a moment after the kill sees every one.
        time.sleep(1.0)
        running = self.running_on(pid)
        self.info["running"] = running
        self.info["worker_name_prefix"] = running[0]["worker"].rsplit("#", 1)[0] if running else None
        log(f"the killed worker was running {len(running)} job(s): {' '.join(j['id'] for j in running) or '-'}")
        threading.Thread(target=self.watch_owned, args=(pid, t), daemon=True).start()

    def watch_owned(self, pid, t):
        """How long the processes the killed worker started outlive it (its guardian ends them once the worker is
        gone: docs/service.md, "No evaluation outlives its server").  Sampled until none is left; the run does not
        wait for it (finish() reads where it stands)."""
        while not self.stop:
            left = owned_by(pid)
            el = time.time() - t
            if el >= 5 and "owned_left_5s" not in self.info:
                self.info["owned_left_5s"] = len(left)
            if os.path.exists(f"/proc/{pid}") and not alive(pid):
                self.info["zombie_s"] = round(el, 1)  # killed, not yet reaped by its parent
            if not left:
                self.info["owned_gone_after_s"] = round(el, 1)
                return
            time.sleep(0.5)

    def finish(self):
        """Where the killed worker's processes stand at the end of the run."""
        self.stop = True
        if self.done and "owned_gone_after_s" not in self.info:
            left = owned_by(self.info["pid"])
            self.info["owned_left_at_end"] = {"after_s": round(time.time() - self.info["time"], 1),
                                              "processes": sorted(left.values())[:10], "count": len(left)}
            if not left:
                self.info["owned_gone_after_s"] = self.info["owned_left_at_end"]["after_s"]


def cmd_run(a):
    base = a.url.rstrip("/")
    pairs = read_list(a.list)
    ids = [f"{a.name}-{i:04d}" for i in range(len(pairs))]
    reqs = [request_of(p, i, a.timeout) for p, i in zip(pairs, ids)]
    slots = dict(s.split("=", 1) for s in a.slot)
    watch = DoneWatch(a.redis_port)
    watch.start()
    killer = Killer(base, a.kill_pid, a.kill_device, a.kill_at) if (a.kill_pid or a.kill_device) else None

    log(f"{a.name}: submitting {len(reqs)} jobs")
    t_submit = time.time()
    acked = []
    for k in range(0, len(reqs), 1000):
        chunk = reqs[k:k + 1000]
        s, d = call(base, "POST", "/v1/jobs", {"jobs": chunk, "batch_id": f"{a.name}-{k // 1000}"}, timeout=300)
        if s != 202:
            raise SystemExit(f"fleet.py: POST /v1/jobs answered {s}: {str(d)[:500]}")
        acked += d["jobs"]
    submit_s = time.time() - t_submit
    log(f"{a.name}: {len(acked)} jobs acknowledged (202) in {submit_s:.2f} s, "
        f"{sum(1 for j in acked if j.get('cached'))} answered at submit")

    deadline = t_submit + a.wait
    last_print, last_ended = 0.0, -1
    while True:
        s, d = call(base, "GET", f"/v1/jobs?limit={max(len(ids) + 100, 100)}")
        jobs = d.get("jobs") or [] if s == 200 else []
        by = {}
        for j in jobs:
            by[j["status"]] = by.get(j["status"], 0) + 1
        ended = sum(by.get(x, 0) for x in ENDED)
        now = time.time()
        if ended != last_ended and (now - last_print >= a.progress or ended == len(ids)):
            log(f"{a.name}: {ended}/{len(ids)} ended ({by.get('running', 0)} running, {by.get('queued', 0)} queued) "
                f"at {now - t_submit:.1f} s")
            last_print, last_ended = now, ended
        if killer and killer.ready(ended, len(ids)):
            killer.fire(ended, len(ids))
            continue
        if ended >= len(ids):  # with --kill and no kill yet: the victim never ran a job after the threshold
            break
        if now > deadline:
            log(f"{a.name}: gave up waiting after {a.wait} s: {ended} of {len(ids)} jobs ended")
            break
        time.sleep(0.5)
    t_end = time.time()

    # Every job whole, in list order; late notifications have a moment to arrive.
    records = []
    for i, (jid, pair) in enumerate(zip(ids, pairs)):
        s, d = call(base, "GET", f"/v1/jobs/{jid}")
        records.append(job_record(d, i, pair) if s == 200 else {"id": jid, "index": i, "status": f"HTTP {s}",
                                                               "task": pair.get("kernelbench") or pair.get("task")})
    s, listing = call(base, "GET", "/v1/jobs?limit=10000")
    time.sleep(2.0)
    r = Resp(a.redis_port)
    counts = r.cmd("HGETALL", "kgym:counts") or []
    r.close()
    watch.r.close()
    if killer:
        killer.finish()
    s, workers = call(base, "GET", "/workers/status")
    doc = {"name": a.name, "list": os.path.abspath(a.list), "gpus": a.gpus, "workers_per_gpu": a.workers_per_gpu,
           "device": a.device, "lease_s": a.lease, "jobs": len(ids), "t_submit": t_submit, "submit_s": submit_s,
           "t_end": t_end, "slots": slots, "acked": acked,
           "listed": [j["id"] for j in (listing.get("jobs") or [])] if isinstance(listing, dict) else None,
           "done_events": watch.events, "counts": dict(zip(counts[0::2], map(int, counts[1::2]))),
           "kill": killer.info if killer and killer.done else None,
           "workers_at_end": [w.get("id") for w in (workers.get("worker_list") or [])] if isinstance(workers, dict)
           else None, "records": records}
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, a.out)
    ended = sum(1 for x in records if x.get("status") in ENDED)
    log(f"{a.name}: {ended}/{len(ids)} jobs ended; {a.out}")
    return 0


# ------------------------------------------------------------------------------------------ report


def slot_of(doc, worker):
    """The GPU a job ran on: the worker's device (cuda:N), or for CPU workers the slot fleet.sh gave its process."""
    pid, dev = parse_worker(worker)
    if pid is None:
        return "-"
    return doc["slots"].get(str(pid)) or dev


def figures(doc):
    recs = doc["records"]
    ended = [r for r in recs if r.get("status") in ENDED]
    fins = [num(r.get("finished_at")) for r in ended if num(r.get("finished_at"))]
    wall = max(fins) - doc["t_submit"] if fins and len(ended) == len(recs) else None
    answered = [r for r in recs if r.get("status") == "done"]
    twins = [r for r in answered if r.get("cached_from")]
    evaluated = len(answered) - len(twins)
    verdicts = {}
    for r in answered:
        verdicts[r.get("verdict") or "-"] = verdicts.get(r.get("verdict") or "-", 0) + 1
    failed = [r for r in recs if r.get("status") == "failed"]
    if failed:
        verdicts["job failed"] = len(failed)
    per = {}
    for r in answered:
        p = per.setdefault(slot_of(doc, r.get("worker")), {"jobs": 0, "evaluated": 0})
        p["jobs"] += 1
        p["evaluated"] += not r.get("cached_from")
    ngpu = len(doc["gpus"])
    summed = sum(num(r.get("wall_ms")) or 0 for r in answered if not r.get("cached_from")) / 1000
    return {"name": doc["name"], "gpus": doc["gpus"], "workers_per_gpu": doc["workers_per_gpu"],
            "device": doc["device"], "jobs": len(recs), "ended": len(ended), "answered": len(answered),
            "evaluated": evaluated, "from_twin": len(twins), "wall_s": wall,
            "evaluations_per_gpu_hour": evaluated * 3600 / wall / ngpu if wall else None,
            "evaluations_per_hour": evaluated * 3600 / wall if wall else None,
            "answers_per_hour": len(answered) * 3600 / wall if wall else None,
            "verdicts": dict(sorted(verdicts.items(), key=lambda kv: -kv[1])),
            "rerun": sum(1 for r in recs if (r.get("attempts") or 0) > 1), "per_gpu": dict(sorted(per.items())),
            "summed_evaluation_wall_s": summed,
            "slots_busy": summed / (doc["workers_per_gpu"] * ngpu * wall) if wall and doc["workers_per_gpu"] else None}


def ratio_parts(one, full):
    """Issue 38's ratio taken apart, exactly: with the same evaluations in both runs, a run's wall is its summed
    evaluation wall over (slots x the share of slot-time they were busy), so
    all / one = (GPUs) x (one's summed evaluation wall / all's) x (all's slots busy / one's).  The second factor is
    what the GPUs do to each other's evaluations (below 1: evaluations run longer with both GPUs busy); the third
    is the batch's tail (slots left idle while the last evaluations end).  None where a figure is missing."""
    if not (one.get("slots_busy") and full.get("slots_busy") and full["summed_evaluation_wall_s"]
            and one["evaluated"] == full["evaluated"] and one["workers_per_gpu"] == full["workers_per_gpu"]):
        return None
    n = len(full["gpus"]) / len(one["gpus"])
    length = one["summed_evaluation_wall_s"] / full["summed_evaluation_wall_s"]
    busy = full["slots_busy"] / one["slots_busy"]
    return {"gpus": n, "evaluation_length": length, "slots_busy": busy, "product": n * length * busy}


def integrity(doc):
    """Checks every run must pass: (ok, text) pairs.  Every acknowledged job listed once, ended once (one
    notification on kgym:done each, kgym:counts summing to the jobs), with status done or a failure naming the
    interruption."""
    recs = doc["records"]
    ids = [r["id"] for r in recs]
    out = []
    acked = [j.get("id") for j in doc.get("acked") or []]
    out.append((sorted(acked) == sorted(ids), f"every job acknowledged (202): {len(acked)} of {len(ids)}"))
    listed = doc.get("listed") or []
    extra, missing = sorted(set(listed) - set(ids)), sorted(set(ids) - set(listed))
    out.append((not extra and not missing and len(listed) == len(set(listed)),
                f"the store lists exactly the submitted jobs, each once ({len(listed)} listed"
                + (f"; missing {missing[:5]}" if missing else "") + (f"; unknown {extra[:5]}" if extra else "") + ")"))
    bad = [r for r in recs if r.get("status") != "done" and not (r.get("status") == "failed" and
                                                                "interrupted" in str(r.get("error") or ""))]
    failed = [r for r in recs if r.get("status") == "failed"]
    out.append((not bad, f"every job ended done ({sum(1 for r in recs if r.get('status') == 'done')}) or failed "
                         f"naming the interruption ({len(failed)})"
                + ("; not so: " + ", ".join(f"{r['id']} {r.get('status')} {str(r.get('error') or '')[:80]}"
                                            for r in bad[:5]) if bad else "")))
    n_events = {}
    for jid, _t in doc.get("done_events") or []:
        n_events[jid] = n_events.get(jid, 0) + 1
    twice = sorted(j for j, n in n_events.items() if n > 1)
    never = sorted(set(ids) - set(n_events))
    out.append((not twice and not never and set(n_events) <= set(ids),
                f"each job ended exactly once: one kgym:done notice per job ({len(doc.get('done_events') or [])} "
                f"for {len(ids)} jobs" + (f"; twice: {twice[:5]}" if twice else "")
                + (f"; none: {never[:5]}" if never else "") + ")"))
    total = sum(doc.get("counts", {}).values())
    out.append((total == len(ids), f"kgym:counts sums to the jobs ({total} = "
                                   + ", ".join(f"{k} {v}" for k, v in doc.get("counts", {}).items()) + ")"))
    return out


def kill_checks(doc, ref=None):
    """The kill run's checks: (ok or None for a note, text)."""
    k = doc.get("kill")
    if not k:
        return [(False, "the worker process was killed (no kill happened: from the moment a third of the jobs had "
                        "ended, the worker to kill never ran one)")]
    recs = {r["id"]: r for r in doc["records"]}
    out = [(True, f"SIGKILL to worker process {k['pid']}" + (f" ({k['device']})" if k.get("device") else "")
                  + f" after {k['ended_before']} of {k['jobs']} jobs ended")]
    running = k.get("running") or []
    out.append((len(running) > 0, f"the killed worker was running {len(running)} job(s) at the kill"
                + ("" if running else ": nothing to take over, the kill tested nothing")))
    lease = doc.get("lease_s")
    taken, notes = [], []
    for j in running:
        r = recs.get(j["id"]) or {}
        pid, _dev = parse_worker(r.get("worker"))
        ok = (r.get("status") == "done" and pid is not None and pid != k["pid"] and (r.get("attempts") or 0) >= 2)
        if ok:
            taken.append(r)
        else:
            notes.append(f"{j['id']}: {r.get('status')} on {r.get('worker')}, attempts {r.get('attempts')}")
    out.append((len(taken) == len(running) and running != [],
                f"every job the killed worker was running was taken over and finished done by a surviving worker "
                f"(attempts ≥ 2): {len(taken)} of {len(running)}" + ("; not so: " + "; ".join(notes[:5]) if notes
                                                                       else "")))
    if taken:
        restarts = [num(r.get("started_at")) - k["time"] for r in taken if num(r.get("started_at"))]
        if restarts:
            out.append((None, f"taken over {min(restarts):.1f}–{max(restarts):.1f} s after the kill (lease {lease} s)"
                        + ", on " + ", ".join(sorted({slot_of(doc, r.get('worker')) for r in taken}))))
    late = [r["id"] for r in doc["records"] if parse_worker(r.get("worker"))[0] == k["pid"]
            and num(r.get("finished_at")) and r["finished_at"] > k["time"]]
    out.append((not late, "no job finished by the killed worker after the kill"
                + (f": {late[:5]}" if late else "")))
    rerun = [r["id"] for r in doc["records"] if (r.get("attempts") or 0) > 1]
    other = sorted(set(rerun) - {j["id"] for j in running})
    out.append((None, f"jobs re-run (attempts > 1): {len(rerun)}"
                + (f", of which {len(other)} not seen running on the killed worker: {other[:5]}" if other else "")))
    if ref:
        same = diff = 0
        diffs = []
        by_index = {r["index"]: r for r in ref["records"]}
        for r in doc["records"]:
            o = by_index.get(r["index"])
            if not o or r.get("status") != "done" or o.get("status") != "done":
                continue
            if r.get("verdict") == o.get("verdict"):
                same += 1
            else:
                diff += 1
                diffs.append(f"{r.get('task')} #{r['index']}: {o.get('verdict')} → {r.get('verdict')}")
        out.append((None, f"verdicts equal to run {ref['name']}'s for the same pairs: {same} of {same + diff}"
                    + ("; differing: " + "; ".join(diffs[:5]) if diffs else "")))
    gone, end = k.get("owned_gone_after_s"), k.get("owned_left_at_end")
    if k.get("owned_before") is not None:
        text = f"processes the killed worker had started ({k['owned_before']}, its zygote, warm pairs, evaluations): "
        if gone is not None:
            text += f"all gone {gone} s after the kill"
        elif end:
            text += (f"{end['count']} still there at the run's end, {end['after_s']} s after the kill: "
                     + "; ".join(end["processes"][:3]))
        if k.get("zombie_s") is not None and gone is None:
            text += (f" (the killed worker was still an unreaped zombie {k['zombie_s']} s after the kill: its "
                     "guardian takes a zombie for alive, so it kills nothing until the parent reaps it)")
        out.append((None, text))
    return out


def agreement(doc, ref):
    """The same pairs give the same verdicts on all GPUs as on one (the mix's candidates are clearly correct or
    clearly wrong): a GPU whose evaluations fail for a reason of its own is a broken run, not a fast one (a
    second GPU's worker once failed every evaluation in 4-6 s, "CUDA error: invalid device ordinal", and the
    ratio read ×2.4)."""
    want = {r["index"]: r.get("verdict") for r in ref["records"]}
    diff = [(r["index"], r.get("task"), want.get(r["index"]), r.get("verdict"), r.get("worker"), r.get("result_error"))
            for r in doc["records"] if r["index"] in want and want[r["index"]] != r.get("verdict")]
    if not diff:
        return [(True, f"verdicts equal to run one's for every pair ({len(doc['records'])})")]
    show = "; ".join(f"#{i} {t}: {a} → {b} on {w}" + (f" ({e})" if e else "") for i, t, a, b, w, e in diff[:4])
    return [(False, f"{len(diff)} verdict(s) differ from run one's: {show}")]


def breakdown(runs):
    """Where an evaluation's time went, per run and GPU (means over the evaluated jobs): the stages, the set-up,
    the shared GPU phases held and waited for, the exclusive windows; and how many ran in a judge kept for their
    task.  Evaluations that take longer on all GPUs than on one point at what the GPUs share (the CPUs, host
    memory, the driver) rather than at either GPU."""
    rows = []
    for name, doc in runs:
        by = {}
        for r in doc["records"]:
            if r.get("status") == "done" and not r.get("cached_from"):
                by.setdefault(slot_of(doc, r.get("worker")), []).append(r)
        for gpu, rs in sorted(by.items()):
            def mean(f):
                v = [num(f(r)) for r in rs]
                v = [x for x in v if x is not None]
                return fmt(sum(v) / len(v) / 1000, ".2f") if v else "-"
            st = lambda n: (lambda r: (r.get("stages_ms") or {}).get(n))
            known = [r for r in rs if num(r.get("judge_served")) is not None]
            kept = f"{sum(1 for r in known if num(r.get('judge_served')) > 0)} of {len(rs)}" if known else "-"
            # The trusted compile cache (result compile_cache): its requests found filed or after a twin's worker,
            # compiled by a worker, failed (the runner compiled itself) — a cache serving nothing shows here.
            cc = [r["compile_cache"] for r in rs if isinstance(r.get("compile_cache"), dict)]
            csum = lambda *ks: int(sum(num(c.get(k)) or 0 for c in cc for k in ks))
            cache = f"{csum('hits', 'joined')}/{csum('compiled')}/{csum('failed', 'refused')}" if cc else "-"
            rows.append([name, gpu, len(rs), mean(lambda r: r.get("wall_ms")), mean(lambda r: r.get("setup_ms")),
                         mean(st("compile")), mean(st("tiny_run")), mean(st("correctness")), mean(st("timing")),
                         mean(lambda r: r.get("shared_held_ms")), mean(lambda r: r.get("shared_waited_ms")),
                         mean(lambda r: r.get("exclusive_held_ms")), kept,
                         mean(lambda r: r.get("judge_cpu_ms")), mean(lambda r: r.get("runner_cpu_ms")), cache])
    if not rows:
        return ""
    # Why compile requests failed or were refused (compile_cache.reasons), most frequent first, per run.
    why = []
    for name, doc in runs:
        top = cache_reasons(doc["records"])
        if top:
            why.append(f"- {name}: compile cache: " + "; ".join(f"{n}x {w}" for w, n in top))
    return "\nmeans per evaluation, seconds:\n\n" + md_table(
        ["run", "GPU", "evaluated", "wall", "set-up", "compile", "tiny run", "correctness", "timing", "shared held",
         "shared waited", "exclusive held", "in kept judges", "judge CPU", "runner CPU",
         "compile cache served/compiled/failed"], rows) + ("\n\n" + "\n".join(why) if why else "")


def cmd_report(a):
    runs = []
    for spec in a.runs:
        name, sep, path = spec.partition("=")
        if not sep:
            raise SystemExit(f"fleet.py report: a run is NAME=FILE, not {spec!r}")
        with open(path, encoding="utf-8") as f:
            runs.append((name, json.load(f)))
    rows, figs = [], {}
    for name, doc in runs:
        f = figures(doc)
        figs[name] = f
        per = ", ".join(f"{g} {p['jobs']} ({p['evaluated']} evaluated)" for g, p in f["per_gpu"].items()) or "-"
        rows.append([name + (" (SIGKILL)" if doc.get("kill") else ""), ",".join(doc["gpus"]), f["workers_per_gpu"],
                     f["jobs"], f"{f['evaluated']} + {f['from_twin']}",
                     f"{fmt(f['wall_s'], ',.1f')} s", fmt(f["evaluations_per_gpu_hour"], ",.0f"),
                     fmt(f["answers_per_hour"], ",.0f"),
                     ", ".join(f"{k} {v}" for k, v in f["verdicts"].items()) or "-", f["rerun"], per])
    table = md_table(["run", "GPUs", "workers / GPU", "jobs", "evaluated + from a twin", "wall (submit → last end)",
                      "evaluations / GPU-hour", "answers / h", "verdicts", "attempts > 1", "jobs per GPU"], rows)
    dev = runs[0][1].get("device") or "?"
    print(f"\nfleet: {runs[0][1]['jobs']} jobs a run ({os.path.basename(runs[0][1]['list'])}), device {dev}, "
          f"Redis + kgym serve --redis --workers 0 + kgym worker\n")
    print(table)
    summary = {"command": a.command, "commit": a.commit, "gpu_name": a.gpu_name, "date": time.strftime("%Y-%m-%d"),
               "runs": figs, "checks": [], "pass": True}
    docs = dict(runs)
    one, full = figs.get("one"), figs.get("all")
    if one and full and one["answers_per_hour"] and full["answers_per_hour"]:
        ratio = full["answers_per_hour"] / one["answers_per_hour"]
        ratio_e = (full["evaluations_per_hour"] / one["evaluations_per_hour"]
                   if one["evaluations_per_hour"] and full["evaluations_per_hour"] else None)
        summary["ratio"] = {"answers_per_hour": ratio, "evaluations_per_hour": ratio_e}
        print(f"\n{len(full['gpus'])} GPUs / 1 GPU: answers per hour ×{ratio:.3f}, evaluations per hour "
              f"×{fmt(ratio_e, '.3f')} (wall {fmt(one['wall_s'], '.1f')} s → {fmt(full['wall_s'], '.1f')} s)")
        parts = ratio_parts(one, full)
        if parts:
            summary["ratio"]["parts"] = parts
            print(f"the ratio's parts: ×{parts['gpus']:g} GPUs × {parts['evaluation_length']:.3f} (evaluations' "
                  f"length, one GPU's summed wall / all's) × {parts['slots_busy']:.3f} (slots busy: one "
                  f"{one['slots_busy']:.1%}, all {full['slots_busy']:.1%}) = ×{parts['product']:.3f}")
        if len(full["gpus"]) == 2 and full["device"] == "cuda":
            same = all(ok is not False for ok, _ in agreement(docs["all"], docs["one"]))
            print(verdict_line(ratio >= GOAL_RATIO and same,
                               f"two GPUs / one GPU ≥ {GOAL_RATIO}: ×{ratio:.3f}"
                               + ("" if same else " (not counted: the verdicts differ from one GPU's, below)")))
    print(breakdown(runs))
    # Timing precision, each run against the first's (one GPU's, where fleet.sh ran it): candidates re-measured for
    # noise, per-round CV, speedups; the other GPU's context starts and ends are not phased against this GPU's
    # timing windows (docs/PERFORMANCE.md, nineteenth session).
    if any(r.get("timing") for _, doc in runs for r in doc["records"]):
        headers, trows = timing_rows([(name, [{"cached_from": r.get("cached_from"),
                                               "result": {"timing": r.get("timing"),
                                                          "candidate": {"path": r.get("candidate")}}}
                                              for r in sorted(doc["records"], key=lambda r: r.get("index", 0))])
                                      for name, doc in runs])
        print("\ntiming precision, against the first run's:\n\n" + md_table(headers, trows))
    print()
    for name, doc in runs:
        checks = integrity(doc)
        if name == "all" and docs.get("one"):
            checks += agreement(doc, docs["one"])
        if doc.get("kill"):
            checks += kill_checks(doc, docs.get("all"))
            summary["kill"] = doc["kill"]
        elif name == "kill":
            checks += kill_checks(doc)
        for ok, text in checks:
            word = "NOTE" if ok is None else "PASS" if ok else "FAIL"
            print(f"{word} {name}: {text}")
            summary["checks"].append({"run": name, "result": word, "text": text})
            if ok is False:
                summary["pass"] = False
    print(f"\n{'PASS' if summary['pass'] else 'FAIL'}: "
          + ("every check passed" if summary["pass"] else
             f"{sum(1 for c in summary['checks'] if c['result'] == 'FAIL')} check(s) failed"))
    if a.out:
        tmp = a.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
        os.replace(tmp, a.out)
        print(f"summary: {a.out}")
    return 0 if summary["pass"] else 1


# ------------------------------------------------------------------------------------------ small


def cmd_free_port(_a):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
    s.close()
    return 0


def cmd_redis_ping(a):
    end = time.time() + a.wait
    while True:
        try:
            r = Resp(a.port, timeout=2)
            ok = r.cmd("PING") == "PONG"
            r.close()
            if ok:
                return 0
        except (OSError, RuntimeError, ConnectionError):
            pass
        if time.time() > end:
            print(f"fleet.py: no Redis answered on 127.0.0.1:{a.port} within {a.wait} s", file=sys.stderr)
            return 1
        time.sleep(0.1)


def cmd_await_workers(a):
    end = time.time() + a.wait
    n = 0
    while time.time() < end:
        try:
            s, d = call(a.url.rstrip("/"), "GET", "/workers/status", timeout=10)
        except SystemExit:
            s, d = 0, None
        if s == 200 and isinstance(d, dict):
            names = [w.get("id") for w in d.get("worker_list") or []]
            n = len(names)
            if n == a.count:
                print(" ".join(sorted(names)))
                break
        time.sleep(0.25)
    else:
        print(f"fleet.py: {n} of {a.count} workers live after {a.wait} s", file=sys.stderr)
        return 1
    # Each GPU's process serves the GPU it was given (a worker's name says its device).
    want = sorted(a.devices.split(",")) if a.devices else None
    got = sorted({parse_worker(x)[1] or "?" for x in names})
    if want and got != want:
        print(f"fleet.py: the workers run on {', '.join(got)}, not on {', '.join(want)} as asked ({' '.join(names)})"
              + (": `kgym worker --gpus` gave the first GPU of its list no device of its own (the list's array is "
                 "out of scope when its process starts: src/cli/cmd_serve.c), so it took the default, cuda:0"
                 if "cuda:0" in got or "cpu" in got else ""), file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("free-port")
    p = sub.add_parser("redis-ping")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--wait", type=float, default=10)
    p = sub.add_parser("await-workers")
    p.add_argument("--url", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--wait", type=float, default=180)
    p.add_argument("--devices", help="the devices the workers must run on, e.g. cuda:0,cuda:1")
    p = sub.add_parser("run")
    p.add_argument("--url", required=True)
    p.add_argument("--redis-port", type=int, required=True)
    p.add_argument("--list", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--gpus", type=lambda s: s.split(","), required=True, help="the run's GPUs (labels), e.g. 0,1")
    p.add_argument("--workers-per-gpu", type=int, required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--lease", type=float)
    p.add_argument("--kill-pid", type=int)
    p.add_argument("--kill-device", help="SIGKILL the worker process whose workers run on this device (cuda:N)")
    p.add_argument("--kill-at", type=float, default=1 / 3, help="share of the jobs ended before the kill (1/3)")
    p.add_argument("--slot", action="append", default=[], metavar="PID=LABEL", help="a worker process's GPU label")
    p.add_argument("--timeout", type=int, help="each request's timeout field (server default: 300 s)")
    p.add_argument("--wait", type=float, default=900, help="give up waiting after S seconds (900)")
    p.add_argument("--progress", type=float, default=10, help="a progress line at most every S seconds (10)")
    p = sub.add_parser("report")
    p.add_argument("--out", help="the JSON summary")
    p.add_argument("--command", default="(not given)")
    p.add_argument("--commit")
    p.add_argument("--gpu-name")
    p.add_argument("runs", nargs="+", metavar="NAME=RUN.json")
    a = ap.parse_args(argv)
    return {"free-port": cmd_free_port, "redis-ping": cmd_redis_ping, "await-workers": cmd_await_workers,
            "run": cmd_run, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
