"""Can a trusted process read another process's device memory from outside it?  (GPU only.)

    python3 bench/nvml_pid_probe.py [--gib G] [--blocks N] [--json FILE]

Why: the wind-down (a runner's CUDA context torn down) stays in a shared GPU phase because its cost is the
candidate's to choose: runners ending with 8 GiB each put a neighbour's timed calls off by ~1 ms (docs/PERFORMANCE.md,
thirty-ninth session; tests/fixtures/gpu_overlap/hog_exit.py).  Outside the phase it was worth ~5% on the GRPO mix.
It could leave the phase safely only where something the candidate cannot forge says the runner holds little device
memory when it exits.  NVML's per-process list (nvmlDeviceGetComputeRunningProcesses) is such a witness if it names
the runner by a pid kgym knows: inside a container the driver may report pids of another PID namespace, or none.

What it does: a child process (a fresh interpreter that imports torch) makes its CUDA context and allocates G GiB
in N blocks, then waits; this process reads NVML's process list and prints, as JSON on stdout: the child's pid as
this process sees it, every (pid, used bytes) NVML lists, whether the child's pid is among them and with how much,
then the same after the child freed its blocks (torch.cuda.empty_cache), and after it exited.  The child's own pid
inside its namespace is printed too (the same here: no new namespace).  Exit status 0 when the list names the child
with at least G GiB, 1 when it does not (the witness is not there), 2 when NVML or the GPU cannot be read.
--pidns starts the child in a PID namespace of its own (``unshare -p -f``), as kgym's runner is; on the lent H200
it cannot make a CUDA context there (error 304: without a fresh /proc, which kgym's runner mounts), so the answer
for runners came from kgym itself (``gpu_phases.wind_down``: NVML lists them under the supervisor's pid; fortieth
session, docs/PERFORMANCE.md).
"""

import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

CHILD = r"""
import sys, os, torch
g, n = float(sys.argv[1]), int(sys.argv[2])
torch.cuda.init()
each = int(g * (1 << 30) / n) // 4
held = [torch.empty(each, device="cuda") for _ in range(n)]
torch.cuda.synchronize()
print(os.getpid(), flush=True)
sys.stdin.readline()           # "free"
held.clear()
torch.cuda.empty_cache()
torch.cuda.synchronize()
print("freed", flush=True)
sys.stdin.readline()           # "exit"
"""


def _nvml():
    """The judge's own NVML reader (harness/kgym_harness/shared/timing.py GpuState) on GPU 0: its processes() is
    what the judge's wind-down plan reads, so this probe asks the same code."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
    from kgym_harness.shared.timing import GpuState

    lib = ctypes.CDLL("libnvidia-ml.so.1")
    if lib.nvmlInit_v2() != 0:
        raise RuntimeError("nvmlInit_v2 failed")
    handle = ctypes.c_void_p()
    if lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) != 0:
        raise RuntimeError("no GPU 0")
    return GpuState(lib, handle)


def _processes(state):
    used = state.processes()
    if used is None:
        return {"error": "NVML gave no process list"}
    return {"processes": [[pid, n] for pid, n in sorted(used.items())]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=4.0, help="device memory the child holds (GiB, 4)")
    ap.add_argument("--blocks", type=int, default=32, help="blocks it holds them in (32)")
    ap.add_argument("--json", help="also write the JSON here")
    ap.add_argument("--pidns", action="store_true",
                    help="start the child in a new PID namespace (unshare -p -f), as kgym's runner is: does NVML "
                         "name it by its pid out here?")
    a = ap.parse_args()
    try:
        state = _nvml()
    except Exception as exc:  # noqa: BLE001 — no NVIDIA driver here
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 2
    argv = [sys.executable, "-c", CHILD, str(a.gib), str(a.blocks)]
    child = subprocess.Popen((["unshare", "-p", "-f"] if a.pidns else []) + argv, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    out = {"child_pid_here": child.pid, "gib": a.gib, "blocks": a.blocks, "pidns": a.pidns}
    line = child.stdout.readline().strip()
    pid = child.pid
    if a.pidns:  # the interpreter is unshare's child: its pid out here
        with open(f"/proc/{child.pid}/task/{child.pid}/children") as f:
            kids = f.read().split()
        pid = int(kids[0]) if kids else None
        out["child_pid_here"] = pid
    out["child_pid_inside"] = int(line) if line.isdigit() else line
    out["holding"] = _processes(state)
    child.stdin.write("free\n")
    child.stdin.flush()
    child.stdout.readline()
    out["freed"] = _processes(state)
    child.stdin.write("exit\n")
    child.stdin.flush()
    child.wait(timeout=60)
    time.sleep(0.2)
    out["exited"] = _processes(state)
    held = dict(map(tuple, out["holding"].get("processes", [])))
    out["child_listed_bytes"] = held.get(pid)
    print(json.dumps(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if (out["child_listed_bytes"] or 0) >= a.gib * (1 << 30) else 1


if __name__ == "__main__":
    sys.exit(main())
