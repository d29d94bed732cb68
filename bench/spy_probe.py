#!/usr/bin/env python3
"""Where the judges' and runners' wall time goes while a command runs: every --interval seconds, a py-spy dump of
every Python process below the command (the zygote's children are re-parented to kgym, which stays below it), each
stack put in a role by its files (judge: kgym_harness/judge, runner: kgym_harness/runner, zygote) and counted.

    python3 bench/spy_probe.py [--interval S] [--native] [--py-spy PATH] [--top N] [--depth N] [--keep FILE]
                               -- COMMAND...

A sampling profile of wall time, waits included (py-spy --nonblocking: the processes are not paused), across all
processes at once, which cProfile of one process (KGYM_JUDGE_PROFILE) cannot give.  Printed per role: the share of
samples by the innermost --depth kgym_harness frames (what kgym's code was doing or waiting on, and where from), and by the innermost frame
of all (with --native: the native symbol, e.g. a CUDA driver call or a syscall wrapper).  --keep writes every raw
dump (JSON lines: time, pid, role, stack) for other cuts.  py-spy: a static binary (pip download py-spy; carried in
.gpu/py-spy by the GPU commands in docs/PERFORMANCE.md); it needs ptrace rights over the processes (same user, or
root).  The command's exit status is this script's.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

_FRAME = re.compile(r"^\s+(\S.*?) \((.*?)(?::(\d+))?\)\s*$")
_THREAD = re.compile(r'^Thread (\S+) \((.*?)\)(?:: "(.*)")?')


def descendants(root):
    """Pids below ``root`` (by /proc's parent links)."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for c in children.get(pid, []):
            out.append(c)
            todo.append(c)
    return out


def is_python(pid):
    try:
        return "python" in os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return False


def parse_dump(text):
    """py-spy dump's text -> [(thread name, state, [frames innermost first])]."""
    threads, cur = [], None
    for line in text.splitlines():
        m = _THREAD.match(line)
        if m:
            cur = (m.group(3) or m.group(1), m.group(2), [])
            threads.append(cur)
            continue
        m = _FRAME.match(line)
        if m and cur is not None:
            cur[2].append((m.group(1), m.group(2), int(m.group(3) or 0)))
    return threads


def role_of(frames):
    files = " ".join(f for _fn, f, _l in frames)
    if "kgym_harness/runner" in files:
        return "runner"
    if "kgym_harness/judge" in files:
        return "judge"
    if "zygote" in files:
        return "zygote"
    return "other"


def short(frame):
    fn, path, line = frame
    return f"{fn} ({os.path.basename(path)}:{line})" if line else f"{fn} ({os.path.basename(path)})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--interval", type=float, default=0.25, help="seconds between sweeps (default 0.25)")
    ap.add_argument("--native", action="store_true",
                    help="native frames too (py-spy --native; slower dumps, each pausing its process: py-spy has no "
                         "--nonblocking for native frames)")
    ap.add_argument("--py-spy", default=None, help="py-spy binary (default: on PATH, else .gpu/py-spy)")
    ap.add_argument("--top", type=int, default=15, help="rows per table (default 15)")
    ap.add_argument("--depth", type=int, default=2, help="kgym frames named per row, innermost first (default 2)")
    ap.add_argument("--keep", default=None, help="write every stack as JSON lines here")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("a command to run is required after --")
    spy = args.py_spy or shutil.which("py-spy") or os.path.join(os.path.dirname(__file__), "..", ".gpu", "py-spy")
    if not os.access(spy, os.X_OK):
        ap.error(f"no py-spy binary at {spy} (pip download py-spy, or --py-spy PATH)")
    keep = open(args.keep, "w") if args.keep else None
    proc = subprocess.Popen(cmd, start_new_session=True)
    by_role = {}  # role -> Counter of innermost kgym frames
    leaf = {}  # role -> Counter of innermost frames
    samples, sweeps, failed, t0 = Counter(), 0, 0, time.monotonic()
    first_error = ""  # what py-spy said the first time a dump failed (every dump failing means no profile)
    try:
        while proc.poll() is None:
            start = time.monotonic()
            for pid in descendants(proc.pid):
                if not is_python(pid):
                    continue
                # py-spy refuses --native with --nonblocking (it must pause a process to unwind native frames):
                # with --native every dump pauses its process for a moment (the run is slowed, not changed).
                argv = [spy, "dump", "--pid", str(pid)] + (["--native"] if args.native else ["--nonblocking"])
                try:
                    r = subprocess.run(argv, capture_output=True, text=True, timeout=5)
                except subprocess.TimeoutExpired:
                    failed += 1
                    continue
                if r.returncode != 0:
                    failed += 1
                    first_error = first_error or (r.stderr or r.stdout).strip()[:300]
                    continue
                for name, state, frames in parse_dump(r.stdout):
                    if name not in ("MainThread", str(pid)) and not frames:
                        continue
                    role = role_of(frames)
                    if name != "MainThread":
                        role += ":" + name
                    samples[role] += 1
                    # the innermost kgym frame that is not the transport's reading or sending: which request
                    # the process waits on, or which of its own steps it runs
                    own = [short(f) for f in frames if "kgym_harness" in f[1] and "transport.py" not in f[1]]
                    by_role.setdefault(role, Counter())[" < ".join(own[:args.depth]) if own else "(no kgym frame)"] += 1
                    leaf.setdefault(role, Counter())[(short(frames[0]) if frames else "(empty)") +
                                                     (" [idle]" if "idle" in state else "")] += 1
                    if keep:
                        keep.write(json.dumps({"t": round(start - t0, 3), "pid": pid, "role": role,
                                               "state": state, "stack": [short(f) for f in frames]}) + "\n")
            sweeps += 1
            time.sleep(max(0.0, args.interval - (time.monotonic() - start)))
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGTERM)
    rc = proc.wait()
    if keep:
        keep.close()
    print(f"spy_probe: {sweeps} sweeps in {time.monotonic() - t0:.1f} s, {sum(samples.values())} stacks "
          f"({failed} dumps failed), command exit {rc}")
    if first_error:
        print(f"spy_probe: the first failed dump said: {first_error}")
    for role, n in samples.most_common():
        if n < 5:
            continue
        print(f"\n== {role}: {n} stacks")
        print("  innermost kgym_harness frames (the transport's own skipped; callee < caller):")
        for what, k in by_role[role].most_common(args.top):
            print(f"    {100.0 * k / n:5.1f}%  {what}")
        print("  innermost frame:")
        for what, k in leaf[role].most_common(args.top):
            print(f"    {100.0 * k / n:5.1f}%  {what}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
