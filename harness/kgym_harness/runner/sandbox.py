"""The runner's sandbox (the candidate's process; docs/threat-model.md), and the judge's one protection.

In order: ``close_descriptors`` and ``unshare_pid`` in the intermediate that forks the runner (it becomes PID 1
of a new namespace); then in the runner ``close_descriptors`` again, ``enter_runner_namespaces`` (mount, network,
IPC, UTS; fresh /proc; private /tmp, /dev/shm (size-limited), /root, /home with the workdir and any other
``writable`` path of the job bound back) -> ``mount_workdir`` (its own folder, the workdir's run/, a size-limited
tmpfs; the checked source's folder src/ read-only) -> ``prepare_dir_for`` -> ``drop_privileges`` (its own uid) ->
``apply_runner``: a clean environment, rlimits, no bytecode, Landlock on reads and writes, seccomp (hostile calls
kill the runner with SIGSYS, which kgym reports as ``sandbox_violation``; on the CPU new processes and programs
too), then ``_checked_bytes``: what guards the checked source and the import path, judged on the process as it now
is.  ``judge_lockdown`` makes the judge non-dumpable.

Every step appends a sentence to ``active`` or, when the kernel refuses it (old kernels, containers), a clear
warning to ``warnings``; it never raises.  kgym puts both in the result's ``sandbox``.  A step that took effect
also records its code in ``active.codes`` (``Granted``, ``PROTECTIONS``): kgym requires codes, not sentences
(src/eval/result.c), so a protection is counted only where this module saw the kernel accept it.  The checked
bytes' guards have codes too: ``source_readonly``, ``import_path``, ``workdir_limit``, ``descriptors``
(docs/threat-model.md, *Protection names*).
"""

import ctypes
import ctypes.util
import errno
import os
import re
import resource
import socket
import sys

# The codes of the protections, as kgym's required list names them (src/eval/result.c KG_PROTECTIONS; the
# result's sandbox.protections).  A code is granted only after the step succeeded, never assumed.
PROTECTIONS = ("pid_namespace", "mount_namespace", "network_namespace", "ipc_namespace", "uts_namespace",
               "fresh_proc", "private_tmp", "own_uid", "clean_environment", "rlimits", "landlock", "seccomp",
               "seccomp_signals", "no_processes", "judge_not_dumpable",
               # checked bytes = executed bytes (_checked_bytes, mount_workdir, runner.py)
               "source_readonly", "import_path", "workdir_limit", "descriptors")


class Granted(list):
    """``active``: the sentences of the protections in force (the list itself, for people) and their codes
    (``codes``, for kgym).  A plain list works wherever a Granted does; it only keeps no codes."""

    def __init__(self):
        super().__init__()
        self.codes = []


def grant(active, code, text):
    """Says that protection ``code`` is in force: ``text`` for the report, the code for kgym's check."""
    assert code in PROTECTIONS, code
    active.append(text)
    codes = getattr(active, "codes", None)
    if codes is not None and code not in codes:
        codes.append(code)


SCMP_ACT_ALLOW = 0x7FFF0000
# The runner is killed (SIGSYS, uncatchable) for a system call only an attack makes: kgym reads the signal as
# the hack `sandbox_violation`, so an attempt is never merely a failed call the candidate can catch and pass.
SCMP_ACT_KILL_PROCESS = 0x80000000


def SCMP_ACT_ERRNO(e):
    return 0x00050000 | (e & 0xFFFF)


SCMP_CMP_NE = 1
SCMP_CMP_MASKED_EQ = 7


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def _seccomp(active, warnings, no_processes=False):
    """The runner's filter (apply_runner): calls only an attack makes kill it (SIGSYS); io_uring, pidfd_*, the new
    mount API, clone() with namespace flags, clone3 (ENOSYS: glibc falls back to clone, whose flags can be
    checked) and the host-level calls (ioperm, reboot, clocks, open_by_handle_at ...) are refused;
    ``no_processes`` (the CPU): new processes and programs kill it too.  Returns True when the filter is loaded
    and every call that changes mounts is among those it kills."""
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        warnings.append(f"seccomp not active: libseccomp cannot be loaded ({exc}); network and ptrace are open")
        return False
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        warnings.append("seccomp not active: seccomp_init failed")
        return False
    try:
        def rule(syscall, action, cmp=None):
            nr = lib.seccomp_syscall_resolve_name(syscall.encode())
            if nr < 0:
                return False
            arr = (_ArgCmp * 1)(cmp) if cmp else None
            return lib.seccomp_rule_add_array(ctx, action, nr, 1 if cmp else 0, arr) == 0

        denied = []
        hostile = SCMP_ACT_KILL_PROCESS
        if rule("socket", hostile, _ArgCmp(0, SCMP_CMP_NE, socket.AF_UNIX, 0)):
            denied.append("socket(non-AF_UNIX)")
        for sc in ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "bpf",
                   "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "mount", "umount2",
                   "unshare", "setns", "chroot", "pivot_root", "init_module", "finit_module", "kexec_load"):
            # perf_event_open and userfaultfd stay mere errors: profilers and allocators probe them.
            act = hostile if sc not in ("perf_event_open", "userfaultfd") else SCMP_ACT_ERRNO(errno.EPERM)
            if rule(sc, act):
                denied.append(sc)
        for sc in _RUNNER_DENIED:
            if rule(sc, hostile if sc in _RUNNER_FATAL else SCMP_ACT_ERRNO(errno.EPERM)):
                denied.append(sc)
        if rule("clone3", SCMP_ACT_ERRNO(errno.ENOSYS)):
            denied.append("clone3 (ENOSYS)")
        ns_ok = all(rule("clone", SCMP_ACT_ERRNO(errno.EPERM), _ArgCmp(0, SCMP_CMP_MASKED_EQ, bit, bit))
                    for bit in _CLONE_NS_FLAGS)
        if no_processes:
            # On the CPU nothing honest starts a process or a program once the runner is up (the Triton
            # interpreter compiles nothing): a fork, a shell or a setsid survivor is an attack.  Threads
            # (clone with CLONE_THREAD) stay allowed: torch and Python use them.
            fatal = [sc for sc in ("execve", "execveat", "fork", "vfork") if rule(sc, SCMP_ACT_KILL_PROCESS)]
            if rule("clone", SCMP_ACT_KILL_PROCESS, _ArgCmp(0, SCMP_CMP_MASKED_EQ, _CLONE_THREAD, 0)):
                fatal.append("clone(new process)")
            denied.extend(f"{sc} (fatal)" for sc in fatal)
            no_processes_text = ("seccomp: no new processes or programs (CPU): fork, clone of a process, execve "
                                 "kill the runner (sandbox_violation)")
        if ns_ok:
            denied.append("clone(new namespaces)")
        else:
            warnings.append("seccomp: clone() with namespace flags could not be filtered")
        rc = lib.seccomp_load(ctx)
        if rc != 0:
            warnings.append(f"seccomp not active: the kernel refused the filter ({os.strerror(-rc)}); network "
                            "and ptrace are open")
            return False
        if no_processes:
            # fork and vfork are not system calls everywhere (arm64): execve and clone are what must be caught.
            if "execve" in fatal and "clone(new process)" in fatal:
                grant(active, "no_processes", no_processes_text)
            else:
                warnings.append("seccomp: new processes could not all be refused (only " + ", ".join(fatal) + ")")
        grant(active, "seccomp", "seccomp: no network sockets (AF_UNIX only), no ptrace or cross-process memory "
                                 "access")
        active.append("seccomp denies: " + ", ".join(denied))
        active.append("seccomp: a network socket, ptrace, another process's memory, io_uring, pidfds, bpf, "
                      "mounts, namespaces, modules or a signal to another process kill the runner (SIGSYS: "
                      "the hack sandbox_violation)")
        # Whether a runner left as root could still undo a read-only mount: not with these refused.
        return all(sc in denied for sc in ("mount", "umount2", "fsmount", "move_mount", "open_tree",
                                           "mount_setattr"))
    finally:
        lib.seccomp_release(ctx)


_RUNNER_DENIED = ("io_uring_setup", "io_uring_enter", "io_uring_register", "pidfd_open", "pidfd_send_signal",
                  "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
                  "mount_setattr", "open_by_handle_at", "name_to_handle_at", "ioperm", "iopl", "reboot", "swapon",
                  "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "quotactl",
                  "syslog", "vhangup", "delete_module", "kexec_file_load", "lookup_dcookie", "uselib",
                  "setdomainname", "sethostname")
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
_CLONE_NS_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00000080)


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446  # x86-64, arm64
_LANDLOCK_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38




def _rlimits(job, active, warnings, nproc):
    def lower(res, name, value):
        soft, hard = resource.getrlimit(res)
        new_hard = value if hard == resource.RLIM_INFINITY or hard > value else hard
        try:
            resource.setrlimit(res, (min(new_hard, value), new_hard))
            active.append(f"rlimit {name}={min(new_hard, value)}")
            return True
        except (ValueError, OSError) as exc:
            warnings.append(f"rlimit {name} not set: {exc}")
            return False

    sb = job.get("sandbox") or {}
    # RLIMIT_NPROC counts every process of the uid, which is this runner's alone: a fixed number stops a fork
    # bomb without breaking Triton's compiler subprocesses.
    done = [lower(resource.RLIMIT_NPROC, "NPROC", nproc),
            lower(resource.RLIMIT_NOFILE, "NOFILE", int(sb.get("open_files", 4096))),
            lower(resource.RLIMIT_CORE, "CORE", 0)]
    if all(done):
        grant(active, "rlimits", "rlimits NPROC, NOFILE and CORE lowered")




# ---------------------------------------------------------------------------------------------------------------
# The split evaluation: a trusted judge and an untrusted runner, both forked (through an intermediate) from the
# zygote, which runs as root.  The intermediate calls unshare_pid() and forks the runner (PID 1 of a new pid
# namespace); the runner calls, in this order:
#     enter_runner_namespaces(workdir, keep_paths, active, warnings)
#     prepare_dir_for(workdir, uid, gid)
#     drop_privileges(uid, gid, warnings, active)
#     apply_runner(job, active, warnings)
# and only then reads the candidate's file.  The judge calls judge_lockdown(active, warnings).
# Every step appends what it turned on to ``active`` and a clear sentence to ``warnings`` for what the kernel (or
# the container) refused; none raises for a refusal.
# ---------------------------------------------------------------------------------------------------------------

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWPID, _CLONE_NEWNET = 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT = 1, 2, 4, 8, 32
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
# The runner's writable folder (its workdir's run/) and its private /dev/shm are each a tmpfs of this size and this
# many files (inodes) unless the job says otherwise (sandbox.workdir_bytes, sandbox.workdir_files: kgym's
# --workdir-size, --workdir-files): one candidate cannot fill the host's disk or memory.  The covers of /tmp, /root
# and /home hold only the directories bound back into them, which root makes: a small fixed size.
WORKDIR_BYTES = 1 << 30
WORKDIR_FILES = 10000
_COVER_OPTIONS = "size=16m,nr_inodes=4096"
_PR_SET_DUMPABLE, _PR_GET_DUMPABLE, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 4, 3, 22, 2
# Directories a runner never needs but that may hold the zygote's interpreter (pyenv under /root, mode 0700):
# covered by an empty tmpfs in the runner's mount namespace, with only the Python paths bound back.
HIDDEN_DIRS = ("/root", "/home")

_libc = None


def _lib():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.unshare.argtypes = [ctypes.c_int]
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
        _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return _libc


def _err():
    return os.strerror(ctypes.get_errno())


def _unshare(flag):
    """None on success, else the error text."""
    if _lib().unshare(flag) != 0:
        return _err()
    return None


def _mount(src, target, fstype, flags, data=None):
    enc = (lambda x: x.encode() if isinstance(x, str) else x)
    if _lib().mount(enc(src), enc(target), enc(fstype), flags, enc(data)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), target)


def _beneath(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def python_paths():
    """What the interpreter itself needs to read: its prefixes, the interpreter's directory, every existing
    sys.path entry (site-packages, the harness).  '' (the current directory) is left out."""
    out = []
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, getattr(sys, "base_exec_prefix", sys.exec_prefix),
              os.path.dirname(os.path.realpath(sys.executable)) if sys.executable else "", *sys.path):
        if not p:
            continue
        p = os.path.abspath(p)
        for q in (os.path.normpath(p), os.path.realpath(p)):
            if os.path.exists(q) and q not in out:
                out.append(q)
    return out


def unshare_pid(warnings):
    """In the zygote's intermediate: a new pid namespace for the children it forks next (the runner becomes its
    PID 1).  The caller itself stays where it was.  False, with a warning, when refused."""
    err = _unshare(_CLONE_NEWPID)
    if err:
        warnings.append(f"pid namespace not created ({err}): the runner sees and can address every process")
        return False
    return True


def workdir_limits(job):
    """(bytes, files) of the runner's writable folder and of its /dev/shm: the job's sandbox.workdir_bytes and
    sandbox.workdir_files, else WORKDIR_BYTES and WORKDIR_FILES."""
    sb = job.get("sandbox") or {}

    def positive(key, default):
        try:
            v = int(sb.get(key) or default)
        except (TypeError, ValueError):
            return default
        return v if v > 0 else default

    return positive("workdir_bytes", WORKDIR_BYTES), positive("workdir_files", WORKDIR_FILES)


def enter_runner_namespaces(workdir, keep_paths, active, warnings, hide=HIDDEN_DIRS, limits=None):
    """In the runner (still root): new mount, network, IPC and UTS namespaces (each asked for separately), / made
    recursively private, a fresh /proc when this process is PID 1 of a new pid namespace, and private tmpfs on
    /tmp, /dev/shm and each existing ``hide`` directory (/dev/shm, which the runner may write, of ``limits``:
    (bytes, files), default workdir_limits({}); the others small).  ``workdir``, every ``keep_paths`` entry and
    the Python paths stay reachable at the same absolute paths (bind-mounted back from O_PATH descriptors opened
    before they were covered).  Ends with the current directory in ``workdir``.  Returns True when the mount
    namespace (and so the private /tmp) is in place."""
    names = [(_CLONE_NEWNET, "network", "the runner keeps the host's network (seccomp still refuses sockets)"),
             (_CLONE_NEWIPC, "IPC", "System V IPC and POSIX queues are shared with the host"),
             (_CLONE_NEWUTS, "UTS", "hostname changes would be seen by the host (seccomp refuses them)")]
    err = _unshare(_CLONE_NEWNS)
    mnt = err is None
    if mnt:
        grant(active, "mount_namespace", "mount namespace: private mounts")
    else:
        warnings.append(f"mount namespace not created ({err}): /proc, /tmp and /dev/shm are the host's")
    for flag, name, consequence in names:
        e = _unshare(flag)
        if e is None:
            grant(active, f"{name.lower()}_namespace", f"{name} namespace" + (
                ": no network interfaces but a down loopback" if flag == _CLONE_NEWNET else ""))
        else:
            warnings.append(f"{name} namespace not created ({e}): {consequence}")
    if mnt:
        try:
            _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
        except OSError as exc:
            warnings.append(f"mounts not made private ({exc}); the runner's mounts are left as they are")
            mnt = False
    if not mnt:
        _chdir(workdir, warnings)
        return False

    covered = ["/tmp", "/dev/shm"] + [h for h in (hide or ()) if os.path.isdir(h) and not os.path.islink(h)]
    wanted = [p for p in [workdir, *(keep_paths or ()), *python_paths()] if p]
    wanted = sorted({os.path.realpath(p) for p in wanted if os.path.exists(p)}, key=len)
    keep = []
    for p in wanted:
        if any(_beneath(p, c) for c in covered) and not any(_beneath(p, k) for k, _ in keep):
            try:
                keep.append((p, os.open(p, os.O_PATH | os.O_CLOEXEC)))
            except OSError as exc:
                warnings.append(f"{p} not kept reachable: {exc}")
    try:
        if os.getpid() == 1:
            try:
                _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
                grant(active, "fresh_proc", "fresh /proc: only the runner's pid namespace is visible")
            except OSError as exc:
                warnings.append(f"/proc not remounted ({exc}): other processes stay visible in /proc")
        else:
            warnings.append("/proc not remounted: the runner is not PID 1 of a new pid namespace, so other "
                            "processes stay visible in /proc")
        done = []
        size, files = limits or workdir_limits({})
        for c in covered:
            options = (f"mode=1777,size={size},nr_inodes={files}" if c == "/dev/shm" else
                       f"mode=1777,{_COVER_OPTIONS}" if c == "/tmp" else f"mode=0755,{_COVER_OPTIONS}")
            try:
                _mount("tmpfs", c, "tmpfs", _MS_NOSUID | _MS_NODEV, options)
                done.append(c)
            except OSError as exc:
                warnings.append(f"{c} not covered by a private tmpfs ({exc}); its host content stays visible")
        if done:
            active.append("private empty tmpfs on " + ", ".join(done))
        if "/tmp" in done and "/dev/shm" in done:
            grant(active, "private_tmp", "private /tmp and /dev/shm: nothing of the host's or other jobs' there")
        kept = []
        for p, fd in keep:
            if not any(_beneath(p, c) for c in done):
                continue
            try:
                if os.path.isdir(f"/proc/self/fd/{fd}"):
                    os.makedirs(p, mode=0o755, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(p), mode=0o755, exist_ok=True)
                    open(p, "a").close()
                _mount(f"/proc/self/fd/{fd}", p, None, _MS_BIND | _MS_REC)
                kept.append(p)
            except OSError as exc:
                warnings.append(f"{p} not bound back after covering its parent ({exc}); it is unreachable")
        if kept:
            active.append("kept reachable at the same paths: " + ", ".join(kept))
    finally:
        for _, fd in keep:
            os.close(fd)
    _chdir(workdir, warnings)
    return True


def _gib(n):
    return f"{n / (1 << 30):g} GiB" if n >= (1 << 30) else f"{n / (1 << 20):g} MiB"


def mount_workdir(workdir, uid, job, active, warnings):
    """In the runner's mount namespace (still root), the evaluation's folder as transport.py lays it out: run/ (the
    runner's only writable folder there) becomes a private tmpfs of workdir_limits(job), owned by ``uid`` (None:
    this process's), so that a candidate that fills it meets ENOSPC and the host keeps its disk; src/ (the checked
    source, which the judge writes) is bound onto itself read-only, so that not even a runner left as root can
    change it (seccomp kills mount and umount).  Each refusal is a warning; never raises.  Called only where
    enter_runner_namespaces made the mount namespace: on the host's mounts these would be everyone's."""
    from ..shared import transport

    run = transport.run_dir(workdir)
    src = os.path.dirname(transport.source_path(workdir, None))
    size, files = workdir_limits(job)
    cpu = str(job.get("device", "cpu")) == "cpu"
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    # No programs or libraries from the folder on the CPU (the interpreter compiles nothing); on a GPU Triton
    # loads the launchers it builds there.
    flags = _MS_NOSUID | _MS_NODEV | (_MS_NOEXEC if cpu else 0)
    try:
        os.makedirs(run, mode=0o700, exist_ok=True)
        _mount("tmpfs", run, "tmpfs", flags, f"size={size},nr_inodes={files},mode=0700{owner}")
        grant(active, "workdir_limit", f"workdir_limit: the runner's folder {run} and its /dev/shm are private tmpfs of "
                      f"{_gib(size)} and {files} files each (ENOSPC beyond; the host's disk is not used)")
    except OSError as exc:
        warnings.append(f"workdir_limit: not active ({exc}): the runner's folder {run} is on the host's file "
                        "system, where only RLIMIT_FSIZE bounds each file; a candidate can fill that disk")
    try:
        _mount(src, src, None, _MS_BIND)
        _mount(None, src, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        active.append(f"source folder {src} mounted read-only in the runner's view")
    except OSError as exc:
        warnings.append(f"source folder {src} not mounted read-only ({exc}); its other protections stand")


def workdir_limit_unavailable(why, warnings):
    """The warning for a runner without a mount namespace (no root, a container, the job's namespaces off)."""
    warnings.append(f"workdir_limit: not active ({why}): the runner's folder is on the host's file system, where "
                    "only RLIMIT_FSIZE bounds each file; a candidate can fill that disk")


# The zygote's own descriptors after its imports (a library's handle, e.g. NVML's device node, opened before the
# fork and shared by every child, as it always was): kept open by the processes it forks, which close everything
# else.  Empty on the CPU.  Set by the zygote (note_library_descriptors).
LIBRARY_FDS = frozenset()


def note_library_descriptors(control_fd):
    """In the zygote, after its imports: the descriptors it holds besides the standard streams and its control
    socket are its libraries' own (it started with none else: close_descriptors ran first); returns them."""
    global LIBRARY_FDS
    try:
        held = {int(n) for n in os.listdir("/proc/self/fd")}
    except OSError:
        held = set()
    LIBRARY_FDS = frozenset(fd for fd in held - {0, 1, 2, int(control_fd)} if _is_open(fd))
    return LIBRARY_FDS


def _is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def close_descriptors(keep):
    """Closes every descriptor of this process but ``keep`` (and 0, 1, 2): what a process kgym did not mean to
    pass (a caller's open file, kgym's results file) must not reach the runner.  Returns how many were closed."""
    keep = sorted({0, 1, 2, *(int(k) for k in keep if k is not None and int(k) >= 0)})
    try:
        open_now = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        open_now = None
    closed = 0
    if open_now is not None:
        for fd in open_now:
            if fd not in keep:
                try:
                    os.close(fd)
                    closed += 1
                except OSError:
                    pass  # the directory's own descriptor, already gone
        return closed
    # No /proc (yet): every number up to the descriptor limit, between the kept ones.
    top = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    top = 65536 if top == resource.RLIM_INFINITY or top > 65536 else top
    lo = 0
    for k in keep + [top]:
        if k > lo:
            os.closerange(lo, k)
        lo = k + 1
    return -1


def _chdir(workdir, warnings):
    if workdir:
        try:
            os.chdir(workdir)
        except OSError as exc:
            warnings.append(f"cannot enter the workdir {workdir}: {exc}")


def prepare_dir_for(path, uid, gid, warnings=None):
    """chown ``path`` and everything beneath it (symlinks themselves, never their targets) to uid:gid, so the
    runner can use its workdir after drop_privileges.  Returns how many entries were changed."""
    n = 0

    def one(p):
        nonlocal n
        try:
            os.lchown(p, uid, gid)
            n += 1
        except OSError as exc:
            if warnings is not None:
                warnings.append(f"cannot chown {p} to {uid}:{gid}: {exc}")

    one(path)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            one(os.path.join(root, name))
    return n


def _reachable(path, uid, gid):
    """Whether uid:gid (no supplementary groups) can traverse every directory down to ``path`` and read it."""
    parts = os.path.realpath(path).split("/")
    for i in range(1, len(parts) + 1):
        d = "/".join(parts[:i]) or "/"
        try:
            st = os.stat(d)
        except OSError:
            return False
        bits = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
        need = 0o5 if i == len(parts) and os.path.isdir(d) else 0o1 if i < len(parts) else 0o4
        if ((st.st_mode >> bits) & 0o7) & need != need:
            return False
    return True


def drop_privileges(uid, gid, warnings, active):
    """setgroups([]), setresgid(gid), setresuid(uid): the runner becomes an unprivileged user, with no
    capabilities.  Refuses (False, with a warning) when that user could not read the interpreter's own files
    (e.g. a Python under /root while /root is not covered by enter_runner_namespaces), since the evaluation would
    then fail for every candidate."""
    if os.getuid() == uid and os.geteuid() == uid:
        if uid != 0:
            grant(active, "own_uid", f"unprivileged uid {uid}")
        return True
    blocked = [p for p in python_paths() if not _reachable(p, uid, gid)]
    if blocked:
        warnings.append(f"privileges not dropped: uid {uid} could not read the interpreter's files ("
                        + ", ".join(blocked[:3]) + "); the runner stays root")
        return False
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as exc:
        warnings.append(f"privileges not dropped ({exc}): the runner runs as uid {os.getuid()}")
        return False
    grant(active, "own_uid", f"unprivileged uid {uid}, gid {gid}, no supplementary groups, no capabilities")
    return True


_ENV_KEEP = {"PATH", "LANG", "LANGUAGE", "TZ", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME",
             "CUDA_PATH", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING", "NVIDIA_VISIBLE_DEVICES",
             "NVIDIA_DRIVER_CAPABILITIES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
             "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"}
_ENV_SECRET = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL")


def _env_allowed(name, extra=()):
    up = name.upper()
    if up.startswith("KGYM_") or any(s in up for s in _ENV_SECRET):
        return False
    return (name in _ENV_KEEP or name in extra or name.startswith("LC_") or name.startswith("TRITON_")
            or (name.startswith("PYTORCH_") and ("CUDA" in name or "NVML" in name)))


def clean_environment(workdir, extra=(), active=None):
    """os.environ reduced to the allowlist; HOME is the workdir and TMPDIR (and tempfile.tempdir) workdir/tmp.
    Returns the names removed."""
    removed = sorted(k for k in os.environ if not _env_allowed(k, extra))
    for k in removed:
        del os.environ[k]
    if workdir:
        tmp = os.path.join(workdir, "tmp")
        os.makedirs(tmp, mode=0o700, exist_ok=True)
        os.environ["HOME"] = workdir
        os.environ["TMPDIR"] = tmp
        import tempfile

        tempfile.tempdir = tmp
    if active is not None:
        grant(active, "clean_environment",
              f"clean environment ({len(removed)} variables removed; HOME and TMPDIR in the workdir)")
    return removed


# Landlock filesystem rights (ABI 1: bits 0-12; REFER: ABI 2; TRUNCATE: ABI 3; IOCTL_DEV: ABI 5).
_LL_EXECUTE, _LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_LL_REFER, _LL_TRUNCATE, _LL_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15


class _RulesetAttrV6(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


def landlock_runner(read, readwrite, active, warnings, execute=()):
    """Landlock for reads as well as writes: ``read`` paths (read, list), ``readwrite`` paths (every right but
    execute), ``execute`` paths (read, list, execute); nothing else can be opened, and nothing but the
    ``execute`` programs can be executed (so nothing the runner wrote).  From ABI 4 TCP bind/connect are
    handled too (never granted), from ABI 6 signals and abstract unix sockets are scoped to the runner's own
    domain.  Returns the ABI in force (a true value), or False where Landlock was refused."""
    libc = _lib()
    abi = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        warnings.append(f"landlock not active ({_err()}): the runner can read and write wherever its uid can")
        return False
    fs = sum(1 << b for b in range(13))
    file_rights = _LL_EXECUTE | _LL_WRITE_FILE | _LL_READ_FILE
    if abi >= 2:
        fs |= _LL_REFER
    if abi >= 3:
        fs |= _LL_TRUNCATE
        file_rights |= _LL_TRUNCATE
    if abi >= 5:
        fs |= _LL_IOCTL_DEV
        file_rights |= _LL_IOCTL_DEV
    attr = _RulesetAttrV6(fs, 0b11 if abi >= 4 else 0, 0b11 if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    fd = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        warnings.append(f"landlock not active ({_err()}): the runner can read and write wherever its uid can")
        return False
    readable = _LL_READ_FILE | _LL_READ_DIR | (_LL_IOCTL_DEV if abi >= 5 else 0)
    try:
        granted = {"read": [], "read+write": [], "execute": []}
        for kind, paths, rights in (("read", read, readable), ("read+write", readwrite, fs & ~_LL_EXECUTE),
                                    ("execute", execute, readable | _LL_EXECUTE)):
            for path in paths:
                try:
                    pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    mask = rights if os.path.isdir(path) else rights & file_rights
                    rule = _PathBeneath(mask, pfd)
                    if libc.syscall(_SYS_LANDLOCK_ADD_RULE, fd, _LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule),
                                    ctypes.c_uint32(0)) == 0:
                        granted[kind].append(path)
                    else:
                        warnings.append(f"landlock: no rule for {path} ({_err()})")
                finally:
                    os.close(pfd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(
                _SYS_LANDLOCK_RESTRICT_SELF, fd, ctypes.c_uint32(0)) != 0:
            warnings.append(f"landlock not active ({_err()}): the runner can read and write wherever its uid can")
            return False
        grant(active, "landlock", f"landlock (ABI {abi}): reads only beneath " + ", ".join(granted["read"]))
        active.append("landlock: reads and writes only beneath " + ", ".join(granted["read+write"]))
        active.append("landlock: executes only " + (", ".join(granted["execute"]) if granted["execute"] else
                                                    "nothing (no program can be started)"))
        if abi >= 4:
            active.append("landlock: no TCP bind or connect")
        if abi >= 6:
            active.append("landlock: signals and abstract unix sockets scoped to the runner")
        return abi
    finally:
        os.close(fd)


# What a GPU runner may execute (Landlock's execute right; nowhere else): Triton's ptxas, the C compiler that
# builds Triton's launcher stubs with gcc's own programs (cc1, collect2, lto-wrapper) and binutils (as, ld),
# ldconfig (Triton finds libcuda with it), and the ELF interpreter every one of them needs.  No shell, no other
# interpreter, nothing the runner wrote.  The interpreter can also load a readable program by hand
# (``ld-linux.so /bin/sh``): what that program then does is held by the same uid, namespaces, Landlock and
# seccomp as the runner's own Python, and it can start nothing else (docs/threat-model.md).
_TOOL_NAMES = ("cc", "gcc", "as", "ld", "ld.bfd", "ld.gold", "ldconfig", "ldconfig.real")
_TOOL_DIRS = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")
_TOOL_TREES = ("/usr/lib/gcc", "/usr/libexec/gcc")
_ELF_INTERPRETERS = ("/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
                     "/lib/ld-linux-aarch64.so.1", "/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1")


def _cuda_dirs():
    """The CUDA toolkits under /usr/local (cuda, cuda-13.0 ...): the runner reads them and, on a GPU, executes
    their tools."""
    try:
        return sorted("/usr/local/" + n for n in os.listdir("/usr/local") if n.startswith("cuda"))
    except OSError:
        return []


def runner_programs(job):
    """The programs (files, and trees of gcc's own programs) a runner may execute: none on the CPU, where the
    interpreter compiles nothing (seccomp kills execve there as well), the compiler toolchain on a GPU."""
    if str(job.get("device", "cpu")) == "cpu":
        return []
    import importlib.util

    out = [os.path.join(d, n) for d in _TOOL_DIRS for n in _TOOL_NAMES] + list(_TOOL_TREES)
    out += list(_ELF_INTERPRETERS)
    spec = importlib.util.find_spec("triton")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        out.append(os.path.join(loc, "backends", "nvidia", "bin"))
    # An explicit tool Triton was told to use (TRITON_PTXAS_PATH ...: files only, so not TRITON_LIBCUDA_PATH's
    # library directory), and the CUDA toolkit's own tools.
    out += [v for k, v in os.environ.items() if k.startswith("TRITON_") and k.endswith("_PATH") and v
            and os.path.isfile(v)]
    out += [d + "/bin" for d in _cuda_dirs()]
    return [p for p in dict.fromkeys(os.path.realpath(q) for q in out) if os.path.exists(p)]


def runner_paths(job):
    """(read, readwrite) for landlock_runner.  Of the evaluation's folder (transport.py) the runner reads src/, the
    checked source, and writes run/ alone: never the source, its folder or the workdir that holds both."""
    from ..shared import transport

    sb = job.get("sandbox") or {}
    workdir = job.get("workdir")
    read = python_paths() + ["/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/sys",
                             "/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/full"]
    if workdir:
        read.append(os.path.dirname(transport.source_path(workdir, None)))
    try:
        # The GPU: CUDA opens /dev/nvidiactl, /dev/nvidia0, /dev/nvidia-uvm ... read-write and ioctls them.
        gpu = sorted("/dev/" + n for n in os.listdir("/dev") if n.startswith("nvidia"))
    except OSError:
        gpu = []
    read += _cuda_dirs()
    read += ["/usr/local/nvidia"] + list(sb.get("readable", []))
    if str(job.get("device", "cpu")) != "cpu":
        # The machine's Triton C modules that kgym's trusted processes built (tritoncache.py): read, never written.
        from ..shared import tritoncache

        shared = tritoncache.known_dir()
        if shared:
            read.append(shared)
    read = [p for p in dict.fromkeys(read) if os.path.exists(p)]
    # The runner's own /proc/<pid> (its pid namespace's view): the CUDA driver writes there while it initialises
    # (cudaErrorOperatingSystem without it, measured on an H200); nothing outside this process is reachable.
    own_proc = os.path.realpath("/proc/self")
    rw = [transport.run_dir(workdir) if workdir else None, os.environ.get("TMPDIR"), "/dev/shm", *gpu, own_proc,
          *sb.get("writable", [])]
    rw = [p for p in dict.fromkeys(rw) if p and os.path.exists(p)]
    # /dev/null and /dev/zero are written to as well (files: only file rights are granted on them).
    rw += [p for p in ("/dev/null", "/dev/zero") if os.path.exists(p)]
    return read, rw


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


# Denied by killing the runner (see SCMP_ACT_KILL_PROCESS): the rest of _RUNNER_DENIED is only refused.
_RUNNER_FATAL = frozenset(("io_uring_setup", "io_uring_enter", "io_uring_register", "pidfd_open",
                           "pidfd_send_signal", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
                           "mount_setattr", "open_by_handle_at", "kexec_file_load", "delete_module"))


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def _signal_filter(pid, pgrp):
    """A raw BPF seccomp program: kill() only to 0, ``pid`` or -``pgrp``; tkill/tgkill only with tid/tgid ==
    ``pid`` (EPERM otherwise).  The low 32 bits of the argument are compared: the kernel reads pid_t as int."""
    import platform

    m = platform.machine()
    if m in ("x86_64", "AMD64"):
        arch, kill, tkill, tgkill = 0xC000003E, 62, 200, 234
    elif m in ("aarch64", "arm64"):
        arch, kill, tkill, tgkill = 0xC00000B7, 129, 130, 131
    else:
        return None
    LD, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06
    # A signal to any other process kills the runner (SIGSYS): kgym reads that as sandbox_violation.
    ALLOW, DENY = 0x7FFF0000, 0x80000000
    ok = [0, pid & 0xFFFFFFFF] + ([(-pgrp) & 0xFFFFFFFF] if pgrp > 0 else [])
    prog = []  # entries: (code, jt, jf, k) where jt/jf may be label names

    def emit(code, k, jt=0, jf=0):
        prog.append([code, jt, jf, k])

    emit(LD, 4)                                  # arch
    emit(JEQ, arch, 1, 0)
    emit(RET, ALLOW)                             # another arch: libseccomp's filter kills it
    emit(LD, 0)                                  # nr
    emit(JSET, 0x40000000, "deny", 0)            # x32 numbers
    emit(JEQ, kill, "kill", 0)
    emit(JEQ, tkill, "tk", 0)
    emit(JEQ, tgkill, "tk", 0)
    emit(RET, ALLOW)
    labels = {"kill": len(prog)}
    emit(LD, 16)                                 # args[0], low half
    for v in ok:
        emit(JEQ, v, "allow", 0)
    emit(RET, DENY)
    labels["tk"] = len(prog)
    emit(LD, 16)
    emit(JEQ, pid & 0xFFFFFFFF, "allow", 0)
    labels["deny"] = len(prog)
    emit(RET, DENY)
    labels["allow"] = len(prog)
    emit(RET, ALLOW)
    arr = (_SockFilter * len(prog))()
    for i, (code, jt, jf, k) in enumerate(prog):
        jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
        arr[i] = _SockFilter(code, jt, jf, k)
    return arr


def _seccomp_signals(active, warnings):
    pid, pgrp = os.getpid(), os.getpgrp()
    arr = _signal_filter(pid, pgrp)
    if arr is None:
        warnings.append("seccomp signal filter not active: unknown architecture; kill() is not restricted")
        return False
    prog = _SockFprog(len(arr), arr)
    libc = _lib()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.prctl(
            _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
        warnings.append(f"seccomp signal filter not active ({_err()}): kill() is not restricted")
        return False
    who = f"pid {pid}" + (f" or its process group {pgrp}" if pgrp > 0 else "") + " (and kill(0, ...))"
    grant(active, "seccomp_signals", f"seccomp: signals only to the runner itself: {who}")
    return True


_CLONE_THREAD = 0x00010000


def _pin_libcuda(warnings):
    """Triton finds libcuda with ``/sbin/ldconfig -p`` the first time it builds a launcher, and on Ubuntu that
    is a shell script, which a locked-down runner may not execute: the answer is found now, before Landlock,
    and kept in TRITON_LIBCUDA_PATH (Triton's own override; clean_environment keeps TRITON_*)."""
    if os.environ.get("TRITON_LIBCUDA_PATH"):
        return
    try:
        from triton.backends.nvidia.driver import libcuda_dirs

        dirs = libcuda_dirs()
    except Exception as exc:  # noqa: BLE001 — no CUDA driver here: Triton will say so when it needs one
        warnings.append(f"libcuda not located before the lockdown ({str(exc)[:200]}): Triton may fail to find it")
        return
    if dirs:
        os.environ["TRITON_LIBCUDA_PATH"] = dirs[0]


def apply_runner(job, active, warnings):
    """The runner's last lockdown, after the namespaces and the uid drop, before the candidate is read: a clean
    environment, rlimits (NPROC fixed: the uid is the job's own), Landlock on reads and writes, then seccomp
    (the runner filter plus the signal filter)."""
    from ..shared import transport

    sb = job.get("sandbox") or {}
    workdir = job.get("workdir")
    if str(job.get("device", "cpu")) != "cpu" and sb.get("landlock", True):
        _pin_libcuda(warnings)
    clean_environment(transport.run_dir(workdir) if workdir else None, tuple(sb.get("env_keep", ())), active)
    _rlimits(job, active, warnings, nproc=int(sb.get("processes", 512)))
    # No bytecode is written from here on (Python would write __pycache__ beside a module it compiles), and none
    # of the candidate's is read: runner.load compiles the checked bytes themselves.
    sys.dont_write_bytecode = True
    read, rw = runner_paths(job)
    abi = 0
    if sb.get("landlock", True):
        abi = landlock_runner(read, rw, active, warnings, execute=runner_programs(job)) or 0
    else:
        warnings.append("landlock disabled by the job: the runner can read and write wherever its uid can")
    mounts_fatal = False
    if sb.get("seccomp", True):
        _seccomp_signals(active, warnings)
        mounts_fatal = _seccomp(active, warnings, no_processes=str(job.get("device", "cpu")) == "cpu")
    else:
        warnings.append("seccomp disabled by the policy")
    _checked_bytes(job, rw, abi, mounts_fatal, active, warnings)
    return {"active": active, "warnings": warnings}


def _write_guards(path, rw, abi, mounts_fatal, points=None):
    """The protections that each, alone, keep this (now locked-down) process from changing ``path`` or what
    lies beneath it — writing, truncating, creating, removing or renaming an entry, or renaming ``path`` or a
    directory above it away to put another in its place: a list of short phrases, empty when nothing does.

    Landlock counts from ABI 3 (truncation is handled from there) when ``path`` is beneath no read-write rule;
    a read-only mount when this process cannot remount it (not root, or seccomp kills every mount call); the uid
    when this process is not root, owns neither ``path`` nor any directory above it, and may write none of them
    (a sticky directory aside, where it can rename only what it owns)."""
    guards = []
    real = os.path.realpath(path)
    # Renaming a directory above ``path`` needs write rights in that directory's parent, which is above ``path``
    # too: beneath no read-write rule, ``path`` is safe from both.
    if abi >= 3 and not any(_beneath(real, os.path.realpath(p)) for p in rw):
        guards.append(f"Landlock (ABI {abi}) grants no write there")
    if _read_only(real) and (os.geteuid() != 0 or mounts_fatal) and _path_pinned(real, points):
        guards.append("a read-only mount")
    if os.geteuid() != 0 and not _uid_can_change(real):
        guards.append(f"uid {os.geteuid()} owns none of it and may write none of it")
    return guards


def _read_only(path):
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _mount_points():
    """The mount points of this process's namespace (/proc/self/mountinfo, field 5, octal escapes undone)."""
    points = set()
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4:
                    points.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    except OSError:
        pass
    return points


def _path_pinned(real, points=None):
    """Whether no directory on the way to ``real`` (itself included) can be renamed away by this process, so that
    its name keeps naming what is mounted there: each is a mount point (EBUSY; ``points``: _mount_points()),
    lies in a read-only mount, or (not root) sits in a parent this uid may not write."""
    points = _mount_points() if points is None else points
    p = real
    while p != "/":
        parent = os.path.dirname(p)
        if not (p in points or _read_only(parent) or (os.geteuid() != 0 and not _uid_can_change(parent))):
            return False
        p = parent
    return True


def _uid_can_change(real):
    """Whether this (non-root) process's uid could change ``real`` or swap it: it owns it or a directory above it
    (it could chmod them), or it may write it or a non-sticky directory above it."""
    import stat as st_

    uid, groups = os.geteuid(), {os.getegid(), *os.getgroups()}
    p = real
    while True:
        try:
            st = os.lstat(p)
        except OSError:
            return True  # unknown: not a guarantee
        if st.st_uid == uid:
            return True
        writable = (st.st_mode & st_.S_IWOTH) or (st.st_gid in groups and st.st_mode & st_.S_IWGRP)
        if writable and (p == real or not st.st_mode & st_.S_ISVTX):
            return True
        parent = os.path.dirname(p)
        if parent == p:
            return False
        p = parent


def _checked_bytes(job, rw, abi, mounts_fatal, active, warnings):
    """What 'the bytes the judge checked are the bytes that run' needs of the sandbox, checked once the lockdown
    is in force (docs/threat-model.md): the source folder (src/, where the judge writes the checked source and
    Triton reads kernel source back) is guarded against this process by at least one of _write_guards, and so is
    every directory Python imports from (an entry beneath the runner's own writable paths is taken off sys.path,
    as are '' and relative entries, which name the current directory).  Each is an ``active`` line, or a
    ``warnings`` line naming what the runner could change; both start with the protection's name."""
    from ..shared import transport

    workdir = job.get("workdir")
    points = _mount_points()
    if workdir:
        src = os.path.dirname(transport.source_path(workdir, None))
        guards = _write_guards(src, rw, abi, mounts_fatal, points)
        probe = os.path.join(src, f".kgym-probe-{os.getpid()}")
        try:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.unlink(probe)
            guards = []  # the runner could create a file there, whatever the analysis said
            why = "a probe file could be created there"
        except OSError:
            why = "no Landlock ABI 3+, no read-only mount it cannot undo, and its uid can change the folder"
        if guards:
            grant(active, "source_readonly", f"source_readonly: the checked source folder {src} cannot be changed by the runner: "
                          + "; ".join(guards))
        else:
            warnings.append(f"source_readonly: not active ({why}): the runner can rewrite the checked source "
                            f"in {src}, which Triton reads kernel source back from")
    own = [os.path.realpath(p) for p in rw]
    taken = [p for p in sys.path if not p or not os.path.isabs(p)
             or any(_beneath(os.path.realpath(p), w) for w in own)]
    sys.path[:] = [p for p in sys.path if p not in taken]
    for p in taken:
        sys.path_importer_cache.pop(p, None)
    open_paths = [p for p in dict.fromkeys(sys.path) if os.path.exists(p)
                  and not _write_guards(p, rw, abi, mounts_fatal, points)]
    if open_paths:
        warnings.append("import_path: not active: the runner can write where Python imports from: "
                        + ", ".join(open_paths[:4]))
    else:
        grant(active, "import_path", f"import_path: nothing on sys.path ({len(sys.path)} entries) can be changed by the runner"
                      + (f"; taken off it: {', '.join(repr(p) for p in taken[:4])}" if taken else "")
                      + "; no bytecode is written")


def judge_lockdown(active, warnings):
    """The judge: not dumpable, so processes of the same uid can neither ptrace it nor open /proc/<pid>/mem,
    environ or fds."""
    libc = _lib()
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        warnings.append(f"judge stays dumpable ({_err()}): same-uid processes could ptrace it")
        return False
    grant(active, "judge_not_dumpable", "judge not dumpable: no ptrace or /proc/<pid>/mem from the same uid")
    return True
