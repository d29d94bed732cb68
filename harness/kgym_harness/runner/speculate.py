"""The runner compiles a kernel's odd-size specialisation ahead of its use (issue 36; an experiment, off unless
kgym's environment sets KGYM_SPECULATE=1).

Why.  Triton compiles a kernel once per specialisation: an integer argument divisible by 16 is a different program
from one that is not.  The tiny run and the variants at the task's sizes use sizes divisible by 16; ``size_odd``
(and ``small_odd``) use odd ones, so every candidate is compiled twice, and the second compile sits inside the
size_odd call: on an H200 the size_odd calls took 1.13 s an evaluation on the GRPO mix (up to 3.4 s for a level-2
matmul kernel), nearly all of it compiling, on the evaluation's own critical path (docs/PERFORMANCE.md, "What two
GPUs share").  Here, once a kernel is compiled for the first time, the same kernel with its integer arguments'
divisibility dropped (what an odd size gives) is compiled on a background thread, while the evaluation goes on
with its other variants; Triton keeps the result in this runner's cache directory, so the size_odd call's compile
finds it there (a load of milliseconds), or waits for the background compile to finish if it is still running.

What it changes.  Nothing but when the work is done: the speculative compile is Triton's own compile of a source
Triton itself would build for an odd-size call (the same function, signature, constants and options, the
integer arguments' "tt.divisibility" attribute gone), and a result is only ever used by a call whose source hashes
the same.  A speculation that never matches (an integer that stays a multiple of 16 whatever the sizes, a size that
turns 1) costs CPU and nothing else.  Errors of the background compile are dropped: the call compiles as before.
At most MAX_SPECULATIONS per runner.  The runner is the candidate's process: nothing here is trusted, and nothing
the judge decides depends on it.

How.  ``install()`` replaces ``triton.compiler.compile``, which each JIT function takes when it first runs on a device
(JITFunction.create_binder: ``from ..compiler import compile``), before the candidate is imported.  The compile-handback hooks
(runner.py) fire around JITFunction._do_compile, not around this function, so the background thread's compiles
say nothing to the judge, and a call that waits here for a background compile waits with its GPU phase handed
back.  The thread is started at the set-up (before the guards count the process's threads), and the runner
settles the speculations (drops the queued, waits for the running one) before any command of an exclusive window.

Before this is on by default (red team of this session, not fixed): the background thread runs Triton's compile,
which calls whatever ``triton.knobs.compilation.listener`` holds, and the Speculator (its pool) is reachable as
``triton.compiler.compile``.  A candidate that could set either would have code of its own run on a thread the
guards' thread count does not see (threat-model.md, "thread_spawned").  The candidate language gives a candidate
neither (``triton.knobs`` and ``triton.compiler`` are not among its names): check that it still holds, and attack
it on a GPU, before turning the experiment on.
"""

import concurrent.futures
import threading

MAX_SPECULATIONS = 4


def odd_attrs(signature, attrs):
    """``attrs`` (an ASTSource's: argument path -> list of attributes) as an odd-size call would give them: the
    divisibility attribute gone from every integer argument that has it.  None when no integer argument has one
    (nothing to speculate).  The order of the entries is kept: it is part of the source's hash."""
    types = list(signature.values())
    out, changed = {}, False
    for path, values in attrs.items():
        kind = types[path[0]] if isinstance(path, tuple) and len(path) == 1 and path[0] < len(types) else None
        if isinstance(kind, str) and kind[:1] in ("i", "u") and isinstance(values, list) and \
                any(v and v[0] == "tt.divisibility" for v in values):
            out[path] = [v for v in values if not (v and v[0] == "tt.divisibility")]
            changed = True
        else:
            out[path] = values
    return out if changed else None


class Speculator:
    """Stands in for Triton's compile (see the module's docstring)."""

    def __init__(self, compile_fn, source_cls, max_speculations=MAX_SPECULATIONS):
        self.compile = compile_fn
        self.source_cls = source_cls
        self.max = max_speculations
        self.pending = {}  # hash of a speculated source -> its Future
        self.started = 0
        self.lock = threading.Lock()
        self.local = threading.local()
        self.pool = None

    def __call__(self, src, *args, **kwargs):
        if getattr(self.local, "background", False):
            return self.compile(src, *args, **kwargs)
        fut = None
        try:
            with self.lock:
                fut = self.pending.get(src.hash()) if self.pending else None
        except Exception:  # noqa: BLE001 — a source we cannot hash: compiled as Triton would
            fut = None
        if fut is not None:
            try:
                fut.result()  # its binary is in the cache now: the compile below loads it
            except BaseException:  # noqa: BLE001 — a failed speculation: compiled here as before
                pass
        kernel = self.compile(src, *args, **kwargs)
        try:
            self.speculate(src, args, kwargs)
        except Exception:  # noqa: BLE001 — never the call's failure
            pass
        return kernel

    def speculate(self, src, args, kwargs):
        # Only Triton's own source: a subclass (Gluon's GluonASTSource: another language, another first stage) made
        # again as the base class would be compiled as Triton, which fails (an MLIR error on the runner's stderr)
        # or, were it to succeed, would file another program under the cache key of the odd call's (the key does
        # not hold the language).
        if type(src) is not self.source_cls:
            return
        attrs = odd_attrs(src.signature, src.attrs)
        if attrs is None:
            return
        odd = self.source_cls(src.fn, src.signature, src.constants, attrs)
        key = odd.hash()
        with self.lock:
            if key in self.pending or self.started >= self.max:
                return
            self.started += 1
            self._start_locked()
            self.pending[key] = self.pool.submit(self.compile, odd, *args, **kwargs)

    def settle(self):
        """No speculation runs from now on: those still queued are dropped, the one compiling is waited for, and
        none starts later.  The runner calls it before an exclusive window's command (timing, the clock block,
        the profile): a speculation that no call used (an integer that stayed a multiple of 16, an autotuner's
        other configurations) would otherwise compile through the measured calls, taking the GIL (the code
        generator, MLIR passes: main-thread stalls up to ~13 ms measured on this machine for a matmul) and a core
        from them.  Its wait is inside the window, once, and only when a speculation is still running; later calls
        (every exclusive command) find nothing left to wait for."""
        with self.lock:
            self.max = 0
            futures = list(self.pending.values())
            self.pending.clear()  # each done or dropped once waited for: a call compiles (or loads) as Triton would
        for fut in futures:
            fut.cancel()  # not started yet: never will
        for fut in futures:
            try:
                fut.result()
            except BaseException:  # noqa: BLE001 — cancelled, or failed: nothing to wait for
                pass

    def start(self):
        """Starts the background thread now.  install() does, at the runner's set-up (inside the sandbox, which the
        thread inherits), before the guards count the process's threads at the load: a thread first started inside
        the candidate's call (its first compile) is counted as the candidate's own (guards: thread_spawned, a hack
        in the default policy)."""
        with self.lock:
            self._start_locked()

    def _start_locked(self):
        if self.pool is None:
            self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgym-speculate")
            self.pool.submit(self._mark_background).result()  # the pool's one worker is running from now on

    def _mark_background(self):
        self.local.background = True



def install():
    """Puts a Speculator in place of triton.compiler.compile.  Returns it, or None (another Triton)."""
    try:
        import triton.compiler as tc
    except Exception:  # noqa: BLE001
        return None
    compile_fn, source_cls = getattr(tc, "compile", None), getattr(tc, "ASTSource", None)
    if compile_fn is None or source_cls is None or isinstance(compile_fn, Speculator):
        return None
    spec = Speculator(compile_fn, source_cls)
    spec.start()
    tc.compile = spec
    return spec
