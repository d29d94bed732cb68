"""The zygote: a warm Python that forks evaluation children on request.

Started by the C supervisor as ``python -m kgym_harness.zygote --control-fd N
--device D``.  It imports torch, triton and the harness once (seconds), writes
``ready {json}`` on the control socket, then serves ``fork`` requests: each
request carries three file descriptors (the child's protocol socket, stdout
pipe, stderr pipe).  It forks an intermediate process that forks the child and
exits at once, so the child is re-parented to the supervisor (a subreaper) and
the supervisor can collect the child's real exit status.  The zygote never
touches CUDA: a process that initialised CUDA cannot fork usable children.
"""

import argparse
import json
import os
import platform
import signal
import socket
import sys


def local_device(device):
    """The device as this process and its children name it.  kgym starts the zygote of ``cuda:N`` with
    CUDA_VISIBLE_DEVICES set to that GPU alone (src/supervisor/zygote.c), so inside it that GPU is ``cuda:0``:
    ``cuda:1`` there is an invalid device ordinal (every evaluation of a second GPU's worker failed so, measured on
    two H200s).  ``cpu`` stays ``cpu``."""
    return "cuda:0" if str(device).startswith("cuda") else device


def _preload(device="cpu"):
    """Imports everything a child needs, so that forking makes it free."""
    import numpy  # noqa: F401
    import torch
    import triton

    from .judge import child, compare, language, tasks  # noqa: F401
    from .runner import runner, sandbox  # noqa: F401
    from .shared import transport, tritoncache  # noqa: F401

    # The candidate language's data (policy/language.json): parsed once here, inherited by every judge.
    try:
        language.load()
    except (OSError, ValueError):
        pass  # the judge reports it: a missing language refuses every candidate (judge/child.py, static)

    # Warm what every child would otherwise pay for on first use (the first
    # meta-device dispatch costs ~0.7 s): children inherit it through fork.
    torch.set_num_threads(1)
    with torch.device("meta"):
        layer = torch.nn.Linear(8, 8)
        layer(torch.rand(2, 8)).sum()
    (torch.rand(4, 4) @ torch.rand(4, 4)).sum().item()
    # Triton's first launch in a process hashes Triton's own files (triton_key: 0.4 s on an H100 host) and
    # imports the Gluon modules its argument specialiser checks against (0.1 s): neither needs CUDA, so both
    # are paid here once instead of in every runner's first kernel and the judge's first comparison.
    try:
        from triton.runtime.cache import triton_key

        triton_key()
        import triton.experimental.gluon.nvidia.hopper  # noqa: F401
    except (ImportError, OSError, AttributeError):
        pass  # another Triton: its first launch pays as before
    if device.startswith("cuda"):
        # A profiler session's first use imports torch._dynamo (about a second on a CPU core), which rebinds
        # torch.manual_seed and sets TORCHINDUCTOR_CACHE_DIR; the FLOP counter imports its own modules.  On a GPU
        # every judge profiles (its profiler warm-up before timing) and counts the reference's FLOPs, and every
        # runner profiles its candidate: imported here once, so that none pays it, and so that a judge kept
        # between evaluations finds its process unchanged by its first job (judge/child.py _process_fingerprint).
        try:
            import torch._dynamo  # noqa: F401
            import torch.utils.flop_counter  # noqa: F401
        except Exception as exc:  # noqa: BLE001 — each process imports them when it first profiles, as before
            print(f"kgym zygote: torch._dynamo not preloaded: {type(exc).__name__}: {exc}", file=sys.stderr)
        # Triton's CUDA utilities module is C that gcc compiles (0.3-0.4 s) wherever the cache is empty, which a
        # runner's always is: built once per machine into the trusted modules directory, which runners read
        # (tritoncache.py).  No CUDA context is made; a failure is printed and the runners compile as before.
        tritoncache.warm_utilities()

    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "numpy": numpy.__version__,
        "interpret": os.environ.get("TRITON_INTERPRET") == "1",
        "pid": os.getpid(),
    }
    return info


def _serve(control, device):
    """Serves two requests, each with its file descriptors (SCM_RIGHTS):
    ``fork`` + [proto, stdout, stderr, peer]: a judge (child.py) talking to kgym on proto and to its runner
    on peer; ``runner`` + [peer, stdout, stderr]: the runner (runner.py), which the intermediate puts in a
    PID namespace of its own first (it is that namespace's first process: nothing outside it can be seen
    or signalled from inside, and when it ends every process it started ends with it).
    Both answer ``forked <pid> <json notes>``."""
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, 1024, 4)
        except (ConnectionResetError, OSError):
            return
        if not data:
            return  # the supervisor closed the socket: it is gone
        what = data.strip()
        if not ((what == b"fork" and len(fds) == 4) or (what in (b"runner", b"runner-bare") and len(fds) == 3)):
            for fd in fds:
                os.close(fd)
            control.sendall(b"error bad request\n")
            continue
        pid_r, pid_w = os.pipe()
        intermediate = os.fork()
        if intermediate == 0:
            try:
                # The child gets the request's descriptors and nothing else of ours: not the control socket,
                # not whatever this process may hold (docs/threat-model.md, descriptors).
                from .runner import sandbox

                control.detach()  # its descriptor goes below; the object must never close another one later
                sandbox.close_descriptors([pid_w, *fds, *sandbox.LIBRARY_FDS])
                notes = []
                if what == b"runner":
                    # runner-bare (the job's sandbox or its namespaces off): no PID namespace, since without
                    # the runner's fresh /proc (a mount namespace) the CUDA driver fails (error 304).
                    from .runner import sandbox

                    sandbox.unshare_pid(notes)
                child_pid = os.fork()
                if child_pid == 0:
                    os.close(pid_w)
                    if what in (b"runner", b"runner-bare"):
                        from .runner import runner

                        runner.run(fds[0], fds[1], fds[2], device)
                    else:
                        from .judge import child

                        child.run(fds[0], fds[1], fds[2], device, fds[3])
                    os._exit(0)
                os.write(pid_w, (str(child_pid) + " " + json.dumps(notes)).encode())
            finally:
                os._exit(0)
        os.close(pid_w)
        for fd in fds:
            os.close(fd)
        chunks = []
        while True:
            chunk = os.read(pid_r, 4096)
            if not chunk:
                break
            chunks.append(chunk)
        os.close(pid_r)
        os.waitpid(intermediate, 0)
        text = b"".join(chunks).decode() or "0"
        control.sendall(f"forked {text}\n".encode())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    # A terminal's Ctrl-C belongs to the supervisor, which stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Only the control socket and the standard streams: kgym closes the rest before it executes us
    # (src/supervisor/zygote.c); this holds whoever started the zygote.
    from .runner import sandbox

    sandbox.close_descriptors([args.control_fd])
    control = socket.socket(fileno=args.control_fd)
    # `python -m` puts the working directory (often a repository root) first on sys.path, and every
    # sys.path entry is readable for the runner (sandbox.apply_runner): only the interpreter's own paths and
    # the harness stay.
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p and (os.path.abspath(p) != cwd or os.path.abspath(p) == here)]
    try:
        info = _preload(args.device)
    except Exception as exc:  # reported to the supervisor through our stderr
        print(f"kgym zygote: import failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    info["device"] = args.device
    info["library_fds"] = sorted(sandbox.note_library_descriptors(args.control_fd))
    control.sendall(("ready " + json.dumps(info) + "\n").encode())
    _serve(control, local_device(args.device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
