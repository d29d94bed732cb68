"""The trusted compile cache: a candidate's Triton kernels compiled once per machine for every runner whose
candidate has the same kernels, by a process that runs none of the candidate's statements.

Why: compiling the candidate's kernels (Triton's LLVM and ptxas, every specialisation and autotune config) was 42%
of an evaluation's wall time on an H100 (docs/PERFORMANCE.md, fifteenth session), and the samples of a GRPO group
are mostly exact twins.  A runner must never produce what another evaluation loads (its process is hostile), so
the compile happens here, on the judge's side, from the checked bytes alone:

  - the judge makes the module's **skeleton** (language.kernel_skeleton: its imports, the constants a kernel may
    read, its @triton.jit functions, each on its own lines, every other line blank) and its **namespace**, the
    SHA-256 of that text (``namespace``);
  - when Triton in the runner is about to compile (its jit_cache_hook), the runner sends the specialisation
    (Triton's own serialised form: signature, constants, attributes, options) with its "compiling" message, and
    waits;
  - the judge (``Service.ensure``) looks for it in the namespace's directory; if it is not there it asks its
    **helper** (a process forked from the judge before any job or CUDA context: it holds nothing of any
    evaluation) for a **worker**: PID 1 of a PID namespace of its own under a root intermediate that keeps its
    budget, it makes its folder (``<root>/.work/compile-<time>-*``) a private tmpfs, drops to the runner's uid,
    locks itself down (Landlock: writes only beneath its folder; rlimits), says what it could not lock (its first
    word, before any of the skeleton runs), runs Triton's ``compile`` on the skeleton's kernel for that
    specialisation, for the judge's GPU target, into its folder, and sends the entry's files over its socket.
    The judge checks them (plain names, sizes, the group file) and files them into the namespace's directory
    under the key Triton computed, and answers.  The exchange: judge → helper {target, budget}; helper → judge
    the worker's socket (SCM_RIGHTS); judge → worker the request; worker → judge {"lockdown": [warnings]}, then
    {"ok", "key", "files"} | {"compile_error"} | {"error"}; helper → judge {} | {"error"} once the worker ended
    (each read by a deadline of its own, the helper's always read);
  - the runner's Triton, now looking the kernel up, finds it there (tritoncache.reader_class serves a kernel's
    group from the namespace the judge named, and nothing from the runner's own cache); on any miss it compiles
    itself, as before.

What makes it sound.  A namespace's entries are compiled from its skeleton and a specialisation only, by Triton's
code: the worker runs the candidate's imports (from the language's fixed list), constants (literals, arithmetic,
dtypes, math of such) and def statements, whose defaults and annotations the language restricts the same way;
Triton reads kernel bodies as text.  Entries are found by Triton's own key (the kernel's text, its first line,
what it calls, its constexpr globals, the specialisation, the options, the target), under a namespace only runners
of candidates with that very skeleton are told; so what a runner loads is what its own kernels' checked text
compiles to.  A worker subverted through a hole in the language could spoil only its own namespace, which no other
skeleton shares.  The runner's request is its word only: a lie names a specialisation that is not its own, which
its Triton then never looks up.  Concurrent requests for one entry (a GRPO group's samples) are joined with a lock
file: one worker compiles, the others wait and find it.

Directory (``root``): ``<tritoncache.modules_dir()>/kernels``, 0711 (other uids cannot list the namespaces),
``<root>/<namespace>/`` 0755 holding ``<request>/<Triton's key>/`` (0755, files 0644: Triton's group file,
metadata and each IR; ``<request>`` the digest of the kernel's name and the exact specialisation text, renamed
into place whole), ``.lock-<request>`` and ``.fail-<request>`` (a compile error: twins do not repeat it; their
runners compile and report it themselves).

Every function returns facts and never raises for a refusal: without the cache the runner compiles as before.
"""

import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import stat
import struct
import sys
import tempfile
import time

from ..shared.tritoncache import MAX_KERNEL_SPEC

VERSION = "kgym-kernels-1"
# A specialisation as the runner sends it (Triton's serialize_specialization_data JSON): at most this long (the
# bound both sides of the boundary read, shared/tritoncache.py).
MAX_SPEC = MAX_KERNEL_SPEC
# Requests one evaluation may make (each one a compile at most): past it, its runner compiles alone.
MAX_REQUESTS = 64
# A worker's wall-clock budget (CPU seconds: the same plus a little, as an rlimit), and all of one evaluation's
# workers together: past it, its runner compiles alone (within the evaluation's own limits).
BUDGET_S = 120.0
EVALUATION_BUDGET_S = 60.0
# A worker's data segment (heap and private mappings, RLIMIT_DATA): a constant like "x" * 10**12 fails there.
WORKER_DATA_BYTES = 8 << 30
# Namespaces the directory holds: past it, those used least recently are removed (safe at any age: a runner copies
# what it loads into its own folder the moment the judge answers, tritoncache.kernel_group).
MAX_NAMESPACES = 512
# Entries one namespace may hold, files and bytes one entry (and any file a worker writes: RLIMIT_FSIZE), bytes
# one namespace: at most MAX_NAMESPACES x MAX_NAMESPACE_BYTES (16 GiB) in all, and nothing is added while the disk
# has less than MIN_FREE_BYTES free.  An entry is ~0.1-1 MB (a cubin and its IRs).
MAX_ENTRIES = 64
MAX_FILES = 16
MAX_BYTES = 16 << 20
# The worker's folder: a private tmpfs of its own mount namespace (what it writes, however much, never reaches the
# host's disk, and goes with it): ptxas's temporaries and Triton's entry fit many times over.
WORKER_PROCESSES = 512  # RLIMIT_NPROC of a worker dropped to the runner's uid (the runner's default too)
WORK_BYTES = 512 << 20
WORK_FILES = 4096
MAX_NAMESPACE_BYTES = 32 << 20
MIN_FREE_BYTES = 4 << 30
# Options a specialisation may set (a launch's or a Config's own: the language lets the candidate choose these);
# every other option must be the backend's default (ir_override, a path Triton would read IR from; extern_libs,
# bitcode it would link; the precisions...).
FREE_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion",
                          "launch_cooperative_grid", "launch_pdl", "debug", "sanitize_overflow",
                          "instrumentation_mode", "max_num_imprecise_acc_default"})
_KEY = re.compile(r"^[A-Z2-7]{52}$")  # Triton's base32 spelling of a SHA-256


def namespace(skeleton):
    """The namespace of a skeleton: its SHA-256 with this cache's version and Triton's (hex)."""
    try:
        import triton

        version = triton.__version__
    except ImportError:
        version = "?"
    return hashlib.sha256(f"{VERSION}\0{version}\0".encode() + skeleton.encode("utf-8")).hexdigest()


def root():
    """(path, None) or (None, why): the kernels directory beneath the trusted modules directory, 0711, safe
    (tritoncache.safe_dir)."""
    from ..shared import tritoncache

    base, why = tritoncache.modules_dir()
    if base is None:
        return None, why
    return tritoncache.safe_dir(os.path.join(base, "kernels"), 0o711)


def request_digest(qualname, spec):
    return hashlib.sha256(f"{qualname}\0{spec}".encode("utf-8")).hexdigest()[:40]


# -- the judge's side ---------------------------------------------------------------------------------------------

class Service:
    """One judge's use of the cache: its helper, its GPU target, and one evaluation's counts (``begin``)."""

    def __init__(self, helper):
        self.helper = helper
        self.target = None
        self._default_options = None
        self.begin(None, None, None)

    def begin(self, skeleton, kernels, uid):
        """A new evaluation: its skeleton (None: nothing is served) and kernel names, its runner's uid."""
        self.skeleton = skeleton
        self.kernels = set(kernels or ())
        self.ns = namespace(skeleton) if skeleton else None
        self.uid = uid
        self.facts = {"requests": 0, "hits": 0, "compiled": 0, "joined": 0, "failed": 0, "refused": 0,
                      "compile_ms": 0.0, "wait_ms": 0.0}
        self.reasons = []

    def _note(self, what, why=None):
        self.facts[what] += 1
        if why and len(self.reasons) < 8:
            self.reasons.append(str(why)[:300])

    def ensure(self, qualname, spec):
        """The runner's request (its word): the entry for kernel ``qualname`` and specialisation ``spec`` (JSON
        text) in this evaluation's namespace, compiled here where missing.  Returns (directory to serve from, or
        None)."""
        t0 = time.monotonic()
        try:
            return self._ensure(qualname, spec)
        except Exception as exc:  # noqa: BLE001 — a miss: the runner compiles
            self._note("failed", f"{type(exc).__name__}: {exc}")
            return None
        finally:
            self.facts["wait_ms"] += (time.monotonic() - t0) * 1e3

    def _ensure(self, qualname, spec):
        t0 = time.monotonic()
        if self.ns is None or self.helper is None:
            return None
        self.facts["requests"] += 1
        if self.facts["requests"] > MAX_REQUESTS:
            self._note("refused", f"more than {MAX_REQUESTS} compile requests")
            return None
        if not isinstance(qualname, str) or qualname not in self.kernels:  # the skeleton's own names only
            self._note("refused", f"not a kernel of the skeleton: {str(qualname)[:80]!r}")
            return None
        if not isinstance(spec, str) or len(spec) > MAX_SPEC:
            self._note("refused", "a specialisation that is not text of at most 64 KiB")
            return None
        try:
            parsed = json.loads(spec)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict) or not all(k in parsed for k in ("signature", "constant_keys",
                                                                         "constant_vals", "attrs_keys",
                                                                         "attrs_vals", "options")):
            self._note("refused", "a specialisation that is not Triton's")
            return None
        why = self._options_why(parsed.get("options")) or _constants_why(parsed)
        if why:
            self._note("refused", why)
            return None
        base, why = root()
        if base is None:
            self._note("failed", why)
            return None
        nsdir = os.path.join(base, self.ns)
        if not os.path.isdir(nsdir):
            if _count(base, MAX_NAMESPACES) >= MAX_NAMESPACES:
                _evict(base, MAX_NAMESPACES - 1)
            if _count(base, MAX_NAMESPACES) >= MAX_NAMESPACES:
                self._note("refused", "the cache is full")
                return None
            from ..shared import tritoncache

            nsdir, why = tritoncache.safe_dir(nsdir, 0o755)
            if nsdir is None:
                self._note("failed", why)
                return None
        digest = request_digest(qualname, spec)
        if _filed(nsdir, digest):
            self._note("hits")
            return _touch(nsdir, digest)
        if os.path.exists(os.path.join(nsdir, ".fail-" + digest)):
            self._note("failed", "compiled before, and failed")
            return None
        fd = os.open(os.path.join(nsdir, ".lock-" + digest), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        try:
            left = EVALUATION_BUDGET_S - self.facts["wait_ms"] / 1000 - (time.monotonic() - t0)
            waited = _lock(fd, max(0.0, min(BUDGET_S + 10, left)))
            if waited is None:
                self._note("failed", "another judge's compile of it did not end")
                return None
            if _filed(nsdir, digest):
                self._note("joined" if waited > 0.001 else "hits")
                return _touch(nsdir, digest)
            if os.path.exists(os.path.join(nsdir, ".fail-" + digest)):
                self._note("failed", "compiled meanwhile, and failed")
                return None
            left = EVALUATION_BUDGET_S - self.facts["wait_ms"] / 1000 - (time.monotonic() - t0)
            return self._compile(nsdir, digest, qualname, spec, left)
        finally:
            os.close(fd)  # the lock goes with it

    def _options_why(self, options):
        """Why the options of a specialisation are refused, or None: every option not in FREE_OPTIONS must be the
        backend's default for the judge's target."""
        if not isinstance(options, dict):
            return "a specialisation without options"
        defaults = self._defaults()
        for k, v in options.items():
            if k not in defaults:
                return f"the option {str(k)[:40]} is not the backend's"
            if k in FREE_OPTIONS:
                # The candidate's choice, of the default's own type: Triton hashes an option as str(value), so a
                # launch_pdl="False" (a true string) would otherwise pass for False.
                want = type(defaults[k])
                if not (type(v) is want or (defaults[k] is None and type(v) is int) or
                        (want is float and type(v) is int)):
                    return f"the option {str(k)[:40]} is a {type(v).__name__}, not a {want.__name__}"
                continue
            if _jsonish(defaults[k]) != _jsonish(v):
                return f"the option {str(k)[:40]} is not the backend's default"
        return None

    def _defaults(self):
        """The backend's default options for the judge's target: made once per judge (its GPU does not change)."""
        if self._default_options is None:
            self._set_target()
            from triton.backends.compiler import GPUTarget
            from triton.compiler import make_backend

            self._default_options = make_backend(GPUTarget(*self.target)).parse_options({}).__dict__
        return self._default_options

    def _set_target(self):
        if self.target is None:
            from triton.runtime import driver

            t = driver.active.get_current_target()
            self.target = [t.backend, t.arch, t.warp_size]

    def _compile(self, nsdir, digest, qualname, spec, left):
        """The worker's compile of one request into ``nsdir``/``digest``; ``left``: seconds of this evaluation's
        budget left, this request's own wait so far counted."""
        if left < 1:
            self._note("refused", f"this evaluation's {EVALUATION_BUDGET_S:.0f} s of compiles are spent")
            return None
        _evict(nsdir, MAX_ENTRIES - 1, MAX_NAMESPACE_BYTES - MAX_BYTES)  # the requests used least recently go
        if _count(nsdir, MAX_ENTRIES) >= MAX_ENTRIES or _bytes(nsdir) >= MAX_NAMESPACE_BYTES:
            self._note("refused", "the namespace is full")
            return None
        if _free(nsdir) < MIN_FREE_BYTES:
            self._note("refused", "the disk is nearly full")
            return None
        self._set_target()
        out = _worker_folder(os.path.dirname(nsdir))  # the cache's root
        if out is None:
            self._note("failed", "no folder for the worker beneath the cache")
            return None
        try:
            if self.uid is not None and os.geteuid() == 0:
                os.chown(out, self.uid, self.uid)
            t0 = time.monotonic()
            budget = min(BUDGET_S, left)
            answer = self.helper.compile({"skeleton": self.skeleton, "qualname": qualname, "spec": spec,
                                          "target": self.target, "out": out, "uid": self.uid, "budget": budget},
                                         budget)
            self.facts["compile_ms"] += (time.monotonic() - t0) * 1e3
            if answer.get("compile_error") or (answer.get("error") and not answer.get("transient")):
                # Triton refused the kernel, or the skeleton failed in the worker: a fact of these bytes and this
                # specialisation, which twins need not learn again (a budget spent or a helper gone is not).
                why = str(answer.get("compile_error") or answer.get("error"))
                _write_marker(nsdir, ".fail-" + digest, why[:2000])
                self._note("failed", why)
                return None
            if not answer.get("ok"):
                self._note("failed", answer.get("error") or "the worker did not finish")
                return None
            _file(answer.get("key"), answer.get("files"), nsdir, digest)
            self._note("compiled")
            for w in answer.get("lockdown") or ():  # a protection refused: the result says so (2 at most)
                if len(self.reasons) < 8 and "warning: " + w not in self.reasons:
                    self.reasons.append("warning: " + w)
            return _touch(nsdir, digest)
        finally:
            _remove_tree(out, REMOVE_S)


WORK = ".work"  # the workers' folders beneath the cache's root (a dot name: never counted or evicted as a namespace)
STALE_WORK_S = 3600  # a folder this old was left by a judge killed mid-compile (a worker lives BUDGET_S at most)
REMOVE_S = 30.0  # the longest the judge spends removing one worker's folder after its compile (then a sweep's)
SWEEP_S = 5.0  # the longest a compile spends sweeping folders judges killed mid-compile left
_BORN = re.compile(r"^compile-(\d+)-")


def _worker_folder(base):
    """A new folder for one worker's output, beneath the cache's root (``<root>/.work``, 0711, the root 0711 and
    the modules directory 0755 above it): a path the runner's uid can traverse wherever the judge's TMPDIR points.
    A private TMPDIR (bench/fleet.sh gives every process of the fleet one) made every worker fail once it dropped to
    that uid, so the cache served nothing there.  Folders left by a judge killed mid-compile go first, within
    SWEEP_S: a folder's age is the time in its name, which the judge gave it (``.work`` is root's and 0711: a
    worker can neither rename nor list it), never its mtime, which its worker sets (a live folder dated 1970 would
    be swept under its compile).  Returns the path (chown-ed to the worker's uid by the caller), or None."""
    from ..shared import tritoncache

    work, _why = tritoncache.safe_dir(os.path.join(base, WORK), 0o711)
    if work is None:
        return None
    now = time.time()
    deadline = time.monotonic() + SWEEP_S
    try:
        names = os.listdir(work)
    except OSError:
        names = []
    for name in names:
        born = _BORN.match(name)
        if born and now - int(born.group(1)) <= STALE_WORK_S:
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            break
        _remove_tree(os.path.join(work, name), left)
    try:
        return tempfile.mkdtemp(prefix=f"compile-{int(now)}-", dir=work)
    except OSError:
        return None


def _remove_tree(path, timeout):
    """Removes ``path``, whatever a worker left in it: links removed, never followed; a tree of any depth (GNU rm
    walks with fts, where shutil.rmtree recursed a level at a time and raised RecursionError, which no
    ``ignore_errors`` covers, on a chain of a few thousand directories: the folder outlived its compile, and each
    later sweep failed).  Within ``timeout`` seconds; what is left then stays for a later sweep.  Never raises: a
    folder that cannot be removed is no reason to fail a compile."""
    import subprocess

    try:
        subprocess.run([shutil.which("rm") or "/bin/rm", "-rf", "--one-file-system", "--", path],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=max(0.1, timeout), check=False)
    except Exception:  # noqa: BLE001 — a timeout, or no rm: the folder waits for the next sweep
        pass


def _constants_why(spec):
    """Why a specialisation's constants are refused, or None: their paths must be exactly the signature's
    ``constexpr`` arguments (a runtime argument made a constant compiles other code under a key that may be an
    honest specialisation's), each path a list of indices."""
    sig = spec.get("signature")
    keys = spec.get("constant_keys")
    vals = spec.get("constant_vals")
    if not isinstance(sig, dict) or not isinstance(keys, list) or not isinstance(vals, list) or \
            len(keys) != len(vals):
        return "a specialisation whose signature or constants are not Triton's"
    want = {(i,) for i, t in enumerate(sig.values()) if t == "constexpr"}
    got = set()
    for k in keys:
        if not isinstance(k, list) or not k or not all(type(x) is int and x >= 0 for x in k):
            return "a constant whose path is not a list of indices"
        got.add(tuple(k))
    top = {k for k in got if len(k) == 1}
    if top != want or len(got) != len(keys):
        return "constants that are not the signature's constexpr arguments"
    return None


def _free(path):
    try:
        st = os.statvfs(path)
        return st.f_bavail * st.f_frsize
    except OSError:
        return 0


def _jsonish(v):
    """A value as it comes over JSON (tuples are lists), for comparing an option with its default."""
    if isinstance(v, (list, tuple)):
        return [_jsonish(x) for x in v]
    return v


def _touch(nsdir, digest):
    """The request's directory, marked used now (its namespace too): eviction takes the least recently used."""
    rdir = os.path.join(nsdir, digest)
    for d in (rdir, nsdir):
        try:
            os.utime(d)
        except OSError:
            pass
    return rdir


def _bytes(nsdir):
    total = 0
    try:
        for root_, _dirs, files in os.walk(nsdir):
            total += sum(os.lstat(os.path.join(root_, f)).st_size for f in files)
    except OSError:
        return MAX_NAMESPACE_BYTES
    return total


def _evict(parent, keep, keep_bytes=None):
    """The directories of ``parent`` (namespaces of the cache, or requests of a namespace) used least recently
    removed until at most ``keep`` remain (and at most ``keep_bytes`` in all, where given).  Safe at any age: a
    runner copies an entry into its own folder the moment it is told where it is (tritoncache.kernel_group), and
    one that finds it gone compiles itself.  Each goes by a rename first, so no reader sees half of one."""
    try:
        with os.scandir(parent) as it:
            dirs = sorted((e.stat(follow_symlinks=False).st_mtime, e.path) for e in it
                          if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
    except OSError:
        return
    total = _bytes(parent) if keep_bytes is not None else 0
    while dirs and (len(dirs) > keep or (keep_bytes is not None and total > keep_bytes)):
        _mtime, path = dirs.pop(0)
        gone = os.path.join(parent, ".gone-" + os.path.basename(path))
        try:
            if keep_bytes is not None:
                total -= _bytes(path)
            os.rename(path, gone)
        except OSError:
            continue
        shutil.rmtree(gone, ignore_errors=True)


def _count(path, unreadable):
    """The entries of ``path`` (namespaces of the cache, or requests of a namespace), not those on their way out
    (``.gone-*``), temporary names or markers; ``unreadable`` where it cannot be read (as full)."""
    try:
        with os.scandir(path) as it:
            return sum(1 for e in it if not e.name.startswith("."))
    except OSError:
        return unreadable


def _lock(fd, budget):
    """flock(fd) within ``budget`` seconds: the seconds waited, or None."""
    t0 = time.monotonic()
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return time.monotonic() - t0
        except BlockingIOError:
            if time.monotonic() - t0 > budget:
                return None
            time.sleep(0.01)


def _filed(nsdir, digest):
    """Whether the request's entry is there as the judge left it: ``nsdir/digest`` holds one key directory whose
    group file is servable."""
    from ..shared import tritoncache

    d = os.path.join(nsdir, digest)
    try:
        keys = [n for n in os.listdir(d) if _KEY.match(n)]
    except OSError:
        return False
    if len(keys) != 1:
        return False
    try:
        groups = [n for n in os.listdir(os.path.join(d, keys[0])) if n.startswith("__grp__")]
    except OSError:
        return False
    return len(groups) == 1 and tritoncache.servable(os.path.join(d, keys[0], groups[0]), {0, os.getuid()})


def _write_marker(nsdir, name, text):
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=nsdir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            os.fchmod(f.fileno(), 0o644)
        os.replace(tmp, os.path.join(nsdir, name))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _file(key, sent, nsdir, digest):
    """The entry the worker sent (``{name: base64 bytes}``, the files of its ``cache/<key>/``), checked and written
    into the namespace as ``digest/key/``: names of plain files only, at most MAX_FILES of MAX_BYTES in all, exactly
    those its group file names, written 0644 in 0755 directories made under a temporary name and renamed into place
    at once.  The worker's word is all checked here: it read its own folder (a private tmpfs that went with it),
    and may say anything.  Why a directory per request and not per Triton key: Triton hashes a constant as
    str(value), so "1" and 1 (or an option "False" and False) share a key while they compile to different code; a
    runner reads only the directory of its own request, whose digest is of the exact JSON it sent.  Returns the
    key; raises ValueError on anything else."""
    import base64
    import binascii

    if not isinstance(key, str) or not _KEY.match(key):
        raise ValueError(f"the worker named no key ({str(key)[:60]!r})")
    if not isinstance(sent, dict) or not sent or len(sent) > MAX_FILES:
        raise ValueError(f"not 1 to {MAX_FILES} files")
    files = {}
    total = 0
    for name, text in sent.items():
        if not _plain_name(name) or not isinstance(text, str) or len(text) > MAX_BYTES * 4 // 3 + 4:
            raise ValueError(f"a file the entry may not hold: {str(name)[:60]!r}")
        try:
            files[name] = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{name[:60]!r} is not base64") from None
        total += len(files[name])
    if total > MAX_BYTES:
        raise ValueError(f"{len(files)} files, {total} bytes: more than an entry may hold")
    groups = [n for n in files if n.startswith("__grp__")]
    if len(groups) != 1:
        raise ValueError("not one group file")
    group = groups[0]
    try:
        children = json.loads(files[group]).get("child_paths")
    except (ValueError, AttributeError, UnicodeDecodeError):
        children = None
    if not isinstance(children, dict) or not children or \
            any(not isinstance(n, str) or n not in files or n.startswith("__grp__") for n in children):
        raise ValueError("the group file names files the entry does not hold")
    data = {name: files[name] for name in children}
    final = os.path.join(nsdir, digest)
    work = tempfile.mkdtemp(prefix=".tmp-", dir=nsdir)
    try:
        os.chmod(work, 0o755)
        entry = os.path.join(work, key)
        os.mkdir(entry, 0o755)
        os.chmod(entry, 0o755)
        for name, blob in data.items():
            with open(os.path.join(entry, name), "xb") as f:
                f.write(blob)
                os.fchmod(f.fileno(), 0o644)
        # The group file as Triton writes it, naming the files where they will be.
        with open(os.path.join(entry, group), "w", encoding="utf-8") as f:
            json.dump({"child_paths": {n: os.path.join(final, key, n) for n in children}}, f)
            os.fchmod(f.fileno(), 0o644)
        if os.path.lexists(final):
            shutil.rmtree(final) if os.path.isdir(final) and not os.path.islink(final) else os.unlink(final)
        os.rename(work, final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return key


def _plain_name(name):
    """A name a file of an entry may have: one path component, not hidden (so not . or ..), no NUL, at most 255
    bytes, not Triton's lock."""
    try:
        size = len(name.encode("utf-8"))
    except (AttributeError, UnicodeEncodeError):
        return False
    return 0 < size <= 255 and "/" not in name and "\0" not in name and not name.startswith(".") and name != "lock"


def _collect(out, key):
    """In the worker: its entry (``out``/cache/<key>/), {name: base64 bytes} of its plain files but Triton's lock
    and temporaries, within MAX_FILES and MAX_BYTES (the judge checks again); raises ValueError past them."""
    import base64

    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fds = []
    try:
        fds.append(os.open(out, flags))
        fds.append(os.open("cache", flags, dir_fd=fds[-1]))
        fds.append(os.open(key, flags, dir_fd=fds[-1]))
        src = fds[-1]
        sizes = {}
        for name in os.listdir(src):
            if name == "lock" or name.startswith("."):
                continue
            est = os.stat(name, dir_fd=src, follow_symlinks=False)
            if not stat.S_ISREG(est.st_mode):
                raise ValueError(f"{name} is not a regular file")
            sizes[name] = est.st_size
        if len(sizes) > MAX_FILES or sum(sizes.values()) > MAX_BYTES:
            raise ValueError(f"{len(sizes)} files, {sum(sizes.values())} bytes: more than an entry may hold")
        return {name: base64.b64encode(_read(name, size, src)).decode("ascii") for name, size in sizes.items()}
    finally:
        for fd in fds:
            os.close(fd)


def _read(name, size, dir_fd):
    """At most ``size`` bytes of the regular file ``name`` in the directory ``dir_fd``, never through a link."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as f:
        return f.read(size + 1)[:size]


# -- the helper: forked from the judge before any job -------------------------------------------------------------

ANSWER_LIMIT = MAX_BYTES * 4 // 3 + (1 << 20)  # a worker's answer: an entry's files in base64, and its words


def _send(sock, obj):
    data = json.dumps(obj).encode("utf-8")
    sock.sendall(struct.pack("!I", len(data)) + data)


def _recv(sock, limit=16 << 20, deadline=None):
    """One message (a 4-byte length, then JSON), or None at the end of the socket; by ``deadline`` (monotonic
    seconds) where given, whatever the sender's pace (socket.timeout past it)."""
    head = _recv_exact(sock, 4, deadline)
    if head is None:
        return None
    (n,) = struct.unpack("!I", head)
    if n > limit:
        raise ValueError("a message too long")
    data = _recv_exact(sock, n, deadline)
    if data is None:
        return None
    return json.loads(data)


def _recv_exact(sock, n, deadline=None):
    chunks = []
    while n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("past the exchange's deadline")
            sock.settimeout(left)
        chunk = sock.recv(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class Helper:
    """The judge's end of its helper process (``start``)."""

    def __init__(self, sock, pid):
        self.sock = sock
        self.pid = pid
        self.broken = None  # why the helper's socket can no longer be trusted to be in step, once it cannot

    def compile(self, request, budget):
        """One worker's run: the helper forks a worker and hands this process the worker's socket; the request
        goes to the worker alone (the helper, which forks every later worker, never holds a candidate's bytes),
        its answer comes back from it ({"ok", "key", "files"} or {"compile_error"} or {"error"}), then the
        helper's word on how it ended (a worker killed past its budget says nothing itself).  The whole exchange
        has one deadline, the budget and 30 s (a worker's descendant sending a byte now and then cannot stretch
        it), and the helper's word is read whatever the worker sent: an answer too long, not JSON or nested past
        the recursion limit is the worker's failure, never a helper one message behind for every later compile.
        Where the helper's word cannot be read, the helper is not used again (every later request a miss)."""
        if self.broken:
            return {"error": f"the helper is gone ({self.broken})", "transient": True}
        t0 = time.monotonic()
        # The worker is killed at the budget (its intermediate): its words are late past budget + 10 s; the
        # helper's word comes by budget + 5 s (its backstop), read by budget + 40 s from its own deadline, so a
        # worker that spends its own cannot make the helper's late (which would mark the helper broken).
        worker_deadline, helper_deadline = t0 + budget + 10, t0 + budget + 40
        worker = None
        lockdown = []
        try:
            _send(self.sock, {"target": request.get("target"), "budget": budget})
            self.sock.settimeout(max(0.1, helper_deadline - time.monotonic()))
            _msg, fds, _flags, _addr = socket.recv_fds(self.sock, 16, 1)
            if len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                self.broken = "it handed no worker"
                return {"error": "the helper is gone", "transient": True}
            worker = socket.socket(fileno=fds[0])
            try:
                _send(worker, request)
                # The worker's first word is its lockdown's, sent before any of the skeleton runs: the only
                # warnings the judge believes (what a subverted worker says later is its own).
                first = _recv(worker, 1 << 16, worker_deadline)
                if isinstance(first, dict) and isinstance(first.get("lockdown"), list):
                    lockdown = [str(w)[:290] for w in first["lockdown"][:2]]
                    answer = _recv(worker, ANSWER_LIMIT, worker_deadline)
                else:
                    answer = first  # the lockdown failed, or no request: its one word
            except Exception as exc:  # noqa: BLE001 — the worker's doing (RecursionError included)
                answer = {"error": f"the worker's answer: {type(exc).__name__}: {str(exc)[:200]}", "transient": True}
            worker.close()  # nothing more is read from it: its descendants write to no one
            worker = None
            ended = _recv(self.sock, 1 << 16, helper_deadline)
        except Exception as exc:  # noqa: BLE001 — the helper's socket is out of step, or the helper gone
            self.broken = f"{type(exc).__name__}: {str(exc)[:200]}"
            return {"error": f"the helper: {self.broken}", "transient": True}
        finally:
            if worker is not None:
                worker.close()
        if not isinstance(ended, dict):
            self.broken = "it said nothing of the worker's end"
            return {"error": "the helper is gone", "transient": True}
        if ended.get("error"):
            return dict(ended, transient=True, lockdown=lockdown)  # killed past its budget, or gone
        if not isinstance(answer, dict):
            answer = {"error": "the worker ended without an answer", "transient": True}
        return dict(answer, lockdown=lockdown)  # the judge's reading of it, never the worker's


def start(fresh=False):
    """Forks the helper: call before the judge reads any job or makes a CUDA context.  Returns a Helper, or None
    (printed to stderr) where it cannot start; then every runner compiles its own kernels, as before.
    ``fresh``: a new interpreter instead of a fork (tests, whose process imported Triton as its interpreter)."""
    try:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        if fresh:
            import subprocess

            env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
            here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            code = ("import socket, sys; from kgym_harness.judge import kernelcache; "
                    "kernelcache._helper_main(socket.socket(fileno=int(sys.argv[1])))")
            proc = subprocess.Popen([sys.executable, "-c", code, str(child.fileno())], pass_fds=[child.fileno()],
                                    env=env)
            child.close()
            return Helper(parent, proc.pid)
        pid = os.fork()
    except OSError as exc:
        print(f"kgym judge: no compile helper ({exc}): runners compile their own kernels", file=sys.stderr)
        return None
    if pid == 0:
        code = 0
        try:
            parent.close()
            _helper_main(child)
        except BaseException:  # noqa: BLE001 — the helper ends; the judge sees its socket close
            code = 1
        os._exit(code)
    child.close()
    return Helper(parent, pid)


def _helper_main(sock):
    from ..runner import sandbox

    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: ends with the judge
    except (OSError, AttributeError):
        pass
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sandbox.close_descriptors([sock.fileno(), 1, 2])
    _warm(("cuda", 90, 32))  # while the judge starts: the backend's imports and ptxas's version, for any target
    while True:
        go = _recv(sock)
        if go is None:
            return
        _warm(go.get("target"))
        _send(sock, _run_worker(sock, go.get("budget")))


_warmed = set()


def _warm(target):
    """Triton's backend for ``target`` made and its options parsed once in the helper (ptxas's version asked, the
    backend's modules imported: ~1 s), so that its workers, forked from it, start warm."""
    try:
        key = tuple(target)
        if key in _warmed:
            return
        _warmed.add(key)
        import torch  # noqa: F401 — a skeleton's imports (the zygote's judges have it already)
        import triton.compiler.code_generator  # noqa: F401
        from triton.backends.compiler import GPUTarget
        from triton.compiler import make_backend
        from triton.runtime.cache import triton_key

        triton_key()  # the hash of Triton's own files, part of every key (the zygote's judges have it already)
        make_backend(GPUTarget(*target)).parse_options({})
    except Exception:  # noqa: BLE001 — each worker then warms itself
        pass


_LATE = 3  # the intermediate's exit status for a worker it killed past its budget


def _run_worker(sock, budget):
    """Forks one worker (through an intermediate: below), hands the judge its socket (SCM_RIGHTS on ``sock``),
    waits for it within ``budget`` seconds (then kills it).  Returns the helper's word for the judge: {} or
    {"error"}."""
    try:
        budget = min(BUDGET_S, max(1.0, float(budget)))
    except (TypeError, ValueError):
        budget = BUDGET_S
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    def intermediate():
        os.setpgid(0, 0)
        sock.close()
        theirs.close()
        return _intermediate(mine, budget)

    pid = _fork(intermediate)
    mine.close()
    try:
        os.setpgid(pid, pid)  # its own group (the child sets it too): the helper kills it with ptxas at once
    except OSError:
        pass
    try:
        socket.send_fds(sock, [b"w"], [theirs.fileno()])
    finally:
        theirs.close()
    def kill_group():
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            os.kill(pid, signal.SIGKILL)

    # The intermediate keeps the budget; this is its backstop.
    status = _wait(pid, time.monotonic() + budget + 5, kill_group)
    if status is None or os.waitstatus_to_exitcode(status) == _LATE:
        return {"error": f"the compile took longer than {budget:.0f} s"}
    return {} if status == 0 else {"error": f"the worker ended with status {status}"}


def _fork(run):
    """Forks a child that runs ``run()`` and exits with what it returns (1 where it raises); returns its pid."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = run()
        except BaseException:  # noqa: BLE001
            code = 1
        os._exit(code)
    return pid


def _wait(pid, deadline, kill):
    """The wait status of child ``pid``, or None where it had not ended by ``deadline`` (monotonic seconds): then
    ``kill()`` ended it, and it is reaped."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if time.monotonic() > deadline:
            kill()
            os.waitpid(pid, 0)
            return None
        time.sleep(0.005)


def _intermediate(sock, budget):
    """Between the helper and one worker (root, the helper's uid: a worker dropped to the runner's uid can neither
    signal nor trace it).  Where it can, it gives its child a PID namespace of its own, so the worker is its PID 1
    and every process the worker starts, however it leaves the worker's session or process group (setsid), ends
    with it (the kernel kills a namespace's processes when its PID 1 ends), and with them the worker's mount
    namespace and tmpfs.  It keeps the budget: past it, the worker (PID 1) is killed by its pid.  Returns the exit
    status for the helper: the worker's, or _LATE."""
    from ..runner import sandbox

    note = None
    if os.geteuid() != 0:
        note = "descendants of the worker may outlive it (not root: no PID namespace)"
    else:
        err = sandbox._unshare(sandbox._CLONE_NEWPID)
        if err:
            note = f"descendants of the worker may outlive it (no PID namespace: {err})"
    child = _fork(lambda: _worker(sock, note))
    sock.close()
    # Past the budget the worker is killed by its pid: PID 1 of its namespace, the rest go with it.
    status = _wait(child, time.monotonic() + budget, lambda: os.kill(child, signal.SIGKILL))
    return _LATE if status is None else os.waitstatus_to_exitcode(status) & 0xFF


def _worker(sock, note=None):
    """In the worker: the request from the judge, lock down, compile, the answer to the judge.  ``note``: what
    its intermediate could not give it (a warning).  Returns the exit code."""
    request = _recv(sock)
    if not isinstance(request, dict) or not isinstance(request.get("out"), str) or \
            not os.path.isdir(request["out"]):
        _send(sock, {"error": "no request, or no folder for the worker"})
        return 0
    # refused: the protections it goes without (the judge is told); warnings: the lockdown's own.
    active, warnings, refused = [], [], [note] if note else []
    out = request["out"]
    t0 = time.monotonic()
    # Its folder a private tmpfs first (root is needed for the mount namespace), so that everything it opens
    # there, its log included, is in the tmpfs: a descriptor opened on the disk before the mount stayed there
    # (fallocate past RLIMIT_FSIZE reserved any amount of the disk through the log).
    _private_folder(out, request.get("uid"), refused)
    # What compiling prints (tl.static_print, Triton's warnings) goes to a file of the worker's own, never to the
    # judge's streams, which kgym captures as the judge's.
    log = os.open(os.path.join(out, "worker.log"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                  0o600)  # a new file, never through a link planted there (this is still the judge's uid)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    if not _lockdown(out, request.get("uid"), active, warnings):
        # This machine's or this uid's state, not a fact of the request: no .fail- marker for twins to inherit.
        _send(sock, {"error": "the worker could not be locked down: " + "; ".join(refused + warnings)[:600],
                     "transient": True})
        return 0
    # What the lockdown could not do, said before any of the skeleton runs (after it, this process is the
    # candidate's as much as ours: the judge believes no later warning).
    _send(sock, {"lockdown": refused[:2]})
    t1 = time.monotonic()
    try:
        key = compile_entry(request["skeleton"], request["qualname"], request["spec"], request["target"], out)
        answer = {"ok": True, "key": key, "files": _collect(out, key),
                  "ms": {"lockdown": (t1 - t0) * 1e3, "compile": (time.monotonic() - t1) * 1e3}}
    except _CompileError as exc:
        answer = {"compile_error": str(exc)[:2000]}
    except Exception as exc:  # noqa: BLE001
        import traceback

        where = traceback.extract_tb(exc.__traceback__)[-1:]
        at = f" (at {where[0].filename}:{where[0].lineno})" if where else ""
        answer = {"error": f"{type(exc).__name__}: {exc}"[:800] + at[-200:]}
    _send(sock, answer)
    return 0


def _lockdown(out, uid, active, warnings):
    """The worker's sandbox: the runner's uid (where the judge is root), Landlock (reads of the system and Python,
    writes beneath ``out`` alone, executes only the compiler toolchain), no core files, limits on CPU time, data
    and file size; HOME, TMPDIR and Triton's cache in ``out``.  Returns whether the worker may run the skeleton:
    only with Landlock in force, or as another uid than the judge's (fail closed: a worker left with the judge's
    uid and no Landlock could write the cache itself), and never as root where a uid was asked for."""
    import resource

    from ..runner import sandbox

    def end_with_parent():
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass

    # It ends with its intermediate, which ends with the helper, which ends with the judge (and the helper's
    # backstop kills the intermediate's process group past the budget).
    end_with_parent()
    judge_uid = os.geteuid()
    dropped = False
    if uid is not None and judge_uid == 0:
        dropped = sandbox.drop_privileges(int(uid), int(uid), warnings, sandbox.Granted()) and os.geteuid() != 0
        end_with_parent()  # a change of credentials clears it
    tmp = os.path.join(out, "tmp")
    os.makedirs(tmp, exist_ok=True)
    os.environ.update({"HOME": out, "TMPDIR": tmp, "TRITON_CACHE_DIR": os.path.join(out, "cache"),
                       "TRITON_HOME": out})
    tempfile.tempdir = tmp
    limits = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_CPU, int(BUDGET_S) + 5),
              (resource.RLIMIT_DATA, WORKER_DATA_BYTES), (resource.RLIMIT_FSIZE, MAX_BYTES)]
    if dropped:
        # Processes of the runner's uid, as the runner's own limit (sandbox.py, "processes"): no fork bomb of a
        # subverted worker takes the host's pids for its budget.
        limits.append((resource.RLIMIT_NPROC, WORKER_PROCESSES))
    for res, value in limits:
        try:
            soft, hard = resource.getrlimit(res)
            resource.setrlimit(res, (value, value if hard == resource.RLIM_INFINITY or hard > value else hard))
        except (ValueError, OSError) as exc:
            warnings.append(f"rlimit not set: {exc}")
    read = sandbox.python_paths() + ["/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/sys",
                                     "/dev/null", "/dev/zero", "/dev/urandom"] + sandbox._cuda_dirs()
    read = [p for p in dict.fromkeys(read) if os.path.exists(p)]
    abi = sandbox.landlock_runner(read, [out, "/dev/null"], sandbox.Granted(), warnings,
                                  execute=sandbox.runner_programs({"device": "cuda"}))
    if uid is not None and judge_uid == 0 and not dropped:
        # Root told to be the runner's uid and refused (its Python unreadable by that uid, say): Landlock alone
        # covers no chmod, chown, utime or kill, and a subverted worker as root could set-uid any root file.
        warnings.append("the worker is still root: it does not compile (the runner compiles its own kernels)")
        return False
    return bool(abi) or dropped


def _private_folder(out, uid, refused):
    """The worker's folder becomes a private tmpfs of WORK_BYTES and WORK_FILES (no programs run from it) in a mount
    namespace of the worker's own, owned by ``uid``: a subverted worker that writes without end meets ENOSPC, and
    the host's disk (the job store's, the cache's) is never filled, as the runner's own folder is held
    (sandbox.mount_workdir); it goes with the worker, so nothing is left to remove.  Its entry reaches the judge
    over its socket (_collect).  Returns whether it is in place; where a mount namespace is refused (kgym not
    root) the folder stays on the disk, bounded by RLIMIT_FSIZE a file, and ``refused`` says so."""
    from ..runner import sandbox

    if os.geteuid() != 0:
        refused.append("the worker's folder is on the host's disk (not root: no private tmpfs)")
        return False
    err = sandbox._unshare(sandbox._CLONE_NEWNS)
    if err:
        refused.append(f"the worker's folder is on the host's disk (no mount namespace: {err})")
        return False
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    try:
        sandbox._mount(None, "/", None, sandbox._MS_REC | sandbox._MS_PRIVATE)
        sandbox._mount("tmpfs", out, "tmpfs", sandbox._MS_NOSUID | sandbox._MS_NODEV | sandbox._MS_NOEXEC,
                       f"size={WORK_BYTES},nr_inodes={WORK_FILES},mode=0700{owner}")
    except OSError as exc:
        refused.append(f"the worker's folder is on the host's disk (no tmpfs: {exc})")
        return False
    return True


class _CompileError(Exception):
    pass


def compile_entry(skeleton, qualname, spec, target, out):
    """Triton's compile of the skeleton's kernel ``qualname`` for specialisation ``spec`` (Triton's
    serialize_specialization_data JSON) and ``target`` ([backend, arch, warp size]) into ``out``/cache.  Returns
    the entry's key (Triton's base32 directory name).  Raises _CompileError where Triton refuses the kernel."""
    import linecache
    import types

    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.cache import _base32
    from triton.runtime.jit import JITFunction

    from ..shared.source import lines as source_lines

    from triton import knobs

    os.environ["TRITON_CACHE_DIR"] = os.path.join(out, "cache")
    os.environ.pop("TRITON_INTERPRET", None)
    knobs.runtime.interpret = False  # compiled, for the GPU: never the interpreter's functions
    path = os.path.join(out, "kgym_kernels.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(skeleton)
    data = skeleton.encode("utf-8")
    linecache.cache[path] = (len(data), None, source_lines(data), path)
    module = types.ModuleType("kgym_candidate")
    module.__file__ = path
    module.__dict__["__kgym_jit__"] = triton.jit
    sys.modules["kgym_candidate"] = module
    exec(compile(data, path, "exec", dont_inherit=True), module.__dict__)
    fn = module
    for part in qualname.split("."):
        fn = vars(fn).get(part)
    if not isinstance(fn, JITFunction):
        raise ValueError(f"{qualname} is not a @triton.jit function of the skeleton")
    obj = json.loads(spec)
    constants = {}
    for k, v in zip(obj["constant_keys"], obj["constant_vals"]):
        if isinstance(v, dict) and set(v) == {"kgym_dtype"} and isinstance(v["kgym_dtype"], str) and \
                tl.dtype.is_dtype(v["kgym_dtype"]):
            v = tl.dtype(v["kgym_dtype"])  # a string stays a string: "fp16" is not float16 (tolerant_serializer)
        elif isinstance(v, dict) and set(v) == {"constexpr"}:
            v = tl.constexpr(v["constexpr"])
        elif isinstance(v, dict) and set(v) == {"kgym_jit"}:
            ref = module
            for part in str(v["kgym_jit"]).split("."):
                ref = vars(ref).get(part)
            if not isinstance(ref, JITFunction):
                raise ValueError("a constant names no kernel of the skeleton")
            v = ref
        constants[tuple(k)] = _tuples(v)  # JSON has no tuples: a tuple constant came as a list
    attrs = {tuple(k): v for k, v in zip(obj["attrs_keys"], obj["attrs_vals"])}
    signature = {k: _tuples(v) for k, v in obj["signature"].items()}
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in obj["options"].items()}
    src = ASTSource(fn, signature, constants, attrs)
    try:
        compiled = triton.compile(src, target=GPUTarget(*target), options=options)
    except Exception as exc:  # noqa: BLE001 — Triton's refusal of these bytes
        if type(exc).__name__ in ("CompilationError", "CompileTimeAssertionFailure", "OutOfResources"):
            raise _CompileError(f"{type(exc).__name__}: {exc}") from None
        raise
    return _base32(compiled.hash)


def _tuples(v):
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v
