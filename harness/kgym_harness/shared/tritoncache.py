"""A machine-wide cache of Triton's C modules: written only by kgym's trusted processes, only read by runners.

Why: every runner starts with an empty Triton cache (TRITON_HOME is its own workdir, so nothing a candidate writes
reaches another evaluation), and so every evaluation on a GPU ran gcc on Triton's own generated C: once for the
driver's utilities module (``cuda_utils``, 300-400 ms on an H100 host) and once per kernel signature for the
launcher stub (``__triton_launcher``, 200-290 ms each), where compiling the kernel itself takes ~50 ms.  Those
modules depend on nothing a candidate chooses but the types of its kernels' arguments.

Who owns what:
  - the directory, ``modules_dir()``: ``/var/cache/kgym/triton-modules`` when kgym runs as root (root's home is
    0700 and runners run as other uids), else ``$XDG_CACHE_HOME`` or ``~/.cache``, then ``kgym/triton-modules``.
    Mode 0755; used only when no other user can write it or any directory above it (``safe_dir``, the same
    check that guards the judge's compiled comparison, compare.enable_fused);
  - written by the zygote (``warm_utilities``: ``cuda_utils``, from the ``driver.c`` Triton ships) and by the judge
    (``learn``: a launcher for each signature its runner reported, after the evaluation's stages);
  - read by runners (``install_reader``: Triton's cache manager looks there first for C modules); a runner can
    neither write there (another uid, and Landlock grants it reads only: sandbox.runner_paths) nor have anything
    it sends compiled as given.

Entries are content-addressed exactly as Triton addresses them itself: ``<dir>/<Triton's key>/<name><EXT_SUFFIX>``,
the key being the hash of the C source (``runtime/build.py`` compile_module_from_src).  The source is always made by
the trusted process with Triton's own generator: ``driver.c`` as installed, or ``make_launcher`` over a signature
the judge checked word by word against a fixed vocabulary of Triton type names (``validate_signature``).  So no
source or binary of a runner's ever enters the directory, and a runner's answer can at most name which of the
finitely many honest launchers get compiled.  A trusted process never loads a module it finds there: it loads
only what it has just built (the writer's lookups always miss).

Every function here returns facts, prints failures for stderr at most, and never raises for a refusal: without
the cache the runner compiles into its own workdir as before.
"""

import contextlib
import hashlib
import json
import os
import stat
import sys
import sysconfig
import tempfile
import time

# Triton names a C module <name><EXT_SUFFIX> (runtime/build.py); nothing else it caches ends so.
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
UTILITIES = "cuda_utils"
LAUNCHER = "__triton_launcher"

# A runner records at most this many signatures, and the judge reads at most this many of its answer.
MAX_RECORDED = 32
# validate_signature: tuples nested at most this deep, at most this many items (type names and tuples) in all.
MAX_DEPTH = 4
MAX_ITEMS = 256
# Entries (one per distinct source) the directory may hold before learn stops adding: a launcher is ~20 KB, and a
# stream of candidates with ever new argument types must not fill the disk.
MAX_ENTRIES = 4096

# The directory modules_dir() found safe in this process, or in the zygote this process was forked from (a runner
# asks before it drops its uid and its environment; the sandbox reads it afterwards: known_dir).  Checked again on
# every use: a runner left as root by a refused uid drop is held by Landlock, which does not cover chmod.
_resolved = None


def safe_dir(path, mode=0o700):
    """``path`` made where missing (each directory made here gets ``mode`` exactly, whatever the umask), then
    accepted only if this uid or root owns it and every directory above it, and no other user can write it or
    any of them (a sticky directory above it, like /tmp, aside: others cannot remove or rename what is ours
    there).  Returns (its real path, None) or (None, why).  Why: a directory another user can write, or swap
    through a parent, is one where code we later load or serve could be replaced."""
    try:
        _makedirs(path, mode)
        real = os.path.realpath(path)
        me = os.getuid()
        p = real
        while True:
            st = os.lstat(p)
            if not stat.S_ISDIR(st.st_mode):
                return None, f"{p} is not a directory"
            if st.st_uid not in (0, me):
                return None, f"{p} belongs to uid {st.st_uid}"
            open_to_others = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            if open_to_others and (p == real or not st.st_mode & stat.S_ISVTX):
                return None, f"{p} is writable by other users"
            parent = os.path.dirname(p)
            if parent == p:
                break
            p = parent
    except OSError as exc:
        return None, f"{path}: {exc.strerror or exc}"
    return real, None


def _makedirs(path, mode):
    """The missing directories of ``path``, each chmod-ed to ``mode`` (os.makedirs applies the umask, and its
    mode only to the last one).  An existing entry is left as it is: safe_dir judges it."""
    path = os.path.abspath(path)
    missing = []
    p = path
    while not os.path.lexists(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, mode)
        except FileExistsError:
            continue  # made by another process meanwhile: judged like any existing one
        os.chmod(d, mode)


def _location():
    """Where the cache lives for this process's uid (module docstring)."""
    if os.geteuid() == 0:
        return "/var/cache/kgym/triton-modules"
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kgym", "triton-modules")


def modules_dir():
    """(path, None), or (None, why) when the directory cannot be made or is not safe (safe_dir, asked on every
    call).  Made 0755: the runners, other uids, read it.  Where it is, once found, is kept for this process and
    the processes it forks (known_dir)."""
    global _resolved
    path, why = safe_dir(_resolved or _location(), 0o755)
    if path is not None:
        _resolved = path
    return path, why


def known_dir():
    """The directory modules_dir() accepted in this process or before its fork, else None; never looks anew (a
    runner past its uid drop and clean environment would look in its own workdir)."""
    return _resolved


def servable(path, owners):
    """Whether the module file ``path`` and its key directory are as the trusted writer left them: a regular file
    and a directory (no symbolic links), owned by one of ``owners``, writable by nobody else.  A runner that
    stayed root (its uid drop refused) could chmod or chown one (Landlock does not cover either); then it is
    neither served nor counted as learned, and the judge builds it again."""
    try:
        d = os.lstat(os.path.dirname(path))
        f = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISDIR(d.st_mode) and stat.S_ISREG(f.st_mode) and d.st_uid in owners and f.st_uid in owners
            and not (d.st_mode | f.st_mode) & (stat.S_IWGRP | stat.S_IWOTH))


def entry_path(root, src, name):
    """Where Triton's compile_module_from_src(src, name) finds its module when its cache directory is ``root``:
    the key is the SHA-256 of the source and the platform, in Triton's base32 spelling."""
    from triton.runtime.build import platform_key

    key = hashlib.sha256((src + platform_key()).encode("utf-8")).hexdigest()
    return os.path.join(root, _base32(key), name + SUFFIX)


def _base32(key):
    try:
        from triton.runtime.cache import _base32 as tritons

        return tritons(key)
    except ImportError:  # another Triton: its spelling of 3.6 (a mismatch only costs cache misses)
        import base64

        return base64.b32encode(bytes.fromhex(key)).decode("utf-8").rstrip("=")


# -- the two cache managers --------------------------------------------------------------------------------------

_classes = {}


def _writer_class():
    """The trusted processes' cache manager while they build into the directory (knobs.cache.dir pointed at it):
    a C module is never found (so compile_module_from_src builds it, and loads what it built, never a file it
    found), and it is written 0644 in a 0755 key directory whatever the umask, under a temporary name first (a
    reader never sees half a file)."""
    if "writer" not in _classes:
        from triton.runtime.cache import FileCacheManager

        class TrustedWriter(FileCacheManager):
            def __init__(self, key, override=False, dump=False):
                super().__init__(key, override=override, dump=dump)
                if not (override or dump):
                    # Ours and 0755 whatever the umask, and whatever a runner left as root did to it (servable).
                    st = os.lstat(self.cache_dir)
                    if not stat.S_ISDIR(st.st_mode):
                        raise OSError(f"{self.cache_dir} is not a directory")
                    if os.geteuid() == 0 and st.st_uid != 0:
                        os.lchown(self.cache_dir, 0, 0)
                    os.chmod(self.cache_dir, 0o755)

            def get_file(self, filename):
                if filename.endswith(SUFFIX):
                    return None
                return super().get_file(filename)

            def put(self, data, filename, binary=True):
                if not isinstance(data, bytes):
                    data = str(data).encode("utf-8")
                fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.cache_dir)
                try:
                    with os.fdopen(fd, "wb") as f:
                        f.write(data)
                        os.fchmod(f.fileno(), 0o644)
                    final = self._make_path(filename)
                    os.replace(tmp, final)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                    raise
                return final

        _classes["writer"] = TrustedWriter
    return _classes["writer"]


def reader_class(trusted):
    """The runner's cache manager: Triton's FileCacheManager (the runner's own workdir cache) in everything, except
    that a C module (a name ending in EXT_SUFFIX) is served from ``trusted`` when that directory holds it under
    the same key, servable (owned by root or by the directory's owner, writable by no one else)."""
    from triton.runtime.cache import FileCacheManager

    owners = {0, os.stat(trusted).st_uid} if trusted else set()

    class TrustedModulesReader(FileCacheManager):
        # The namespace directory of the trusted compile cache the judge named (serve_kernels), or None.
        kernels = None

        def __init__(self, key, override=False, dump=False):
            super().__init__(key, override=override, dump=dump)
            # Dump and override directories are the user's own business: looked up as Triton would.
            self._plain = not (override or dump)

        def get_group(self, filename):
            """A compiled kernel's files: from the judge's namespace (kernel_group), never from this runner's own
            cache, where its candidate could have planted files under a kernel's key (install_reader turns
            Triton's always_compile off only with this class in place)."""
            if not self._plain:
                return super().get_group(filename)
            return kernel_group(type(self).kernels, self.key, filename, owners, copy_to=self.cache_dir)

        def get_file(self, filename):
            if (trusted and self._plain and filename.endswith(SUFFIX) and "/" not in filename
                    and "/" not in self.key and not self.key.startswith(".")):
                path = os.path.join(trusted, self.key, filename)
                if servable(path, owners):
                    return path
            return super().get_file(filename)

    TrustedModulesReader.trusted = trusted
    return TrustedModulesReader


@contextlib.contextmanager
def _writing_into(path):
    """Triton's cache pointed at ``path`` through the trusted writer for the duration; every cache knob (and the
    TRITON_CACHE_DIR it sets in the environment) restored afterwards."""
    from triton import knobs

    with knobs.cache.scope():
        knobs.cache.dir = path
        knobs.cache.manager_class = _writer_class()
        yield


# -- the zygote ---------------------------------------------------------------------------------------------------

def warm_utilities():
    """In the zygote (CUDA only): Triton's CUDA utilities module compiled into the directory, once per machine and
    Triton, so no runner compiles it.  Creates no CUDA context (no torch.cuda, no driver.active: the zygote forks
    afterwards); it does load the module it built (CudaUtils keeps it), which children inherit.  Returns facts;
    a failure is printed to stderr and otherwise ignored (each runner then compiles it, as before)."""
    try:
        facts = _warm_utilities()
    except Exception as exc:  # noqa: BLE001 — a warm-up: never the zygote's end
        facts = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    if facts.get("error") or facts.get("unavailable"):
        print(f"kgym zygote: Triton's CUDA utilities not cached for runners: "
              f"{facts.get('error') or facts.get('unavailable')}", file=sys.stderr)
    return facts


def _warm_utilities():
    path, why = modules_dir()
    if path is None:
        return {"unavailable": why}
    from pathlib import Path

    from triton.backends.nvidia import driver

    src = Path(os.path.join(driver.dirname, "driver.c")).read_text()  # what CudaUtils compiles
    target = entry_path(path, src, UTILITIES)
    if servable(target, {0, os.getuid()}):
        return {"cached": target}
    with _writing_into(path):
        driver.CudaUtils()
    if not servable(target, {0, os.getuid()}):
        return {"error": f"compiled, but not found at {target} (has Triton changed its cache key?)"}
    return {"compiled": target}


# -- the runner ---------------------------------------------------------------------------------------------------

def kernel_group(kdir, key, filename, owners, copy_to=None):
    """Triton's group of a compiled kernel (``{file name: path}``) from the namespace directory ``kdir`` of the
    trusted compile cache, or None: ``kdir/key/__grp__<filename>`` servable, naming only files of that
    directory, each servable.  The paths are made here from the names (the group file's own are not followed).
    ``copy_to``: the files are copied there now (the runner's own cache folder for the key) and those paths
    returned, so that a judge evicting the entry a moment later cannot fail the load (None: a file gone by then,
    and Triton compiles)."""
    if not kdir or "/" in key or key.startswith(".") or "/" in filename or filename.startswith("."):
        return None
    d = os.path.join(kdir, key)
    grp = os.path.join(d, "__grp__" + filename)
    if not servable(grp, owners):
        return None
    try:
        with open(grp, encoding="utf-8") as f:
            children = json.loads(f.read(1 << 20)).get("child_paths")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(children, dict) or filename not in children:
        return None
    out = {}
    for name in children:
        if not isinstance(name, str) or "/" in name or name.startswith(".") or name.startswith("__grp__"):
            return None
        path = os.path.join(d, name)
        if not servable(path, owners):
            return None
        out[name] = path
    if copy_to:
        copies = {}
        try:
            for name, path in out.items():
                with open(path, "rb") as f:
                    data = f.read()
                copy = os.path.join(copy_to, name)
                with open(copy, "wb") as f:
                    f.write(data)
                copies[name] = copy
        except OSError:
            return None
        return copies
    return out


def serve_kernels(kdir):
    """In the runner: kernels are looked up in ``kdir`` (the judge's answer to a compile request) from now on;
    None: in no directory (every kernel compiled here).  Only where install_reader put the reader in place."""
    from triton import knobs

    cls = knobs.cache.manager_class
    if isinstance(cls, type) and getattr(cls, "trusted", None) is not None and hasattr(cls, "kernels"):
        cls.kernels = kdir if isinstance(kdir, str) and os.path.isabs(kdir) else None


def install_reader(recorded):
    """In the runner (CUDA only), after its sandbox and TRITON_HOME, before the candidate is imported: Triton's
    cache manager becomes reader_class(the directory), and every signature Triton makes a launcher for is
    appended to ``recorded`` (as JSON lists, each once, at most MAX_RECORDED) for the judge's ``launchers``
    command.  Returns facts."""
    from triton import knobs
    from triton.backends.nvidia import driver

    facts = {"reads": None}
    if known_dir() is not None:
        # Only where it was found before the sandbox (else "home" is the workdir), and only still safe.
        trusted, why = modules_dir()
        if trusted is not None:
            knobs.cache.manager_class = reader_class(trusted)
            # A compiled kernel is looked up again (the trusted compile cache), but only where the reader
            # serves it: this runner's own cache is never read (TrustedModulesReader.get_group).
            knobs.compilation.always_compile = False
        facts = {"reads": trusted, "why": why} if why else {"reads": trusted}
    make = driver.make_launcher

    def recording_make_launcher(constants, signature, tensordesc_meta, *args, **kwargs):
        try:
            _record(recorded, signature)
        except Exception:  # noqa: BLE001 — a record is a hint for the judge; the launch goes on regardless
            pass
        return make(constants, signature, tensordesc_meta, *args, **kwargs)

    driver.make_launcher = recording_make_launcher  # CudaLauncher looks the name up in the module on each call
    return facts


def _record(recorded, signature):
    if len(recorded) >= MAX_RECORDED:
        return
    values = list(signature.values()) if isinstance(signature, dict) else list(signature)
    plain = _as_lists(values)
    if plain not in recorded:
        recorded.append(plain)


def _as_lists(x):
    if isinstance(x, (list, tuple)):
        return [_as_lists(v) for v in x]
    return x if isinstance(x, str) else str(x)


# -- the judge ----------------------------------------------------------------------------------------------------

# Scalar type names a launcher takes (the keys of driver.ty_to_cpp less its pointer, tensordesc and nvTmaDesc
# cases): the ones the installed ty_to_cpp maps count.
_SCALARS = ("i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "f32", "fp64")
_vocabulary = None


def vocabulary():
    """Every type name a signature may hold: "constexpr", "nvTmaDesc", the scalars ty_to_cpp maps, and a pointer
    ("*", or "*k" for a const one) to each canonical Triton type (triton._utils.type_canonicalisation_dict's
    values).  No tensor descriptor: its launcher depends on compile metadata a signature does not carry."""
    global _vocabulary
    if _vocabulary is None:
        from triton._utils import type_canonicalisation_dict

        canonical = set(type_canonicalisation_dict.values())
        try:
            from triton.backends.nvidia.driver import ty_to_cpp
        except Exception:  # noqa: BLE001 — no NVIDIA backend: the plain list (learn refuses to build anyway)
            ty_to_cpp = None
        scalars = set()
        for name in _SCALARS:
            try:
                if ty_to_cpp is None or ty_to_cpp(name):
                    scalars.add(name)
            except (KeyError, IndexError, TypeError):
                pass
        _vocabulary = frozenset({"constexpr", "nvTmaDesc", *scalars, *("*" + c for c in canonical),
                                 *("*k" + c for c in canonical)})
    return _vocabulary


def validate_signature(value):
    """A launcher signature as it came over JSON, checked strictly: a list of items, an item a type name of
    vocabulary() or a list of items (a Triton tuple; JSON has no tuples), nested at most MAX_DEPTH deep, at most
    MAX_ITEMS items in all.  Returns it with every list made a tuple (Triton's own form, from which make_launcher
    generates the same source as in the runner), or raises ValueError saying what is wrong."""
    words = vocabulary()
    count = 0

    def walk(node, depth):
        nonlocal count
        count += 1
        if count > MAX_ITEMS:
            raise ValueError(f"more than {MAX_ITEMS} items")
        if type(node) is str:
            if node not in words:
                raise ValueError(f"not a Triton type name: {node[:40]!r}{'...' if len(node) > 40 else ''}")
            return node
        if type(node) in (list, tuple):
            if depth > MAX_DEPTH:
                raise ValueError(f"tuples nested deeper than {MAX_DEPTH}")
            if len(node) > MAX_ITEMS:
                raise ValueError(f"more than {MAX_ITEMS} items")
            return tuple(walk(x, depth + 1) for x in node)
        raise ValueError(f"an item of type {type(node).__name__}")

    if type(value) not in (list, tuple):
        raise ValueError(f"a signature is a list, not {type(value).__name__}")
    if len(value) > MAX_ITEMS:
        raise ValueError(f"more than {MAX_ITEMS} items")
    return tuple(walk(x, 1) for x in value)


def learn(signatures, limit=4, budget_s=5.0):
    """In the judge, after the evaluation's stages, outside any GPU phase (CUDA only): for each signature its
    runner reported (``signatures``, the runner's word) that validates and whose launcher is not in the
    directory yet, the launcher source made here with Triton's own make_launcher and compiled with Triton's own
    compile_module_from_src into the directory.  At most ``limit`` compiles, none started after ``budget_s``
    seconds; nothing once the directory holds MAX_ENTRIES entries.  Returns facts: learned, already_cached,
    deferred (over the limit), refused and failed (reasons), unavailable (why nothing could be built)."""
    facts = {"learned": 0, "already_cached": 0, "deferred": 0, "refused": [], "failed": []}
    try:
        _learn(signatures, limit, budget_s, facts)
    except Exception as exc:  # noqa: BLE001 — never a verdict's business
        facts["failed"].append(f"{type(exc).__name__}: {exc}"[:300])
    return facts


def _learn(signatures, limit, budget_s, facts):
    t0 = time.monotonic()
    if type(signatures) is not list:
        facts["refused"].append(f"signatures: a list expected, not {type(signatures).__name__}")
        return
    if len(signatures) > MAX_RECORDED:
        facts["refused"].append(f"{len(signatures) - MAX_RECORDED} signatures past the first {MAX_RECORDED}")
        signatures = signatures[:MAX_RECORDED]
    checked = []
    for raw in signatures:
        try:
            sig = validate_signature(raw)
        except ValueError as exc:
            if len(facts["refused"]) < 8:
                facts["refused"].append(str(exc)[:200])
            continue
        if sig not in checked:
            checked.append(sig)
    if not checked:
        return
    path, why = modules_dir()
    if path is None:
        facts["unavailable"] = why
        return
    try:
        from triton.backends.nvidia import driver

        # The launcher links libcuda: where it is not found (no NVIDIA driver here) nothing can be built.
        library_dirs = driver.library_dirs()
    except Exception as exc:  # noqa: BLE001 — ImportError, libcuda_dirs' AssertionError ...
        facts["unavailable"] = f"Triton's NVIDIA backend is not usable here: {type(exc).__name__}: {exc}"[:300]
        return
    compiles = 0
    owners = {0, os.getuid()}
    for sig in checked:
        src = driver.make_launcher({}, {i: s for i, s in enumerate(sig)}, None)
        target = entry_path(path, src, LAUNCHER)
        if servable(target, owners):
            facts["already_cached"] += 1
            continue
        if compiles >= limit or time.monotonic() - t0 > budget_s or _entries(path) >= MAX_ENTRIES:
            facts["deferred"] += 1
            continue
        compiles += 1
        try:
            with _writing_into(path):
                driver.compile_module_from_src(src=src, name=LAUNCHER, library_dirs=library_dirs,
                                               include_dirs=driver.include_dirs, libraries=driver.libraries)
        except Exception as exc:  # noqa: BLE001 — a compiler missing or failing: the runner compiles as before
            facts["failed"].append(f"{type(exc).__name__}: {exc}"[:200])
            continue
        if servable(target, owners):
            facts["learned"] += 1
        else:
            facts["failed"].append(f"compiled, but not found at {target} (has Triton changed its cache key?)")


def _entries(path):
    try:
        with os.scandir(path) as it:
            return sum(1 for _ in it)
    except OSError:
        return MAX_ENTRIES  # unreadable: add nothing


# A specialisation the runner sends with a compile request: at most this long (judge/kernelcache.py MAX_SPEC).
MAX_KERNEL_SPEC = 64 << 10


# -- the runner: its compile requests (judge/kernelcache.py) ---------------------------------------------------

def runner_spec(compile_kwargs):
    """In the runner's jit_cache_hook: the specialisation to send, or None.  Triton serialised it already
    (serialize_specialization_data); runner.py makes that tolerant of a kernel given as a constant
    (``tolerant_serializer``)."""
    spec = (compile_kwargs or {}).get("specialization_data")
    return spec if isinstance(spec, str) and len(spec) <= MAX_KERNEL_SPEC else None


def tolerant_serializer(original):
    """Triton's serialize_specialization_data, except that a dtype constant is written as {"kgym_dtype": its name}
    (Triton's own form, the bare name, is also a string constant's) and a kernel given as a constant argument as
    {"kgym_jit": its qualname} instead of making json.dumps raise (which failed the launch itself wherever a
    jit_cache_hook is installed, as the runner's always is), and anything else JSON cannot hold gives None (no
    request: the runner compiles)."""

    def serialize(name, signature, constants, attrs, options, key):
        import triton.language as tl
        from triton.runtime.jit import JITFunction

        # A dtype is tagged: Triton writes it as its name, which a string constant ("fp16") can also be.
        fixed = {k: ({"kgym_jit": v.__qualname__} if isinstance(v, JITFunction) else
                     {"kgym_dtype": str(v)} if isinstance(v, tl.dtype) else v) for k, v in constants.items()}
        try:
            return original(name, signature, fixed, attrs, options, key)
        except (TypeError, ValueError):
            return None

    serialize.kgym = True
    return serialize
