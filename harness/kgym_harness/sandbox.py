"""The process sandbox of the evaluation child, applied after it has its job and before the candidate is read.

- seccomp (libseccomp through ctypes, nothing compiled): ``socket()`` for any family but AF_UNIX fails with
  EACCES (no network), ``ptrace``, ``process_vm_readv/writev`` and ``kcmp`` fail with EPERM (no reading or
  writing other processes, kgym included), and ``prctl(PR_SET_SECCOMP)`` stays possible only to add filters.
  Everything else is allowed: Triton and CUDA need threads, files and (on the GPU) subprocesses for ptxas.
- rlimits: processes (RLIMIT_NPROC: what the user runs now + a margin), open files, core files 0; kgym sets
  address space, file size and CPU time from outside with prlimit().
- a private temp dir: TMPDIR and ``tempfile.tempdir`` point into the job's private workdir; with
  ``sandbox.landlock`` (kgym sets it on CPU) Landlock makes the workdir the only place files can be written
  (plus /dev/null, /dev/shm and any ``sandbox.writable`` paths).

``apply`` returns ``{"active": [...], "warnings": [...]}``: each protection that is on, and a clear warning for
each one the kernel refused (old kernels, containers that already forbid seccomp); kgym puts it in the result.
"""

import ctypes
import ctypes.util
import errno
import os
import resource
import socket

SCMP_ACT_ALLOW = 0x7FFF0000


def SCMP_ACT_ERRNO(e):
    return 0x00050000 | (e & 0xFFFF)


SCMP_CMP_NE = 1


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def _seccomp(active, warnings):
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        warnings.append(f"seccomp not active: libseccomp cannot be loaded ({exc}); network and ptrace are open")
        return
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
        return
    try:
        def rule(syscall, action, cmp=None):
            nr = lib.seccomp_syscall_resolve_name(syscall.encode())
            if nr < 0:
                return False
            arr = (_ArgCmp * 1)(cmp) if cmp else None
            return lib.seccomp_rule_add_array(ctx, action, nr, 1 if cmp else 0, arr) == 0

        denied = []
        if rule("socket", SCMP_ACT_ERRNO(errno.EACCES), _ArgCmp(0, SCMP_CMP_NE, socket.AF_UNIX, 0)):
            denied.append("socket(non-AF_UNIX)")
        for sc in ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "bpf",
                   "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "mount", "umount2",
                   "unshare", "setns", "chroot", "pivot_root", "init_module", "finit_module", "kexec_load"):
            if rule(sc, SCMP_ACT_ERRNO(errno.EPERM)):
                denied.append(sc)
        rc = lib.seccomp_load(ctx)
        if rc != 0:
            warnings.append(f"seccomp not active: the kernel refused the filter ({os.strerror(-rc)}); network "
                            "and ptrace are open")
            return
        active.append("seccomp: no network sockets (AF_UNIX only), no ptrace or cross-process memory access")
        active.append("seccomp denies: " + ", ".join(denied))
    finally:
        lib.seccomp_release(ctx)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446  # x86-64, arm64
_LANDLOCK_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38


def _landlock(writable, active, warnings):
    """Writes, creations, removals and truncations only beneath ``writable`` (Landlock; reading and executing
    stay open: Python, torch and Triton read their own files).  Open descriptors (the pipes, the protocol
    socket) are unaffected."""
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        warnings.append(f"landlock not active: {os.strerror(ctypes.get_errno())}; the candidate can write "
                        "wherever the user can")
        return
    # WRITE_FILE, REMOVE_DIR, REMOVE_FILE, MAKE_CHAR .. MAKE_SYM; REFER (ABI 2), TRUNCATE (ABI 3).
    write = (1 << 1) | (1 << 4) | (1 << 5) | sum(1 << b for b in range(6, 13))
    if abi >= 2:
        write |= 1 << 13
    if abi >= 3:
        write |= 1 << 14
    attr = _RulesetAttr(write)
    fd = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                      ctypes.c_uint32(0))
    if fd < 0:
        warnings.append(f"landlock not active: {os.strerror(ctypes.get_errno())}")
        return
    try:
        granted = []
        for path, rights in writable:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                # A rule on a file (not a directory) may only carry file rights.
                mask = rights & write if os.path.isdir(path) else rights & ((1 << 1) | (1 << 14))
                rule = _PathBeneath(mask, pfd)
                if libc.syscall(_SYS_LANDLOCK_ADD_RULE, fd, _LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule),
                                ctypes.c_uint32(0)) == 0:
                    granted.append(path)
            finally:
                os.close(pfd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(
                _SYS_LANDLOCK_RESTRICT_SELF, fd, ctypes.c_uint32(0)) != 0:
            warnings.append(f"landlock not active: {os.strerror(ctypes.get_errno())}")
            return
        active.append("landlock: files may be written only under " + ", ".join(granted))
    finally:
        os.close(fd)


def _user_processes():
    uid = os.getuid()
    n = 0
    try:
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    if os.stat("/proc/" + d).st_uid == uid:
                        n += 1
                except OSError:
                    pass
    except OSError:
        return 0
    return n


def _rlimits(job, active, warnings):
    def lower(res, name, value):
        soft, hard = resource.getrlimit(res)
        new_hard = value if hard == resource.RLIM_INFINITY or hard > value else hard
        try:
            resource.setrlimit(res, (min(new_hard, value), new_hard))
            active.append(f"rlimit {name}={min(new_hard, value)}")
        except (ValueError, OSError) as exc:
            warnings.append(f"rlimit {name} not set: {exc}")

    sb = job.get("sandbox") or {}
    # RLIMIT_NPROC counts every process of the user: a margin over today's count stops a fork bomb without
    # breaking Triton's compiler subprocesses.
    lower(resource.RLIMIT_NPROC, "NPROC", _user_processes() + int(sb.get("extra_processes", 256)))
    lower(resource.RLIMIT_NOFILE, "NOFILE", int(sb.get("open_files", 4096)))
    lower(resource.RLIMIT_CORE, "CORE", 0)


def apply(job):
    active, warnings = [], []
    sb = job.get("sandbox") or {}
    if sb.get("enabled", True) is False:
        return {"active": [], "warnings": ["sandbox disabled by the job"]}
    workdir = job.get("workdir")
    if workdir and os.path.isdir(workdir):
        tmp = os.path.join(workdir, "tmp")
        os.makedirs(tmp, mode=0o700, exist_ok=True)
        os.environ["TMPDIR"] = tmp
        import tempfile

        tempfile.tempdir = tmp
        active.append("private temp dir (TMPDIR) inside the job's workdir")
    _rlimits(job, active, warnings)
    if sb.get("landlock", False) and workdir:
        all_rights = (1 << 64) - 1
        # The workdir (the candidate's file, its __pycache__, TMPDIR); /dev/null and the like (write only).
        writable = [(workdir, all_rights), ("/dev/null", 1 << 1), ("/dev/shm", all_rights)]
        writable += [(p, all_rights) for p in sb.get("writable", [])]
        _landlock(writable, active, warnings)
    if sb.get("seccomp", True):
        _seccomp(active, warnings)
    else:
        warnings.append("seccomp disabled by the policy")
    return {"active": active, "warnings": warnings}
