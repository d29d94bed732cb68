"""The runner: the only process in which the candidate's code runs.  Untrusted by design.

The judge (child.py) forks nothing; kgym's zygote forks this process next to it, in namespaces of its own
(sandbox.py), and the two talk over one Unix socket (transport.py).  The runner is handed tensors and
commands — import the candidate, construct ``ModelNew``, call it, time it — and hands back outputs and facts.
It never sees the task module, the reference, reference outputs, tolerances, variant names (an opaque label),
kgym's protocol socket or its nonce.  Whatever it reports about itself (its own call times, runtime-guard
findings, a profile) is evidence the judge and kgym cross-check; correctness is decided on the outputs alone,
in the judge, against a reference the runner cannot reach.

Commands (judge → runner), one JSON line each, answered with one line (``ok`` or ``error``):
  setup {workdir, device, threads, sandbox, uid, gid, keep, policy}   first, before anything else
  load {source, name}                          write the source under its file name, import it, find ModelNew
  construct {id, seed, dtype, values: init}    ModelNew(*init) seeded like the reference
  call {model, stage, variant, poison, values: args}   one forward under the runtime guards
  check {stage}                                the guards' process checks (threads, global state, tampering)
  drop {model}
  timing_inputs {flush, variant, output_dtypes, values: args in place}   the judge's call block: the timed calls' arguments,
                                               which the judge fills before every call (none: they come with it)
  timed {model, flush, values?}                one timed call (events) on the call block (or the values sent),
                                               output kept for ``fetch`` and described in the answer
  fetch                                        the last timed/clock-block output
  sample {seed, samples}                       that output's values at the positions the judge's seed gives
                                               (timing.sample_positions), and its non-finite counts
  clock_prepare {model, values?}               the arguments of the next clock_block (the call block, or these)
  clock_block {model, calls}                   calls back to back on them, each timed
  clock_describe {model}                       the block's last output described (guards.check_timed), after
                                               kgym's clock stopped
  profile {model, calls, values?}              per-kernel device times (torch.profiler) on the call block
  share_probe                                  known numbers into the judge's device spare (GPU only)
  launchers                                    the signatures Triton made launchers for (tritoncache.py)
  exit

Inside a command, while Triton compiles one of the candidate's kernels, the runner says so (runner → judge,
the command's seq): ``compiling {phase: begin}`` once its queued GPU work is finished, ``compiling {phase:
end}`` after (also when the compile raises), and then it waits for the judge's ``resume`` before it goes on: the
judge hands its shared GPU phase back for the compile (child.py Evaluation.compile_handback says why).
"""

import contextlib
import os
import sys
import time
import types

from ..shared import kinds
from ..shared.source import lines as source_lines
from ..shared import transport as tp

# How many inherited descriptors run() closed before the set-up (None: not started through run()).
_inherited = None


class Runner:
    def __init__(self, sock, device):
        self.sock = sock
        self.device = device
        self.reader = tp.Reader(sock, device, accept_blocks=True)
        self.models = {}
        self.cmd = None  # the command being answered (reply: whether its answer trims the allocator's cache)
        self.call_args = None  # the judge's call block (timing_inputs): the timed calls' arguments, in place
        self.timed_variant = None  # the opaque label timed calls' findings carry
        self.prepared = None  # clock_prepare's inputs for the next clock_block
        self.block_args = None  # the last clock_block's inputs, for clock_describe
        self.block_profile = None  # profile.Recording of the clock block's calls (clock_prepare asked for one)
        self.block_calls = 0
        self.flusher = None
        self.l2 = None  # timing.PersistingL2, from timing_inputs on
        self.last = None
        self.guards = None
        self.sent = 0
        self.cls = None
        self.module = None  # the candidate's module (load)
        self.seq = None
        self.compiling = False  # a compile announced ("begin") whose "end" is not said yet
        self.signatures = []  # signatures Triton made launchers for (tritoncache.install_reader; GPU only)

    def reply(self, obj, values=None):
        # No device work of this process may outlive the command that queued it: the judge hands its GPU phase
        # back once it has the answer, and work still queued then (ModelNew.__init__ can queue seconds of it)
        # would run inside another evaluation's exclusive timing window (red team 6).  So every answer waits
        # for the device first, whatever the command and whatever the candidate did; an error that surfaces
        # there (an illegal address in that queued work) is the answer instead.
        try:
            _drain_device(self.device)
        except BaseException as exc:  # noqa: BLE001 — the candidate's asynchronous work failed: data
            from ..shared.report import describe_exception

            obj, values = {"type": kinds.REPLY_ERROR, "error": describe_exception(exc)}, None
        if self.cmd not in _NO_TRIM_COMMANDS:
            # Inside the phase the judge holds for this command (it hands it back once it has the answer): giving
            # cached memory back unmaps it, which the driver does under locks the timed process's own calls wait
            # for, and the candidate decides how much there is (what its forward allocated and let go; red team
            # 39b's trim_init_many.py).  After the answer, outside any phase, it could land in another
            # evaluation's exclusive timing window, as a teardown of 8 GiB outside the phases did (thirty-ninth
            # session: a neighbour's speedup moved 3.6%).  Before the answer also because the judge copies a call's
            # output out of its spare as soon as the answer arrives, and the two must not peak together.
            self.trim_cache()
        obj = dict(obj, seq=self.seq)
        if self.guards is not None:
            new = self.guards.findings[self.sent:]
            self.sent = len(self.guards.findings)
            if new:
                obj = dict(obj, findings=[_plain(f) for f in new])
        peak = self._device_peak()
        if peak:
            obj = dict(obj, device_peak=peak)
        spare = self.reader.take_spare()
        try:
            tp.send(self.sock, obj, values, into=spare)
        finally:
            self.reader.done_with(spare)  # the judge's kept spare stays mapped for the next answer

    def _device_peak(self):
        """The most device memory this process held since the last answer (0 off CUDA or before its first
        use): its allocator's peak.  The call block it maps is the judge's memory, counted there.  The judge adds
        it to the evaluation's measured peak (gpu_phases.peak_bytes)."""
        if not self.device.startswith("cuda"):
            return 0
        return tp.cudashare.allocator_peak()

    # -- Triton compiles -------------------------------------------------------------------------------
    def _install_compile_handback(self):
        """Triton's hooks around a compile (called only on a cache miss) tell the judge (module docstring).
        Installed before the candidate is imported; a candidate that replaces them only keeps its phase
        through its own compiles."""
        try:
            from triton import knobs
        except Exception:  # noqa: BLE001 — an older Triton: the phase simply stays held while compiling
            return

        from ..shared import tritoncache

        try:
            from triton.runtime import jit

            if not getattr(jit.serialize_specialization_data, "kgym", False):
                jit.serialize_specialization_data = tritoncache.tolerant_serializer(jit.serialize_specialization_data)
        except Exception:  # noqa: BLE001 — another Triton: its own serialiser, no requests where it fails
            pass

        def before_compile(**kwargs):
            if self.seq is None:
                return None
            if self.compiling:  # a compile that raised, caught by the candidate: its end is said first
                after_compile()
            import torch

            torch.cuda.synchronize()  # nothing of ours may run on the GPU once the phase is handed back
            msg = {"type": kinds.REPLY_COMPILING, "phase": "begin", "seq": self.seq}
            # The trusted compile cache (judge/kernelcache.py): the specialisation goes with the message, and
            # the judge answers once its entry is in the namespace it names (or that it has none).
            spec = tritoncache.runner_spec(kwargs.get("compile"))
            name = getattr(kwargs.get("fn"), "name", None)
            if spec is not None and isinstance(name, str):
                msg.update(kernel=name, spec=spec)
            tp.send(self.sock, msg)
            self.compiling = True
            if "spec" in msg:
                reply, _ = self.reader.recv()
                if reply.get("cmd") != kinds.CMD_COMPILED or reply.get("seq") != self.seq:
                    raise tp.ProtocolError(f"expected the judge's compile answer, got {str(reply)[:200]}")
                tritoncache.serve_kernels(reply.get("dir"))
            return None  # None: Triton compiles, or finds what the judge's compile filed

        def after_compile(**_kwargs):
            if not self.compiling:
                return None
            self.compiling = False
            tp.send(self.sock, {"type": kinds.REPLY_COMPILING, "phase": "end", "seq": self.seq})
            msg, _ = self.reader.recv()
            if msg.get("cmd") != kinds.CMD_RESUME or msg.get("seq") != self.seq:
                raise tp.ProtocolError(f"expected the judge's resume, got {str(msg)[:200]}")
            return None

        knobs.runtime.jit_cache_hook = before_compile
        knobs.runtime.jit_post_compile_hook = after_compile
        # A compile that raises never reaches the post-compile hook, and Triton's autotuner catches such an error
        # (a config's tl.static_assert, ptxas) and benchmarks the next config, already compiled: seconds of its
        # do_bench on the GPU with the judge still waiting for "end", no GPU phase held, inside another evaluation's
        # exclusive timing window (the thirty-ninth session's red team, tests/fixtures/gpu_overlap/
        # autotune_escape.py).  The end is said as the error leaves the compile, before anything else can run.
        try:
            from triton.runtime import jit

            inner = jit.JITFunction._do_compile
            if not getattr(inner, "kgym_compile_end", False):
                def _do_compile(fn, *args, **kwargs):
                    try:
                        return inner(fn, *args, **kwargs)
                    except BaseException:
                        after_compile()  # a no-op unless a compile's "begin" went out
                        raise

                _do_compile.kgym_compile_end = True
                jit.JITFunction._do_compile = _do_compile
        except Exception:  # noqa: BLE001 — another Triton: the next compile's begin says the end first, as before
            pass

    # -- commands ---------------------------------------------------------------------------------------
    def setup(self, msg):
        from . import guards, sandbox

        job = msg.get("job") or {}
        active, warnings = sandbox.Granted(), []
        sb = job.get("sandbox") or {}
        workdir = job.get("workdir")
        shared = None
        if self.device.startswith("cuda"):
            from ..shared import tritoncache

            # The machine's trusted Triton modules (read-only for this process: sandbox.runner_paths), found now,
            # as kgym's uid with kgym's environment (usually the zygote found it already): after the uid drop and
            # the clean environment, "home" is the workdir.
            shared, _why = tritoncache.modules_dir()
        # This process's own folder in the evaluation's (transport.py): the only place there it writes.
        run = tp.run_dir(workdir) if workdir else None
        if _inherited is not None:
            kept = sorted(sandbox.LIBRARY_FDS)
            sandbox.grant(active, "descriptors", f"descriptors: only the runner's socket and standard streams are open"
                          + (f", and the zygote's library descriptors {kept}" if kept else "")
                          + f" ({_inherited} inherited descriptors closed before the set-up)")
        if sb.get("enabled", True) is not False:
            if os.getpid() == 1:
                # The intermediate that forked this process unshared a PID namespace (zygote.py); where the kernel
                # refused, kgym has its warning and this process is not PID 1.
                sandbox.grant(active, "pid_namespace", "PID namespace: the runner is its PID 1; nothing outside it "
                                                       "can be seen or signalled, and what it starts ends with it")
            keep = [p for p in sb.get("writable", []) if p]
            uid = job.get("runner_uid") if os.geteuid() == 0 else None
            mounted = False
            if sb.get("namespaces", True):
                # Bound back (if a hidden directory covers it) but never chowned like the writable paths.
                mounted = sandbox.enter_runner_namespaces(workdir, keep + ([shared] if shared else []), active,
                                                          warnings, limits=sandbox.workdir_limits(job))
            if mounted and workdir:
                sandbox.mount_workdir(workdir, uid, job, active, warnings)
            else:
                sandbox.workdir_limit_unavailable("no mount namespace" if sb.get("namespaces", True)
                                                  else "the job turned namespaces off", warnings)
            if uid:
                if run:
                    sandbox.prepare_dir_for(run, uid, uid)
                for p in keep:
                    sandbox.prepare_dir_for(p, uid, uid)
                sandbox.drop_privileges(uid, uid, warnings, active)
            sandbox.apply_runner(job, active, warnings)
        else:
            warnings.append("sandbox disabled by the job")
            warnings.extend(f"{name}: not active: the sandbox is disabled" for name in
                            ("source_readonly", "import_path", "workdir_limit"))
        if run:
            os.chdir(run)
            # Triton's default home (~/.triton: dumps, overrides, the cache) was fixed when the zygote imported it,
            # as root's home, which the runner can neither see nor write: its own folder is this runner's home,
            # and its compile cache goes with the evaluation (nothing a candidate writes reaches the next one).
            os.environ["TRITON_HOME"] = run
            # TRITON_CACHE_DIR outranks TRITON_HOME, and TRITON_* variables pass the clean environment: one set
            # for kgym (or a benchmark's empty cache for each run) would give every runner the same cache.
            os.environ["TRITON_CACHE_DIR"] = os.path.join(run, ".triton", "cache")
        _triton_reads_no_overrides(active)
        import torch

        torch.set_num_threads(int(job.get("threads", 1)))
        if self.device == "cpu":
            _perturb_host_allocator()
            _autotune_without_benchmark()
            # libdevice's math functions are stubs in Triton's interpreter: numpy versions (interpmath says why),
            # before the candidate's module imports any of them by name.
            from . import interpmath

            interpmath.install()
        self.guards = guards.Guards(job.get("policy") or {}, cuda=self.device.startswith("cuda"))
        self.job = job
        if self.device.startswith("cuda"):
            # Triton's C modules (its CUDA utilities, each signature's launcher stub: gcc, 0.2-0.4 s each) come
            # from the trusted directory where kgym built them; what this runner compiles itself stays in its
            # workdir.  The signatures it makes launchers for are what the judge asks for afterwards.
            from ..shared import tritoncache

            try:
                tritoncache.install_reader(self.signatures)
            except Exception as exc:  # noqa: BLE001 — another Triton: every module is compiled here, as before
                warnings.append(f"Triton's shared C modules not used: {type(exc).__name__}: {exc}"[:300])
            self._install_compile_handback()
            if job.get("context_later"):
                # The driver only (cuInit, the context's flags): the context waits for the judge's "context",
                # which it sends inside a shared GPU phase (child._start_runner, _setup_split: a cold start on a GPU).
                tp.cudashare.blocking_sync(self.device)
            else:
                # The CUDA context, inside the sandbox, while the judge starts its own (child._start_runner).
                tp.cudashare.start_context(self.device)
        self.reply({"type": kinds.REPLY_OK, "pid": os.getpid(), "uid": os.getuid(),
                    "sandbox": {"active": list(active), "warnings": warnings, "protections": active.codes}})

    def load(self, msg):
        import torch

        # Everything the guards compare against is captured before the candidate's first line runs.
        self.guards.install()
        # Checked bytes = executed bytes (docs/threat-model.md).  The judge sends the very bytes its static check
        # read, and has written them to the evaluation's source folder, which this process cannot change
        # (sandbox._checked_bytes says by what).  Those bytes are compiled here, under that file's name, into a
        # fresh module: no import machinery, no .pyc read or written.  Every later reader of the code's file —
        # tracebacks, inspect, Triton reading a kernel's source at its decoration (GPU) or first launch (the
        # interpreter) — finds the same bytes: in linecache, seeded now and never invalidated (no modification
        # time), and on disk.  The file name comes with the source, not with the set-up: a warm runner was set up
        # before its job, for any candidate (kgym's pair.c).
        path = tp.source_path(self.job["workdir"], msg.get("name"))
        source = msg.get("source")
        data = source.encode("utf-8", "surrogateescape") if isinstance(source, str) else b""
        with open(path, "rb") as f:
            on_disk = f.read()
        if on_disk != data:
            return self.reply({"type": kinds.REPLY_ERROR,
                               "message": f"the source file {path} does not hold the bytes the judge checked (kgym "
                                          "error, not the candidate's)"})
        _seed_linecache(path, data)
        code = compile(data, path, "exec", dont_inherit=True)
        module = types.ModuleType("kgym_candidate")
        module.__file__ = path
        sys.modules["kgym_candidate"] = module
        exec(code, module.__dict__)
        cls = getattr(module, "ModelNew", None)
        if not isinstance(cls, type) or not issubclass(cls, torch.nn.Module):
            return self.reply({"type": kinds.REPLY_ERROR, "message": "ModelNew is not a subclass of torch.nn.Module"})
        self.cls, self.module = cls, module
        self.reply({"type": kinds.REPLY_OK})

    def construct(self, msg, init):
        from ..shared.models import construct

        if msg.get("drop_others"):
            self.models.clear()
            self.last = None
        # The variant's size constants in the candidate's module while its model is built, as the judge gives
        # them to the task's module for the reference (a model that sizes a state from a module-level batch_size:
        # KernelBench's level3/33): the candidate's own top-level assignments, re-run with those values.
        sizes = msg.get("sizes")
        with _module_sizes(self.module, sizes if isinstance(sizes, dict) else None):
            self.models[msg["id"]] = construct(self.cls, init or [], int(msg.get("seed", 0)), self.device,
                                              msg.get("dtype"), _spread_keys(msg.get("spread")))
        self.reply({"type": kinds.REPLY_OK})

    def call(self, msg, args):
        import torch

        model = self.models[msg["model"]]
        # Inputs handed over in place are the judge's own, which it checks itself after the answer
        # (transport.InPlace): no snapshot of them here (gigabytes on the largest tasks).
        judged = self.reader.last_in_place
        _poison(msg.get("poison") or [], self.device)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = self.guards.call(model, list(args or []), msg.get("stage"), msg.get("variant"),
                                   inputs_checked=judged)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        if isinstance(args, list):
            args.clear()  # the last views of the judge's block (the command loop holds this list): unmapped now
        # The poison's spare block and the forward's intermediates go back before the answer (reply trims).
        self.reply({"type": kinds.REPLY_OK, "candidate_ms": ms}, _sendable(out))

    def check(self, msg):
        self.guards.check_process(msg.get("stage"))
        self.reply({"type": kinds.REPLY_OK})

    def timing_inputs(self, msg, values):
        """The judge's call block, mapped in place for every timed call from now on (or none: the values come
        with each command), the L2 flush buffer, and the persisting-L2 reset with what it can do."""
        from ..shared import timing as tm

        self.call_args = list(values) if isinstance(values, list) else None
        self.timed_variant = msg.get("variant")
        self._warm_checks(msg.get("output_dtypes"))
        if msg.get("profile") and self.device.startswith("cuda"):
            # The profiler's first use in a process sets up CUPTI: here, in the shared phase, so the exclusive
            # window holds only the profiled calls (the clock block's).
            from ..shared import profile

            profile.warm_up()
        self.flusher = tm.L2Flusher() if msg.get("flush", True) else None
        self.l2 = tm.PersistingL2(self.device) if msg.get("flush", True) else None
        self.reply({"type": kinds.REPLY_OK, "l2": self.l2.facts() if self.l2 is not None else None})

    def _warm_checks(self, dtypes):
        """A checked call's work (sample, the non-finite test) done once on a small tensor of each output dtype,
        here in the shared phase: each kernel's first launch in a process loads it (tens of ms on an H200, seen
        as 17 ms a check on a task checked 3 times), which would otherwise land in the exclusive timing window."""
        import torch

        from ..shared import timing as tm
        from . import guards

        for name in (dtypes if isinstance(dtypes, list) else [])[:8]:
            dtype = tp._DTYPES.get(name) if isinstance(name, str) else None
            if dtype is None:
                continue
            x = torch.zeros(tm.SAMPLES + 1, dtype=dtype, device=self.device)
            (i,) = tm.sample_positions([x.numel()], 0, self.device)
            guards.nonfinite(x[i])  # the gather and the test

    def _timed_args(self, values):
        """A timed command's arguments: those it carried, else the call block the judge filled for it."""
        if isinstance(values, list):
            return values
        if self.call_args is None:
            raise RuntimeError("a timed command with no arguments and no call block")
        return self.call_args

    def _described(self, out, args, model, nonfinite=True):
        """The output's description for the judge (guards.describe_outputs; ``nonfinite``: with the count of
        non-finite values), after the aliasing checks of a correctness call (findings with the answer)."""
        from . import guards

        return self.guards.check_timed(out, args, guards.model_state(model), "timing", self.timed_variant,
                                       nonfinite)

    def timed(self, msg, values):
        import torch

        from ..shared import timing as tm

        model = self.models[msg["model"]]
        args = self._timed_args(values)
        self.last = None
        # The inputs are ready before the timed call starts: a candidate that works on a side stream (which
        # does not wait for the current one) reads finished inputs, as it did when they were made in advance.
        torch.cuda.synchronize()
        flush = msg.get("flush", True)
        self.guards.where = ("timing", self.timed_variant)
        try:
            with torch.no_grad(), self.guards.watching():
                ms, device_ms, out = tm.event_timed(model, args, self.flusher if flush else None,
                                                    self.l2 if flush else None)
        finally:
            self.guards.where = (None, None)
        self.last = out
        t0 = time.perf_counter()
        # No non-finite count here: a pass over the output and a wait for the device on every call (14 ms a
        # round, measured on an H200); the judge gets the count of the calls it checks with their sample.
        outputs = self._described(out, args, model, nonfinite=False)
        self.reply({"type": kinds.REPLY_OK, "ms": ms, "device_ms": device_ms, "outputs": outputs,
                    "describe_ms": (time.perf_counter() - t0) * 1e3,
                    "l2": self.l2.facts() if self.l2 is not None else None})

    def fetch(self, msg):
        self.reply({"type": kinds.REPLY_OK}, _sendable(self.last))

    def sample(self, msg, _values):
        """The last output's values at the positions the judge's seed gives (timing.sample_positions, drawn
        after the call), and each output's count of non-finite values (guards.describe_outputs leaves it out of
        a timed call's description: only the checked calls pay for the pass over the output).  Only the sample
        crosses back, through host memory."""
        import torch

        from ..shared import timing as tm
        from . import guards

        outs = list(self.last) if isinstance(self.last, (tuple, list)) else [self.last]
        if not outs or not all(torch.is_tensor(o) for o in outs):
            return self.reply({"type": kinds.REPLY_OK}, None)
        samples = int(msg.get("samples", tm.SAMPLES))
        if not 0 < samples <= tm.SAMPLES:
            return self.reply({"type": kinds.REPLY_ERROR, "message": f"sample: {samples} positions asked"})
        idx = tm.sample_positions([o.numel() for o in outs], msg.get("seed", 0), self.device, samples)
        picked = []
        for o, i in zip(outs, idx):
            flat = o.detach().reshape(-1)
            picked.append(flat if i is None else flat[i.to(flat.device)])
        self.reply({"type": kinds.REPLY_OK, "nonfinite": [guards.nonfinite(o) for o in outs]}, picked)

    def clock_block(self, msg):
        import torch

        from ..shared import timing as tm

        model = self.models[msg["model"]]
        args, self.prepared = self.prepared, None
        if args is None:
            self._end_block_profile()
            return self.reply({"type": kinds.REPLY_ERROR, "message": "clock_block without clock_prepare"})
        self.last = None  # the last timed output goes before the block makes its own (measured: out of memory on
        # level1/19, the runner holding its set, the block's inputs and two outputs)
        self.guards.where = ("timing", self.timed_variant)
        self.block_calls = int(msg.get("calls", 1))
        try:
            with self.guards.watching():
                times, self.last = tm.clock_block(model, args, self.block_calls)
        except BaseException:
            self._end_block_profile()
            raise
        finally:
            self.guards.where = (None, None)
        # The output is described by clock_describe, after kgym's clock around the block has stopped: a pass
        # over a multi-GB output (its non-finite count) inside the window made honest kernels look like a
        # tampered timer on an H200 (5 calls of 20 ms in all, 45 ms seen).
        self.block_args = args
        self.reply({"type": kinds.REPLY_OK, "candidate_ms": times})

    def clock_describe(self, msg):
        """The last clock_block's output, described for the judge with the checks of a timed call, and the profile
        of the block's calls where clock_prepare started one (stopped first: the description's own kernels, the
        non-finite count, are not the candidate's)."""
        prof = self._end_block_profile()
        args, self.block_args = self.block_args, None
        if args is None:
            return self.reply({"type": kinds.REPLY_ERROR, "message": "clock_describe without clock_block"})
        answer = {"type": kinds.REPLY_OK, "outputs": self._described(self.last, args, self.models[msg["model"]])}
        if prof is not None:
            answer["profile"] = prof
        self.reply(answer)

    def clock_prepare(self, msg, values):
        """The arguments of the next clock_block, ready before kgym's clock around the block starts, and with
        ``profile`` the profiler started on them (after the copy: nothing but the block's calls is profiled)."""
        import torch

        from . import guards

        self._end_block_profile()  # one an earlier block left (it failed): dropped
        self.prepared = None  # the previous arguments go before new ones arrive: gigabytes on large tasks
        self.prepared = self._timed_args(values)
        torch.cuda.synchronize()
        if msg.get("profile"):  # the judge asks on a GPU only (timing is GPU-only)
            from ..shared import profile

            guards.LOG.reset()
            guards.LOG.active = True  # the launch hook records the names of the block's Triton launches
            self.block_profile = profile.Recording()
        self.reply({"type": kinds.REPLY_OK})

    def _end_block_profile(self):
        """Stops the clock block's profiler, if one runs; returns its summary (profile.summarize) or None."""
        rec, self.block_profile = self.block_profile, None
        if rec is None:
            return None
        from ..shared import profile
        from . import guards

        guards.LOG.active = False
        prof = rec.stop()
        return _plain(profile.summarize(prof, self.block_calls, guards.LOG.kernels, getattr(rec, "stream", None)))

    def launchers(self, msg):
        """The signatures Triton made a launcher for in this runner (tritoncache.install_reader recorded them;
        none on the CPU): the judge builds the launchers the machine lacks, for later evaluations."""
        self.reply({"type": kinds.REPLY_OK, "signatures": list(self.signatures)})

    def share_probe(self, msg):
        """Answers known numbers into the judge's device spare: whether this process (sandboxed by now) can map
        the judge's device memory (transport.py; the judge checks the numbers)."""
        import torch

        self.reply({"type": kinds.REPLY_OK}, [torch.arange(64, dtype=torch.int64, device=self.device) * 7 + 3])

    def serve(self):
        from ..shared.report import describe_exception

        while True:
            try:
                msg, values = self.reader.recv()
            except tp.ReceiveError as exc:
                # The judge's tensors could not be taken in (out of device memory while other evaluations hold
                # it): an answer like any error, so the judge can retry alone, instead of a dead runner.
                self.seq = exc.msg.get("seq")
                self.cmd = exc.msg.get("cmd")
                self.reply({"type": kinds.REPLY_ERROR, "error": describe_exception(exc.error)})
                continue
            cmd = msg.get("cmd")
            self.seq = msg.get("seq")
            self.cmd = cmd
            # The commands of an exclusive window wait for the GPU spinning (cudashare.spinning says why).
            spin = (tp.cudashare.spinning() if cmd in _EXCLUSIVE_COMMANDS and self.device.startswith("cuda")
                    else contextlib.nullcontext())
            try:
                with spin:
                    if cmd == kinds.CMD_SETUP:
                        self.setup(msg)
                    elif cmd == kinds.CMD_CONTEXT:
                        if self.device.startswith("cuda"):
                            tp.cudashare.start_context(self.device)
                        self.reply({"type": kinds.REPLY_OK})
                    elif cmd == kinds.CMD_LOAD:
                        self.load(msg)
                    elif cmd == kinds.CMD_CONSTRUCT:
                        self.construct(msg, values)
                    elif cmd == kinds.CMD_CALL:
                        self.call(msg, values)
                    elif cmd == kinds.CMD_CHECK:
                        self.check(msg)
                    elif cmd == kinds.CMD_DROP:
                        self.models.pop(msg.get("model"), None)
                        self.reply({"type": kinds.REPLY_OK})
                    elif cmd == kinds.CMD_TIMING_INPUTS:
                        self.timing_inputs(msg, values)
                    elif cmd == kinds.CMD_TIMED:
                        self.timed(msg, values)
                    elif cmd == kinds.CMD_FETCH:
                        self.fetch(msg)
                    elif cmd == kinds.CMD_SAMPLE:
                        self.sample(msg, values)
                    elif cmd == kinds.CMD_CLOCK_PREPARE:
                        self.clock_prepare(msg, values)
                    elif cmd == kinds.CMD_CLOCK_BLOCK:
                        self.clock_block(msg)
                    elif cmd == kinds.CMD_CLOCK_DESCRIBE:
                        self.clock_describe(msg)
                    elif cmd == kinds.CMD_SHARE_PROBE:
                        self.share_probe(msg)
                    elif cmd == kinds.CMD_LAUNCHERS:
                        self.launchers(msg)
                    elif cmd == kinds.CMD_EXIT:
                        self.reply({"type": kinds.REPLY_OK})
                        return
                    else:
                        self.reply({"type": kinds.REPLY_ERROR, "message": f"unknown command {cmd!r}"})
            except tp.ProtocolError:
                raise
            except BaseException as exc:  # noqa: BLE001 — everything the candidate raises is data
                if isinstance(exc, (KeyboardInterrupt, SystemExit)) and cmd is None:
                    raise
                self.reply({"type": kinds.REPLY_ERROR, "error": describe_exception(exc)})
            self.compiling = False  # the judge asks for its phase again itself once the answer is in

    def trim_cache(self):
        """Cached but unused device memory goes back to the driver before the answer of each command the judge
        sends inside a GPU phase (reply; the poison blocks and the forward's intermediates, gigabytes on large
        tasks): an evaluation must not sit on memory another evaluation's phase, or its re-run alone, needs.  Not
        between timed calls, whose allocations must come from the cache, and not for the commands the judge sends
        outside any phase (_NO_TRIM_COMMANDS): what they leave cached goes at the next phased command's answer, or
        with the process in the wind-down's phase."""
        if not self.device.startswith("cuda"):
            return
        import torch

        try:
            if torch.cuda.memory_reserved() - torch.cuda.memory_allocated() > (1 << 30):
                torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 — a poisoned context shows in the next command's answer
            pass


# Commands of the timing loop (the cache is kept warm between them).
_TIMING_COMMANDS = frozenset(("timing_inputs", "timed", "fetch", "sample", "clock_prepare", "clock_block",
                              "clock_describe"))
# The commands the judge sends inside an exclusive window (timing rounds, the clock block and its profile): their
# waits for the GPU spin (cudashare.spinning).
_EXCLUSIVE_COMMANDS = _TIMING_COMMANDS
# The commands whose answer gives no cached memory back (trim_cache): the timing loop's, and those the judge sends
# outside any GPU phase (the set-up before its phase in a split cold start, the import, the process checks between
# stages, the launchers after the last stage).
_NO_TRIM_COMMANDS = _TIMING_COMMANDS | frozenset((kinds.CMD_SETUP, kinds.CMD_LOAD, kinds.CMD_CHECK,
                                                   kinds.CMD_LAUNCHERS))


def _plain(obj):
    """JSON-safe copy: non-finite floats as strings (the judge's _finite, as for its own messages), anything
    that is not JSON (finding evidence may hold a dtype or a tensor) by its text."""
    import json

    from ..shared.report import _finite

    return json.loads(json.dumps(_finite(obj), default=str))


def _sendable(out):
    """What goes back to the judge: tensors and plain structure; anything else by its type name only."""
    import torch

    if torch.is_tensor(out):
        # A subclass is sent as the plain tensor its data is; the guards report the subclass itself.
        return out.detach().as_subclass(torch.Tensor) if type(out) is not torch.Tensor else out.detach()
    if isinstance(out, (list, tuple)):
        items = [_sendable(o) for o in out]
        return tuple(items) if isinstance(out, tuple) else items
    if out is None or isinstance(out, (bool, int, float)):
        return out
    return tp.Other(type(out).__name__)


def _poison(specs, device):
    """NaN-filled blocks of the outputs' sizes left in the allocator before the call: an output the
    candidate allocates and does not write reads NaN, not a recycled right answer (threat model row 1)."""
    import torch

    junk = []
    for spec in specs[:8]:
        try:
            shape, dtype = [int(s) for s in spec[0]], getattr(torch, str(spec[1]))
        except (TypeError, ValueError, AttributeError, IndexError):
            continue
        if dtype.is_floating_point:
            for _ in range(2):
                junk.append(torch.full(shape, float("nan"), dtype=dtype, device=device))
    del junk


def _seed_linecache(path, data):
    """The checked source's lines in linecache under its file name, as linecache would read them (tokenize's
    encoding rules) but with no modification time: linecache.checkcache never drops such an entry, so inspect
    (and Triton through it) never reads the file again."""
    import linecache

    lines = source_lines(data)  # the judge reads the same lines for what Triton compiles (language.py)
    if lines is None:
        return  # compile() says what is wrong with these bytes; the file, unchanged, is read as before
    linecache.cache[path] = (len(data), None, lines, path)


def _triton_reads_no_overrides(active):
    """Triton can replace a compiled kernel with IR from its override folder (TRITON_KERNEL_OVERRIDE) and write
    dumps; the folders default to TRITON_HOME, which is this runner's own and writable, and TRITON_* variables of
    kgym's environment reach the runner.  Both are forced off: the environment for any process it starts, the
    knobs (an explicit value outranks the environment) for this one.  Nothing else Triton reads code from is
    writable here but its compile cache (docs/threat-model.md says what that depends on)."""
    for name in ("TRITON_KERNEL_OVERRIDE", "TRITON_KERNEL_DUMP", "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR",
                 "TRITON_REPRODUCER_PATH", "TRITON_CACHE_MANAGER", "TRITON_REMOTE_CACHE_BACKEND",
                 "MLIR_ENABLE_DUMP", "LLVM_IR_ENABLE_DUMP", "TRITON_INTERPRET_DUMP"):
        os.environ.pop(name, None)
    os.environ["TRITON_KERNEL_OVERRIDE"] = "0"
    os.environ["TRITON_KERNEL_DUMP"] = "0"
    try:
        from triton import knobs
    except ImportError:  # an older Triton: the environment above is all it reads
        active.append("triton: kernel overrides and dumps off (environment)")
        return
    forced = []
    # always_compile: a compiled kernel is never found in the cache, always compiled (Triton then stores it and reads
    # back the files it has just written): a file planted in the runner's cache under a kernel's key is never
    # used.  The runner's cache starts empty, so an honest kernel compiles once per specialisation either way
    # (Triton keeps it in memory).
    holder = getattr(knobs, "compilation", None)
    for name, value in (("override", False), ("dump_ir", False), ("always_compile", True)):
        # (hasattr on the class would call the knob's descriptor without an instance, which raises)
        if holder is not None and name in vars(type(holder)):
            setattr(holder, name, value)
            forced.append(f"{name}={value}")
    active.append("triton: no kernel overrides or dumps, compiled kernels never looked up in the cache ("
                  + ", ".join(forced or ["environment"]) + ")")


def _autotune_without_benchmark():
    """The Triton interpreter has no driver to benchmark ``@triton.autotune`` configs with ("0 active
    drivers"): on the CPU every config gets the same time, so the first one (for its key) is used.  The
    computation, not the speed, is what the CPU checks."""
    try:
        from triton.runtime import autotuner

        autotuner.Autotuner.do_bench = property(lambda self: (lambda fn, quantiles=None: [1.0, 1.0, 1.0]))
    except Exception:  # noqa: BLE001 — another Triton: autotune keeps its own behaviour
        pass


def _perturb_host_allocator():
    """glibc fills every block it hands out with junk (M_PERTURB): unwritten host memory is never a right
    answer (threat model row 1; on the CPU outputs live in host memory)."""
    import ctypes

    try:
        ctypes.CDLL(None).mallopt(-6, 0xA5)
    except Exception:  # noqa: BLE001 — not glibc: _poison still applies
        pass


def run(peer_fd, out_fd, err_fd, device):
    """Entry point in the freshly forked runner (called by the zygote)."""
    import socket

    global _inherited

    os.setsid()
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.close(out_fd)
    os.close(err_fd)
    # Nothing but the judge's socket and the standard streams reaches the candidate: a descriptor of kgym's or
    # of its caller (a results file, a terminal) would let it write there.  The zygote already passes only these;
    # this holds whoever forked the runner.
    from . import sandbox

    _inherited = sandbox.close_descriptors([peer_fd, *sandbox.LIBRARY_FDS])
    sock = socket.socket(fileno=peer_fd)
    try:
        Runner(sock, device).serve()
    except (tp.ProtocolError, BrokenPipeError, ConnectionResetError, EOFError):
        os._exit(3)
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        os._exit(4)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    os._exit(0)


def _drain_device(device):
    """Waits until every kernel this process queued on its GPU has finished (Runner.reply).  Nothing to wait
    for off CUDA or before this process made its CUDA context (a reply must not be the one to make it: the
    context comes after the sandbox, in setup)."""
    if not device.startswith("cuda"):
        return
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _module_sizes(module, sizes):
    """A context in which the candidate's ``module`` has the variant's ``sizes`` (shared.constants.sizes: its top-level
    assignments re-run with them, put back after); nothing where there are none or the module has no file.  The
    values come from the judge; an error here is the candidate's module failing to take them (its own top-level
    code), which construction then reports as any other."""
    if not sizes or module is None or not getattr(module, "__file__", None):
        return contextlib.nullcontext()
    from ..shared import constants

    # Only the sizes the module binds itself (a top-level `batch_size = 64`): a name it does not (a function `W`,
    # a kernel `H`) keeps what it is while __init__ runs (the red team's robustness note, twenty-fifth session).
    clean = {str(k): v for k, v in sizes.items() if isinstance(v, int) and not isinstance(v, bool)}
    return constants.sizes(module, clean, bound_only=True)


def _spread_keys(keys):
    """construct's ``spread`` field (the parameters variant: models.spread): a list of [element count, value]."""
    if keys is None:
        return None
    if not isinstance(keys, list) or not all(isinstance(k, list) and len(k) == 2 and isinstance(k[0], int)
                                             and isinstance(k[1], (int, float)) for k in keys):
        raise ValueError(f"construct's spread must be a list of [element count, value] pairs, not {str(keys)[:100]}")
    return [(int(n), float(c)) for n, c in keys]
