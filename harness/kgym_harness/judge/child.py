"""The judge: the trusted half of one evaluation.  It loads the task, makes the inputs, runs and times the
reference, holds the reference outputs, the tolerances and the variant list, compares, and reports raw facts
to the C supervisor, one JSON object per line on the protocol socket (docs/protocol.md).

The candidate's code never runs here.  It runs in the runner (runner.py), a second process forked by the
zygote in namespaces of its own, which this process drives over a Unix socket (transport.py): tensors go
there in shared memory, outputs come back the same way and are compared here.  ``RemoteModel`` is the
judge's handle on a ``ModelNew`` instance living in the runner.

The judge decides nothing either: it says what happened (exceptions with their frames, per-variant
comparison facts, per-call times) and C turns that into stages, a verdict, a reward and feedback.  Each
stage is bracketed by ``{"type": "stage", "status": "begin"}`` and an end message so that the supervisor
can enforce per-stage time limits from outside.
"""

import ast
import collections
import contextlib
import copy
import functools
import json
import math
import os
import socket
import sys
import time

from ..shared import kinds
from ..shared import models
from ..shared.models import construct
from ..shared.report import RemoteError, _finite, describe_exception, is_out_of_memory, says_out_of_memory
from ..shared.transport import LineReader


class Channel:
    """JSON lines over the protocol socket.

    Every message carries the job's secret ``nonce``, held only in a closure made before the candidate is
    imported: kgym discards (and reports as ``protocol_forgery``) any line without it, so a candidate that finds
    the socket's fd cannot forge stage results.  The socket's fd is also moved to a high, random number."""

    def __init__(self, fd):
        self.sock = socket.socket(fileno=fd)
        # kgym's lines: no limit (kgym is trusted).  A kept judge's next runner socket comes with its job's
        # first line (SCM_RIGHTS): descriptors are collected, and take_fd hands one over.
        self.lines = LineReader(self.sock, max_line=None, fds=True)
        self.send = self._sender(self.sock, None)
        self.idle = False  # waiting for a kept judge's next job: kgym closing the socket then is the end

    @staticmethod
    def _sender(sock, nonce):
        dumps, sendall = json.dumps, sock.sendall

        def send(obj):
            if nonce is not None:
                obj = dict(obj, nonce=nonce)
            sendall((dumps(obj, default=_json_default, allow_nan=False) + "\n").encode())

        return send

    def seal(self, nonce):
        """From now on every message carries the nonce; nothing else keeps a reference to it."""
        self.send = self._sender(self.sock, nonce)

    def request(self, obj):
        """Asks kgym something and waits for its answer (one line)."""
        self.send(dict(obj, reply=True))
        return self.recv()

    def recv(self):
        """kgym's next message; EOFError when it closed the socket."""
        return json.loads(self.lines.readline())

    def take_fd(self):
        """The one descriptor kgym sent with the line just read (a kept judge's new runner socket); any other
        count is kgym's error, and every descriptor that came is closed."""
        fds, self.lines.fds = self.lines.fds, []
        if len(fds) == 1:
            return fds[0]
        for fd in fds:
            os.close(fd)
        raise RuntimeError(f"the job came with {len(fds)} descriptors, not its runner's socket")


def _json_default(value):
    try:
        return float(value)
    except Exception:
        return str(value)


class RunnerLost(BaseException):
    """The runner died, hung up or broke the protocol: the candidate ended its own process.  A
    BaseException, so no ``except Exception`` on the way mistakes it for a fact about one call: the
    evaluation ends, and kgym reads how the runner ended from its exit status.  ``why``: "closed" (the
    socket closed: the runner exited or closed it) or "protocol" (it sent something that is not a reply)."""

    def __init__(self, message, why="closed"):
        super().__init__(message)
        self.why = why


class StageFailed(Exception):
    pass


def _ok(reply, out):
    """(reply, out) of a runner answer that is "ok"; anything else is the candidate's error (RemoteError)."""
    if reply.get("type") != kinds.REPLY_OK:
        raise RemoteError(reply.get("error") or {"type": "RuntimeError", "message": str(reply)[:500]})
    return reply, out


# A forward's answer may hold at most this many times its reference output's bytes, plus 1 MiB (RunnerLink.ask): an
# output of the reference's shapes and dtypes holds exactly as many; a float32 output of a half-precision reference
# twice as many (judged, and failed, by the comparison).
_ANSWER_SLACK = 2


def _answer_bound(answer_bytes):
    """The most a runner's answer may hold (transport.Reader.recv's max_bytes): None where the command names no
    expected size (its answer is bounded by the memfd's size, which RLIMIT_FSIZE bounds, and by no overlap)."""
    return _ANSWER_SLACK * answer_bytes + (1 << 20) if answer_bytes else None


class RunnerLink:
    """The judge's end of the socket to the runner: one command, one answer (runner.py lists them).
    Runtime-guard findings the runner attaches to an answer are added to the judge's findings as the
    runner's evidence."""

    def __init__(self, sock, device, findings):
        from ..shared import transport

        self.tp = transport
        self.sock = sock
        self.reader = transport.Reader(sock, "cuda" if device.startswith("cuda") else "cpu")
        self.findings = findings
        # Whether tensors go to the runner in device memory (transport.py); set by share_probe.
        self.share = False
        self.next_id = 0
        self.seq = 0
        # The runner labels its findings with the variant they were seen on, but learns only an opaque label:
        # a variant's name says how its inputs were made (×100, +100, another seed), which a candidate could
        # special-case.
        self.labels = {}
        # Called with "begin" / "end" when the runner says Triton compiles inside a command, and "restore"
        # when the command's answer came while a compile it announced never said it ended (Evaluation.
        # compile_handback); None: such lines are answered and otherwise ignored.
        self.on_compile = None
        # The judge's compile cache service (kernelcache.Service) answering the runner's compile requests, once
        # the static stage made the skeleton; None: every request is answered with no directory.
        self.kernel_cache = None
        self.peak = 0  # the runner's allocator peak, as its answers report it (take_peak)
        # The spare for this runner's answers, kept between commands (transport.AnswerSpare says why it is
        # sound); never another runner's: a link is one runner's.
        self.answers = transport.AnswerSpare()

    def take_peak(self):
        peak, self.peak = self.peak, 0
        return peak

    def drop_spare(self):
        """Lets the kept answer spare go (the end of a stage, a re-run alone); the next command tells the runner
        to let go of it too (``"_forget"``), which frees its device memory; the next answer gets a new one."""
        self.answers.close()

    def close(self):
        """The socket to a runner that has exited (a judge kept for another job holds nothing of this one)."""
        self.answers.close()
        self.tp.release(self.reader.take_spare())
        for fd in self.reader.fds:
            os.close(fd)
        self.reader.fds.clear()
        try:
            self.sock.close()
        except OSError:
            pass

    def ask(self, obj, values=None, answer_bytes=0, spare=None, in_place=None, meanwhile=None):
        """Sends a command, returns (answer, its values).  ``answer_bytes``: how many bytes of tensors the
        answer is expected to carry (the reference output's size): a memfd that large goes along for the
        runner to write them into (transport.pack says why).  ``spare``: one made by the caller instead
        (released here all the same).  ``in_place``: a transport.InPlace holding ``values``' tensors, sent
        without a copy (the caller checks them after the answer).  ``meanwhile``: called once the command
        is sent, before the answer is read (the judge's own work, done while the runner does its part).
        One command at a time: nothing of the next command is in the runner's socket while the candidate's code
        runs for this one (a construct sent ahead of its call let ModelNew.__init__ read the call's inputs and
        answer it outside the runtime guards: red team, thirty-seventh session, tests/fixtures/rt_pipe)."""
        # Every command carries a number the answer must repeat: a line the candidate writes on its end of
        # the socket is not an answer, and the conversation cannot drift out of step unnoticed.
        self.seq += 1
        if self.answers.forget is not None:  # a kept spare let go (drop_spare): the runner lets go of it too
            obj, self.answers.forget = dict(obj, _forget=self.answers.forget), None
        keep = None
        if spare is None and answer_bytes:
            # The kept spare (made again only when this answer outgrows it); on a GPU a device block once the
            # runner showed it maps them.
            keep = self.answers
            spare = keep.get(answer_bytes, device=self.share)
        sent = None
        try:
            sent = self.tp.send(self.sock, dict(obj, seq=self.seq), values, spare=None if keep else spare,
                                share=self.share, in_place=in_place, keep=keep)
            if meanwhile is not None:
                meanwhile()
            while True:
                try:
                    reply, out = self.reader.recv(own_spare=spare, max_bytes=_answer_bound(answer_bytes))
                except self.tp.AnswerTooLarge as exc:
                    # More than a forward of the reference's output shapes can hold: the candidate's error, refused
                    # before the judge copies any of it (red team 42: expanded views and a wrong shape made the judge
                    # hold 5.5 GiB for an answer the runner paid 0.8 GiB for, outside the runner's memory bound).
                    reply = {"type": kinds.REPLY_ERROR, "seq": exc.msg.get("seq"), "error": {
                        "type": "OutputTooLarge", "message": f"the output holds {exc.nbytes} bytes, more than "
                        f"{_ANSWER_SLACK} times the reference output's {answer_bytes} (plus 1 MiB): its shapes or "
                        "dtypes are not the reference's"}}
                    out = None
                    break
                if reply.get("type") != kinds.REPLY_COMPILING or reply.get("seq") != self.seq:
                    break
                # Triton compiles in the runner mid-command (runner.py _install_compile_handback): "begin",
                # and "end", after which the runner waits for "resume" before it touches the GPU again.
                phase = reply.get("phase")
                if self.on_compile is not None and phase in ("begin", "end"):
                    self.on_compile(phase)
                if phase == "begin" and "spec" in reply:
                    # The trusted compile cache (kernelcache.py): the runner waits for this answer, whatever
                    # its request was worth; the directory is where its Triton finds the entry.
                    kdir = None
                    if self.kernel_cache is not None:
                        kdir = self.kernel_cache.ensure(reply.get("kernel"), reply.get("spec"))
                    self.tp.send(self.sock, {"cmd": kinds.CMD_COMPILED, "seq": self.seq, "dir": kdir})
                if phase == "end":
                    self.tp.send(self.sock, {"cmd": kinds.CMD_RESUME, "seq": self.seq})
        except self.tp.ProtocolError as exc:
            raise RunnerLost(str(exc), "closed" if "closed" in str(exc) else "protocol") from None
        except OSError as exc:
            raise RunnerLost(str(exc)) from None
        finally:
            if keep is None:
                self.tp.release(spare)
            self.tp.release(sent)
        if keep is not None and reply.get("type") != kinds.REPLY_OK:
            # A runner that could not take the command in (out of memory for its tensors) answers with an error
            # and never kept the spare its fd brought: the next command sends the fd again (a runner that did
            # keep it just maps it anew).
            keep.sent = False
        if self.on_compile is not None:
            self.on_compile("restore")  # a compile that raised (or a runner that lied) never said "end"
        if reply.get("seq") != self.seq:
            raise RunnerLost(f"the runner's answer to command {self.seq} came as {str(reply)[:200]}", "protocol")
        peak = reply.pop("device_peak", 0)
        if isinstance(peak, int) and 0 < peak < (1 << 50):
            self.peak = max(self.peak, peak)
        for f in reply.pop("findings", None) or []:
            if isinstance(f, dict) and isinstance(f.get("type"), str):
                f = dict(f, source="runner")
                if f.get("variant") is not None:
                    f["variant"] = self.labels.get(f["variant"], "?")
                self.findings.append(f)
        return reply, out

    def share_probe(self):
        """On a GPU: whether the runner, sandboxed, maps device memory the judge made (it writes known numbers
        into a device spare).  Returns None when it does (tensors go in device memory from now on), else the
        reason they go through host memory."""
        import torch

        if os.environ.get("KGYM_TENSORS") == "host":
            return "KGYM_TENSORS=host"
        spare = self.tp.spare_for(4096, device=True)
        if not isinstance(spare, self.tp.cudashare.Block):
            self.tp.release(spare)
            return "no device block could be made (CUDA virtual memory management or fd export unsupported)"
        reply, out = self.ask({"cmd": kinds.CMD_SHARE_PROBE}, spare=spare)
        want = torch.arange(64, dtype=torch.int64) * 7 + 3
        if reply.get("type") != kinds.REPLY_OK or not self.reader.last_in_spare:
            return self.reader.share_error or f"the runner did not answer in device memory: {str(reply)[:200]}"
        if not (isinstance(out, list) and len(out) == 1 and torch.is_tensor(out[0])
                and torch.equal(out[0].cpu(), want)):
            return "the runner's numbers in device memory were wrong"
        self.share = True
        return None

    def label(self, variant):
        """The opaque label a variant goes to the runner under (see __init__)."""
        for k, v in self.labels.items():
            if v == variant:
                return k
        k = f"v{len(self.labels) + 1}"
        self.labels[k] = variant
        return k

    def construct(self, init, seed, dtype, spread_keys=None, sizes=None):
        """``ModelNew(*init)`` in the runner, seeded like the reference; every model built before is
        dropped there (an evaluation uses one candidate model at a time).  ``spread_keys``: the parameters
        variant's (models.constant_keys of the reference), refilled there by models.spread.  ``sizes``: the
        variant's size constants, which the candidate's module has while its model is built, as the task's
        module has them while the reference is (Evaluation.reference)."""
        self.next_id += 1
        msg = {"cmd": kinds.CMD_CONSTRUCT, "id": self.next_id, "seed": int(seed), "dtype": dtype, "drop_others": True}
        if spread_keys:
            msg["spread"] = [[int(n), float(c)] for n, c in spread_keys]
        if sizes:
            msg["sizes"] = dict(sizes)
        _ok(*self.ask(msg, list(init)))
        return RemoteModel(self, self.next_id)


class RemoteModel:
    """A ModelNew instance that lives in the runner."""

    def __init__(self, link, mid):
        self.link, self.id = link, mid
        self.last_ms = None
        self.answer_bytes = 0  # the reference output's size: the runner's answers are written into a memfd that large
        self.stage = None
        self.l2 = None  # the runner's persisting-L2 facts (timing.PersistingL2.facts), from its timing answers

    def _ok(self, obj, values=None, answer_bytes=0, in_place=None):
        return _ok(*self.link.ask(dict(obj, model=self.id), values, answer_bytes, in_place=in_place))

    def call(self, args, stage, variant, poison=None, in_place=None):
        """One forward on ``args`` (sent as copies, or in place: see RunnerLink.ask); returns the output as this
        process's tensors."""
        import torch

        outs = [t for t in _tensor_list(poison) if torch.is_tensor(t)]
        specs = [[list(t.shape), str(t.dtype).replace("torch.", "")] for t in outs]
        self.answer_bytes = sum(t.numel() * t.element_size() for t in outs) or self.answer_bytes
        reply, out = self._ok({"cmd": kinds.CMD_CALL, "stage": stage, "variant": self.link.label(variant),
                               "poison": specs}, list(args), self.answer_bytes, in_place)
        self.last_ms = reply.get("candidate_ms")
        return out

    def __call__(self, *args):
        return self.call(args, self.stage or "timing", "timed_inputs")

    def timed(self, values=None, flush=True):
        """One timed call on the call block the judge filled (or on ``values``, sent along): (stream ms,
        device ms, the runner's description of the output: guards.describe_outputs)."""
        reply, _ = self._ok({"cmd": kinds.CMD_TIMED, "flush": flush}, values)
        self.l2 = reply.get("l2", self.l2)
        # the runner's word on its own overhead: a figure for PERFORMANCE, never for a verdict
        self.describe_ms = reply.get("describe_ms") if isinstance(reply.get("describe_ms"), (int, float)) else 0.0
        return float(reply["ms"]), float(reply["device_ms"]), reply.get("outputs")

    def fetch(self):
        return self._ok({"cmd": kinds.CMD_FETCH}, answer_bytes=self.answer_bytes)[1]

    def sample(self, seed, numels, itemsize=8):
        """The last timed output's values at the positions ``seed`` gives (timing.sample_positions: every
        position of a small output), and the runner's count of its non-finite values, per output tensor:
        (values, counts).  The sample comes back through host memory (a memfd spare, no device block)."""
        from ..shared import timing as tm

        nbytes = sum(itemsize * min(int(n), tm.SAMPLES) for n in numels) or 64
        reply, out = _ok(*self.link.ask({"cmd": kinds.CMD_SAMPLE, "model": self.id, "seed": int(seed),
                                         "samples": tm.SAMPLES}, None,
                                        spare=self.link.tp.spare_for(nbytes, device=False)))
        return out, reply.get("nonfinite")

    def clock_prepare(self, values=None, profile=False):
        self._ok({"cmd": kinds.CMD_CLOCK_PREPARE, "profile": bool(profile)}, values)

    def clock_block(self, calls):
        """The block's call times."""
        reply, _ = self._ok({"cmd": kinds.CMD_CLOCK_BLOCK, "calls": int(calls)})
        return [float(x) for x in reply["candidate_ms"]]

    def clock_describe(self):
        """(the runner's description of the block's last output, its profile of the block's calls or None),
        asked after kgym's clock stopped."""
        reply, _ = self._ok({"cmd": kinds.CMD_CLOCK_DESCRIBE})
        prof = reply.get("profile")
        return reply.get("outputs"), prof if isinstance(prof, dict) else None

    def drop(self):
        self.link.ask({"cmd": kinds.CMD_DROP, "model": self.id})


def _give_back_device_memory(device, collect=True, wait=True):
    """After a GPU phase (and between the reference's forward and the candidate's call): queued work is
    finished, and cached but unused blocks go back to the driver, so that the runner, another evaluation's
    phase or this one's re-run alone gets the memory (measured on an H100: a judge that kept the reference's
    intermediates of level1/36 cached sat on 70 GB while its runner ran out of memory alone).  ``wait`` False:
    the caller reads the device back right after anyway (the inputs' seal before a call), so the queued work is
    not waited for here (each wait is a turn between contexts on a shared GPU); the allocator's counts are the
    host's, and giving blocks back (cudaFree) waits for the device itself."""
    if not device.startswith("cuda"):
        return
    try:
        import torch

        if wait:
            torch.cuda.synchronize()
        if collect and torch.cuda.memory_allocated() > (2 << 30):
            # Gigabytes still allocated after a phase are usually garbage in a reference cycle (an exception's
            # traceback holds the frames that held the inputs): collected now, not whenever Python's
            # collector runs.
            import gc

            gc.collect()
        if torch.cuda.memory_reserved() - torch.cuda.memory_allocated() > (1 << 30):
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 — a poisoned context is reported by the stage itself
        pass


# Shared phases handed back for Triton compiles in one evaluation (Evaluation.compile_handback): enough for
# autotune over many configs and dtypes; a runner that announces more compiles keeps its phase.
_MAX_COMPILE_HANDBACKS = 256

_GPU_STATES = {}


def _gpu_state(device):
    """The judge's tm.GpuState for ``device``, opened once a process (None where NVML cannot be read)."""
    if device not in _GPU_STATES:
        import torch

        from ..shared import timing as tm

        _GPU_STATES[device] = tm.GpuState.open(torch.device(device)) if str(device).startswith("cuda") else None
    return _GPU_STATES[device]


# Rounds a timing window may lose to a clock limit its warm-up had not met (Evaluation.timing's one_round): each is
# followed by a whole warm-up; past this many the window is no longer watched (a candidate would have to switch
# from a light to a heavy path after each of the judge's warm-ups, which it cannot see end).
_MAX_BROKEN_ROUNDS = 2



class Evaluation:
    def __init__(self, chan, job):
        from ..runner import guards
        from . import degeneracy, policy

        self.chan = chan
        self.job = job
        self.device = job.get("device", "cpu")
        # The job's policy object; absent: the repository's default file; false: no reward-hack checks at all
        # (kgym's process-layer tests, whose fixtures crash on purpose).
        raw = job.get("policy")
        if raw is False:
            self.policy = {"findings": {k: "off" for k in policy.load_default().get("findings", {})},
                           "stop_on_static_findings": False, "runtime": {"launch_required": False,
                                                                         "check_aten": False}}
        else:
            self.policy = raw if isinstance(raw, dict) else policy.load_default()
        self.severity = policy.severity
        self.guards = guards.Guards(self.policy)
        self.sent_findings = 0
        self.degeneracy = degeneracy.Tracker(seed=int(job.get("seed", 42)))
        # kgym's arbiter shares the GPU among evaluations: ask before every GPU phase (docs/protocol.md).
        self.arbiter = bool(job.get("gpu_arbiter"))
        self.gpu_mode = None  # the GPU phase held now ("shared", "exclusive") or None
        self.reserve_bytes = 0  # device memory reserved for the stage run now, from correctness on (kgym's arbiter)
        self.stage_reserve = {}  # each stage's figure (reserve_for)
        self.reserve_renew = False  # the next acquire asks kgym to reserve reserve_bytes anew
        self._total_bytes = None  # the device's memory, once asked (_device_total)
        self.released_for_compile = False  # a shared phase handed back while the runner compiles
        self.compile_handbacks = 0
        self.randomness = {"handling": "none"}  # check_randomness's finding about the reference's forward
        self.fingerprint = None  # the process before the task's import, where the judge may stay (run)
        self.task_sha256 = None  # the task file's SHA-256 as this judge read it, where it may stay (run)
        self.task_where = None  # the task file's real path, beside its SHA-256 (run, _held_key)
        self.runner = None  # the RunnerLink, once the runner is started (_serve)

    # -- stage bracketing -------------------------------------------------
    def stage(self, name, fn):
        try:
            self._stage(name, fn)
        finally:
            if self.runner is not None:
                self.runner.drop_spare()  # a stage's kept answer spare is not held into the next stage

    def _stage(self, name, fn):
        self.current_stage = name
        self.chan.send({"type": kinds.MSG_STAGE, "stage": name, "status": "begin"})
        t0 = time.perf_counter()
        try:
            detail, data = fn()
        except RunnerLost:
            raise
        except StageFailed as exc:
            self.chan.send({"type": kinds.MSG_STAGE, "stage": name, "status": "fail",
                            "ms": (time.perf_counter() - t0) * 1e3,
                            "detail": str(exc.args[0]), "error": exc.args[1] if len(exc.args) > 1 else None})
            raise
        except BaseException as exc:  # noqa: BLE001 — everything the candidate raises is data
            self.chan.send({"type": kinds.MSG_STAGE, "stage": name, "status": "fail",
                            "ms": (time.perf_counter() - t0) * 1e3,
                            "detail": f"{type(exc).__name__}: {str(exc)[:500]}",
                            "error": describe_exception(exc)})
            raise StageFailed(name) from exc
        if _kernel_service is not None and _kernel_service.facts["requests"] and isinstance(data, dict):
            # The trusted compile cache's counts so far (kernelcache.Service): what the bench adds up.
            data = dict(data, kernel_cache_use=dict(_kernel_service.facts, reasons=_kernel_service.reasons[:4]))
        self.chan.send({"type": kinds.MSG_STAGE, "stage": name, "status": "ok",
                        "ms": (time.perf_counter() - t0) * 1e3, "detail": detail,
                        "data": _finite(data)})

    # -- stages -------------------------------------------------------------
    def parse(self):
        with open(self.job["candidate"], "rb") as f:
            self.source = f.read()
        # The file every traceback names: where this process writes these bytes for the runner, which compiles
        # them under that name (transport.source_path; runner.py load), so that kgym keeps the judge's frames
        # and the runner's alike as the candidate's.
        named = _source_path(self.job)
        try:
            self.tree = ast.parse(self.source, filename=named)
        except SyntaxError as exc:
            raise StageFailed(f"SyntaxError: {exc.msg} (line {exc.lineno})", {
                "type": "SyntaxError", "module": "builtins", "message": exc.msg,
                "frames": [{"file": named, "line": exc.lineno or 0,
                            "function": "<module>", "code": (exc.text or "").rstrip()[:300]}],
                "triton_compile": False})
        return "", {"lines": self.source.count(b"\n") + 1}

    def static(self):
        from . import language, tasks

        # The candidate language (docs/candidate-language.md): the job's policy may carry its own (tests), else the
        # repository's policy/language.json, loaded once by the zygote.  The task's own input kinds type
        # ModelNew.__init__ and forward.
        model_new = None
        kernels = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef) and node.name == "ModelNew" and node in self.tree.body:
                model_new = node
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for dec in node.decorator_list:
                    target = dec.func if isinstance(dec, ast.Call) else dec
                    name = ast.unparse(target)
                    if name in ("triton.jit", "jit", "tl.jit", "triton.language.jit"):
                        kernels.append({"name": node.name, "line": node.lineno})
                        break
        facts = {"model_new": model_new is not None, "kernels": kernels,
                 "model_new_line": model_new.lineno if model_new else None,
                 "precision": _precision_ops(self.tree)}
        if model_new is None:
            raise StageFailed("the module defines no top-level `class ModelNew`", None)
        if not kernels:
            raise StageFailed("the module defines no @triton.jit kernel: the computation must be written in Triton (a "
                              "kernel is a def decorated with @triton.jit; `f = triton.jit(f)` is not one)", None)
        # A module without ModelNew or a kernel is not a candidate at all (verdict invalid, above); every other one
        # is checked against the language.
        data = self.policy.get("language")
        lang = language.Language(data) if isinstance(data, dict) else language.load()
        findings = language.check(self.tree, lang, signature=tasks.signature(self.task), source=self.source)
        for f in findings:
            self.guards.findings.append(dict(f, stage="static", variant=None))
        names = ", ".join(k["name"] for k in kernels)
        facts["findings"] = len(findings)
        if not findings and _kernel_service is not None and self.device.startswith("cuda"):
            # The trusted compile cache serves a candidate the language accepted whole (kernelcache.py).
            from . import kernelcache

            skeleton, named = language.kernel_skeleton(self.tree, self.source, lang)
            _kernel_service.begin(skeleton, named if skeleton else (), _runner_owner(self.job))
            facts["kernel_cache"] = kernelcache.namespace(skeleton)[:16] if skeleton else f"none: {named}"[:200]
        # The judge's own list of the candidate's kernels (from the source, not from the runner): a profiled
        # kernel counts as the candidate's only under one of these names.
        self.kernel_names = {k["name"] for k in kernels}
        hacks = [f for f in findings if self.severity(self.policy, f["type"]) == "hack"]
        if hacks and self.policy.get("stop_on_static_findings", True):
            raise StageFailed(f"{len(hacks)} reward-hack policy finding(s), first line {hacks[0]['line']}: "
                              f"{hacks[0]['message']}", None)
        return f"{len(kernels)} @triton.jit kernel(s): {names}", facts

    def compile(self):
        from . import tasks

        # The candidate is imported in the runner, never here: the bytes checked above go to the source folder,
        # which the runner cannot change, and in ``load``, which the runner compiles (checked bytes = executed
        # bytes, docs/threat-model.md).
        self.source_file = _write_source(self.job, self.source)
        reply, _ = self.runner.ask({"cmd": kinds.CMD_LOAD, "source": self.source.decode("utf-8", "surrogateescape"),
                                    "name": _file_name(self.job)})
        if reply.get("type") != kinds.REPLY_OK:
            if reply.get("error"):
                raise RemoteError(reply["error"])
            raise StageFailed(str(reply.get("message") or "the runner could not load the candidate")[:500], None)
        budget = self.job.get("tiny_budget") or 4096
        sizes = tasks.plan_sizes(self.task, budget)
        self.tiny = tasks.Variant(name="tiny", sizes=sizes, seed=int(self.job.get("seed", 42)),
                                  transform="none", dtype=None,
                                  description=f"tiny sizes (≤{budget} elements per tensor)")
        with self.gpu("shared"):
            init, _inputs = tasks.build(self.task, self.tiny, self.device)
            self.runner.construct(init, self.tiny.seed, None, sizes=self.tiny.sizes).drop()
        return "", {"tiny_sizes": sizes}

    def shared_or_alone(self, fn, ran_out=None):
        """``fn()`` in a shared GPU phase.  Out of memory there (``fn`` raises it, or ``ran_out(result)`` says
        the result reports it) may be other evaluations' memory, not this one's appetite: ``fn()`` runs once
        more with the GPU to itself (and this process's cached blocks given back), where an out-of-memory
        error is this evaluation's own.  What the runtime checks found in the attempt that ran out is not
        evidence (a check that could not allocate, a comparison cut short) and is dropped.
        Returns (result, whether it was run alone)."""
        can_retry = self.arbiter and self.device.startswith("cuda")
        findings = len(self.guards.findings)
        try:
            with self.gpu("shared"):
                result = fn()
        except Exception as exc:  # noqa: BLE001 — only out of memory is retried
            if not (can_retry and is_out_of_memory(exc)):
                raise
        else:
            if not (can_retry and ran_out is not None and ran_out(result)):
                return result, False
        import gc

        import torch

        del self.guards.findings[max(findings, self.sent_findings):]
        if self.runner is not None:
            self.runner.drop_spare()
        gc.collect()
        torch.cuda.empty_cache()
        with self.gpu("exclusive", "out_of_memory_retry"):
            return fn(), True

    def shared_variant(self, v):
        """Runs one variant in a shared GPU phase, alone if it ran out of memory there (shared_or_alone)."""
        result, alone = self.shared_or_alone(lambda: self.run_variant(v), _out_of_memory)
        if alone:
            result["retried_alone"] = True
        return result

    def refuse_task(self, kind, message):
        """The task itself cannot be evaluated (not the candidate's fault): a task_error, which result.c turns into
        the request's error, no verdict."""
        self.chan.send({"type": kinds.MSG_TASK_ERROR, "error": {
            "type": kind, "module": "kgym", "frames": [], "triton_compile": False, "message": message}})

    def tiny_run(self):
        try:
            result = self.shared_variant(self.tiny)
        except _DegenerateTask as exc:
            # The task's fault, not the candidate's: kgym refuses the task (result.c: a task_error is the request's
            # error, no verdict), where before an honest kernel that launched nothing on nothing was `hacked`.
            self.refuse_task("DegenerateTask", str(exc))
            raise StageFailed(str(exc), None) from None
        if result["status"] == "candidate_raised":
            # The sizes it raised at: the task's own are larger, and a kernel that assumes them (a tl.dot whose K is
            # a head dimension padded to its next power of two, 8 here) needs to know which ones it met.
            sizes = ", ".join(f"{k}={n}" for k, n in self.tiny.sizes.items())
            # Beside the message, not in it (the exception's own words stay as raised; the feedback prints this
            # after them, however long they are).
            error = dict(result["error"], inputs=f"on the tiny run's inputs, sizes {sizes or 'as the task states them'}")
            raise StageFailed(error["type"] + ": " + error["message"][:300], error)
        return "", result

    def correctness(self):
        from . import tasks

        half = self.job.get("half") or []
        variants = tasks.make_variants(self.task, self.device, self.job.get("budget"),
                                       half_precision=half, base_seed=int(self.job.get("seed", 42)))
        # The variants added for the task's outputs and models (ties, parameters) run at scaled_x2's sizes.
        values = next((v for v in variants if v.name == "scaled_x2"), variants[0])
        if getattr(self, "index_output", False):
            # An index output (the tiny run's reference gave an integer tensor): which index a tie returns is part
            # of the result, and random floats never tie (tasks.TIES).
            variants.append(tasks.ties_variant(values.sizes, values.seed))
        if self.has_constant_parameters():
            # A parameter built with one value everywhere (a norm's affine weight and bias) is never anything else
            # in the other variants (tasks.PARAMETERS).
            variants.append(tasks.parameters_variant(values.sizes, values.seed))
        wanted = self.job.get("variants")
        if wanted:
            variants = [v for v in variants if v.name in wanted or v.name in ("fp16", "bf16")]
        self.variants = variants
        # The structure of the task's inputs every variant keeps (tasks.input_structure), for the result.
        self.chan.send({"type": kinds.MSG_INPUT_STRUCTURE,
                        "inputs": [st.facts() for st in tasks.input_structure(self.task) if st.kinds]})
        # What this evaluation will hold on its device from now until it ends (every variant's larger stage figure;
        # timing runs base): kgym's arbiter lets it go on only when that fits beside the others.  Under
        # KGYM_STAGE_RESERVE=1 (_stage_reserve: measured, no gain) each stage reserves its own instead (reserve_for).
        # Memory is arbitrated where the judge reports the device's size (CUDA); elsewhere the figures are only noted.
        feet = [tasks.stage_footprints(self.task, v.sizes) for v in variants]
        self.stage_reserve = {"correctness": max((f["correctness"] for f in feet), default=0),
                              "timing": feet[0]["timing"] if feet else 0}
        if not _stage_reserve():  # the default: every variant's larger figure, from here to the end
            self.stage_reserve = dict.fromkeys(self.stage_reserve, max((max(f.values()) for f in feet), default=0))
        self.reserve_for("correctness")
        # What kgym must see reported before it can pass the candidate (src/eval/result.c): a message for every
        # variant named here.  ``shrunk``: the base variant's sizes are below the task's own (the CPU budget).
        own = tasks.size_constants(self.task)
        self.chan.send({"type": kinds.MSG_VARIANT_PLAN, "variants": [v.name for v in variants],
                        "shrunk": bool(variants) and any(variants[0].sizes.get(k, n) < n for k, n in own.items()),
                        "task_sizes": own})
        ran = 0
        repeat, compared = None, None
        stopped = None  # kgym's reason where it said the stage had failed (variant_go): no more variants then
        every = bool(self.job.get("all_variants"))
        for k, v in enumerate(variants):
            result = self.shared_variant(v)
            plain = tasks.plain_fallback(v, variants) if result["status"] == "reference_failed" else None
            if plain is not None:
                # The reference cannot take small_odd's signed inputs: its odd sizes are tested on the task's own.
                result = self.shared_variant(plain)
                v = plain
            if result.get("repeat_checks") is not None:
                repeat = result.pop("repeat_checks")
            if compared is None and result["status"] == "ran" and v.dtype is None:
                compared = v
            self.chan.send(dict(result, type=kinds.MSG_VARIANT))
            if result["status"] == "candidate_raised":
                raise StageFailed(f"the candidate raised on variant {v.name}", result["error"])
            ran += 1
            if not every and k + 1 < len(variants):
                # Once a variant has failed the stage, no later one can pass it: kgym's rule (C decides which
                # variant failed, after the float64 adjudication and the small-elements check) says whether to go
                # on, and the variants left are the result's correctness.not_run.  --all-variants runs them all.
                answer = self.chan.request({"type": kinds.MSG_VARIANT_GO})
                if answer.get("type") == kinds.MSG_VARIANT_GO and answer.get("go") is False:
                    stopped = str(answer.get("why") or "")
                    break
        if repeat is None and compared is not None and stopped is None:
            # The base variant's reference failed, so its repeat checks never ran: they run on the first variant
            # that was compared instead (kgym requires them for a pass; a stage that has failed needs none).
            repeat, _alone = self.shared_or_alone(
                lambda: self.repeat_checks(compared, lambda checks: self.repeat_checks_apart(compared, checks)))
        if repeat is not None:
            self.chan.send(dict(repeat, type=kinds.MSG_REPEAT_CHECKS))
        # Whether some variant repaired a task that is degenerate on its own inputs (C refuses a pass where
        # none did: a constant or zero output must not pass).
        self.chan.send({"type": kinds.MSG_DEGENERACY, "facts": self.degeneracy.facts()})
        detail = f"{ran} variants ran"
        if stopped is not None:
            detail += f"; stopped after a failed one ({stopped[:200]}): {len(variants) - ran} not run"
        return detail, {"variants": [v.name for v in variants]}

    # -- the GPU arbiter ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def gpu(self, mode, purpose=None):
        """A GPU phase: kgym's arbiter grants it (``shared`` for compile, tiny run and correctness, which
        many evaluations run at once; ``exclusive`` for timing and profiling, which must have the GPU to
        themselves).  Queued GPU work is finished before the phase is handed back.  ``purpose`` names what
        the phase is for (timing_round, clock_block, profile, out_of_memory_retry): kgym reports the time
        held per purpose, which is where an evaluation's exclusive GPU time goes."""
        if self.arbiter:
            self._acquire(mode, purpose)
        # No arbiter: kgym's re-run alone, which holds the whole GPU for this evaluation (or the CPU).
        self.gpu_mode = mode if self.arbiter else "exclusive"
        from ..shared import cudashare

        # An exclusive window's waits spin (cudashare.spinning says why).
        waits = (cudashare.spinning() if self.gpu_mode == "exclusive" and self.device.startswith("cuda")
                 else contextlib.nullcontext())
        try:
            with waits:
                yield
        finally:
            self.gpu_mode = None
            _give_back_device_memory(self.device)
            if self.arbiter and not self.released_for_compile:
                self.chan.send({"type": kinds.MSG_GPU_RELEASE, "peak_bytes": self._take_peak()})
            self.released_for_compile = False

    @contextlib.contextmanager
    def gpu_if_device(self, mode, purpose):
        """gpu(mode, purpose) on a CUDA device with kgym's arbiter; elsewhere nothing."""
        if self.arbiter and self.device.startswith("cuda"):
            with self.gpu(mode, purpose):
                yield
        else:
            yield

    def wind_down(self, census):
        """Before the runner is told to exit: whether the wind-down holds a shared phase (_wind_down_plan), said to
        kgym (the result's ``gpu_phases.wind_down``), and the phase asked for when it does."""
        if not (self.arbiter and self.device.startswith("cuda")):
            plan = {"phased": False, "why": "no GPU phases here"}
        elif self.gpu_mode is not None:
            plan = {"phased": False, "why": f"a {self.gpu_mode} phase is still held"}
        else:
            try:
                plan = _wind_down_plan(self.device, census)
            except Exception as exc:  # noqa: BLE001 — a plan that breaks is phased, and the runner still told to exit
                plan = {"phased": True, "why": f"the plan failed: {type(exc).__name__}: {exc}"[:200]}
        # The pids it was given, for kgym's tests (the census answer is not among the lines kgym keeps).
        plan = dict(plan, type=kinds.MSG_WIND_DOWN, runner_pid=census.get("runner_pid"),
                    judge_pid=census.get("judge_pid"))
        try:
            self.chan.send(plan)
        except Exception:  # noqa: BLE001 — kgym gone: nothing to hold
            return
        if plan["phased"]:
            self.hold_until_exit()

    def hold_until_exit(self):
        """A shared phase asked for and never given back: kgym lets it go once the judge and the runner have
        exited (their CUDA contexts torn down)."""
        if self.arbiter and self.device.startswith("cuda") and self.gpu_mode is None:
            try:
                self.current_stage = None
                self._acquire("shared", "exit")
                self.gpu_mode = "shared"
            except Exception:  # noqa: BLE001 — kgym gone: nothing to hold
                pass

    def reserve_for(self, stage):
        """From the next GPU phase on, the evaluation reserves ``stage``'s figure (stage_reserve, set by the
        correctness stage from tasks.stage_footprints).  Where it differs from what is reserved now, the next
        acquire says "renew": kgym gives the old reservation back and the new one waits in line as a first one
        (src/supervisor/supervisor.c).  Under KGYM_STAGE_RESERVE=1 a reduction so holds one input set's room
        through its correctness variants and three only for its short timing stage; by default (_stage_reserve)
        both stages' figures are the larger one and nothing is renewed after the first."""
        want = self.stage_reserve.get(stage, 0)
        if want != self.reserve_bytes:
            self.reserve_renew = True
        self.reserve_bytes = want

    def _acquire(self, mode, purpose=None):
        stage = getattr(self, "current_stage", None)
        msg = {"type": kinds.MSG_GPU_ACQUIRE, "mode": mode, "stage": stage, "purpose": purpose or stage,
               "reserve_bytes": self.reserve_bytes, "device_total_bytes": self._device_total()}
        if self.reserve_renew:
            msg["renew"] = True
            self.reserve_renew = False
        self.chan.send(msg)
        reply = self.chan.recv()
        if reply.get("type") != kinds.MSG_GPU_GRANT:
            raise RuntimeError(f"kgym did not grant the GPU: {reply}")

    def compile_handback(self, phase):
        """A shared phase is handed back while Triton compiles in the runner (seconds of CPU work, no GPU):
        otherwise an exclusive request (another evaluation's timing) waits for the compile to end, and every
        new shared phase waits behind it.  The runner says when a compile begins (its queued GPU work
        finished) and ends (then it waits for the judge's "resume"): the phase is asked for again before
        that.  Exclusive phases are kept: a compile there is rare (a new specialisation while timing) and
        giving one back would mean waiting for the GPU to empty again.  The runner is not trusted with
        this: what it could gain by lying it can do anyway (launch work outside any phase from a thread of
        its own), a phase it gave back and never asked for again is asked for here ("restore") before the
        judge goes on, and hand-backs stop after _MAX_COMPILE_HANDBACKS (each is two lines kgym keeps)."""
        if not self.arbiter:
            return
        if phase == "begin":
            if self.gpu_mode != "shared" or self.released_for_compile:
                return
            if self.compile_handbacks >= _MAX_COMPILE_HANDBACKS:
                return
            self.compile_handbacks += 1
            if self.device.startswith("cuda"):
                import torch

                torch.cuda.synchronize()  # the judge's own queued work ends inside the phase too
            self.chan.send({"type": kinds.MSG_GPU_RELEASE, "why": "triton_compile"})
            self.released_for_compile = True
        elif self.released_for_compile:  # "end", or "restore" after an answer
            self.released_for_compile = False
            self._acquire("shared")

    def _take_peak(self):
        """The most device memory this evaluation held since the last call (kgym's ``gpu_phases.peak_bytes``,
        set against the footprint it reserved): the judge's allocator peak and its shared blocks, plus the
        runner's allocator peak as it reports it (evidence, used only for that figure).  The sum of the two
        processes' peaks bounds their peak together from above."""
        if not self.device.startswith("cuda"):
            return 0
        from ..shared import cudashare

        return (cudashare.allocator_peak() + cudashare.take_peak()
                + (self.runner.take_peak() if self.runner is not None else 0))

    def _device_total(self):
        """The device's memory in bytes, for kgym's arbiter (0 off CUDA or when the driver will not say)."""
        if self._total_bytes is None:
            self._total_bytes = 0
            if self.device.startswith("cuda"):
                try:
                    import torch

                    self._total_bytes = int(torch.cuda.get_device_properties(torch.device(self.device)).total_memory)
                except Exception:  # noqa: BLE001 — a context that failed shows in the stage itself
                    pass
        return self._total_bytes

    def gpu_purpose(self, purpose):
        """Says what the GPU phase held now is used for from here on (kgym splits the held time by it)."""
        if self.arbiter:
            self.chan.send({"type": kinds.MSG_GPU_PURPOSE, "purpose": purpose})

    def timing(self):
        """The timing protocol of docs/evaluation-protocol.md (see timing.py), hardened against the timing
        exploits of docs/threat-model.md: a new input set drawn from the task for every timed call (nothing to
        replay), in a block of the judge's with canaries read back after every call; a persisting-L2 reset and
        an L2 flush before every call; a device-wide synchronize before the end event (side streams are
        counted); every timed output described by the runner (shape, dtype, non-finite values, aliasing) and a
        sample of them compared with the reference on the same inputs (work skipped while timed is caught); a
        candidate-only block whose real duration kgym bounds with its own clock; the bytes and FLOPs the task
        must move for kgym's speed-of-light floor.  Rounds run in exclusive GPU windows; kgym decides after the planned rounds
        whether the figures are stable enough or more rounds are needed (``timing_check``)."""
        import torch

        from ..shared import timing as tm
        from . import compare, tasks

        # kgym decides whether the candidate passed; an incorrect one is not worth exclusive GPU time.  (No
        # answer, e.g. an older kgym: time it anyway, kgym ignores the figures of a failed evaluation.)
        go = self.chan.request({"type": kinds.MSG_TIMING_GO})
        if go.get("type") == kinds.MSG_TIMING_GO and go.get("go") is False:
            return "not timed: " + str(go.get("why") or "the correctness variants did not all pass")[:300], {}
        base = self.variants[0]
        self.reserve_for("timing")
        cfg = self.job.get("timing") or {}
        warmup, rounds, iters = int(cfg.get("warmup", 10)), int(cfg.get("rounds", 3)), int(cfg.get("iters", 50))
        ref_mode = cfg.get("reference_mode") or "eager"
        time_reference = True
        alone = False
        if cfg.get("reference_cache"):
            # kgym keeps the reference's times per task, GPU, dtype and protocol: on a hit only the candidate
            # is timed, and kgym supplies the reference's samples itself.  On a miss the reference is timed
            # alone at the start of the exclusive window (reference_alone), before any call of the candidate's
            # there, and those samples are what kgym keeps: none taken beside a candidate's calls, whose load
            # shapes them, serves another evaluation.
            import triton

            answer = self.chan.request({"type": kinds.MSG_REFERENCE_CACHE_LOOKUP, "gpu": torch.cuda.get_device_name(),
                                        "dtype": base.dtype or "float32",
                                        # the sizes the task's constants gave (a task that sizes itself from its
                                        # environment keys other times: red team 7)
                                        "sizes": base.sizes,
                                        "torch": torch.__version__, "triton": triton.__version__,
                                        # a reference judged with its dropout off runs another forward
                                        "task_mode": self.randomness.get("handling", "none")})
            time_reference = not (answer.get("type") == kinds.MSG_REFERENCE_CACHE and answer.get("hit"))
            alone = time_reference
        want_profile = bool(cfg.get("profile", True))
        mismatched, rerun_wrong, stale, checked, overwritten = [], [], [], [0], []
        flops_error = [None]  # why the FLOP count (the speed-of-light floor's second half) is missing

        def setup():
            init, inputs = tasks.build(self.task, base, self.device)
            ref = self.reference(init, base.seed, sizes=base.sizes)
            cand = self.runner.construct(init, base.seed, None, sizes=base.sizes)
            ref_out, ref_writes[0] = _reference_writes_inputs(ref, inputs)
            min_bytes = sum(x.numel() * x.element_size() for x in inputs if torch.is_tensor(x))
            cand.answer_bytes = sum(t.numel() * t.element_size() for t in _tensor_list(ref_out))
            min_bytes += cand.answer_bytes
            expect[:] = [(list(t.shape), str(t.dtype).replace("torch.", "")) for t in _tensor_list(ref_out)]
            # Whether the timed calls' samples are held to the small-elements bound too (on_pair): decided here,
            # in the shared phase, from the task's own output as the base variant's tolerance decides it.
            tail_announced[0] = self.tolerances(ref_out, base).tail is not None
            del ref_out
            flops = 0
            try:
                # FLOPs of the reference (matmuls, convolutions): the second half of kgym's speed-of-light floor.
                from torch.utils.flop_counter import FlopCounterMode

                with torch.no_grad(), FlopCounterMode(display=False) as counter:
                    ref(*_clone_args(inputs))
                flops = int(counter.get_total_flops())
            except Exception as exc:  # noqa: BLE001 — no FLOP formula for some op: the bytes floor still applies
                if is_out_of_memory(exc):
                    raise
                flops_error[0] = f"{type(exc).__name__}: {exc}"[:300]
            timed_ref = ref
            if ref_mode == "compile" and time_reference:
                timed_ref = torch.compile(ref)
                with torch.no_grad():
                    timed_ref(*_clone_args(inputs))  # compiles here, not inside a timing window
            return ref, cand, timed_ref, min_bytes, flops

        expect = []  # the reference output's (shape, dtype) per tensor, which every timed output must have
        tail_announced = [False]
        ref_writes = [False]  # the reference writes into its inputs (setup): the full rule draws a call's set again
        tail_trips = [0]  # checked calls whose sample agreed but for its tiny elements (SAMPLE_TAIL)
        (ref, cand, timed_ref, min_bytes, flops), _alone = self.shared_or_alone(setup)

        def make_inputs(seed):
            """A whole input set of the task's own from ``seed`` (the timer draws one per call)."""
            v = tasks.Variant(base.name, base.sizes, seed, base.transform, base.dtype, base.description)
            return _Inputs(tasks.build(self.task, v, self.device, keep_structure=base.transform != "none")[1], seed)

        def must_check(meta):
            return _output_problem(meta, expect)

        def on_pair(call, ref_args, ref_out, remote, meta=None):
            checked[0] += 1
            tol = self.tolerances(ref_out, base, tail=False)
            atol, rtol = tol.atol, tol.rtol
            # A random sample of positions first (cheap: only those values cross from the runner, and the
            # positions are drawn after the call, so the runner could not know them while it computed); the
            # full output when the sample disagrees or cannot be taken, or when the runner's description of
            # the output differs from the reference's (shape, dtype) or holds non-finite values a sample may
            # miss, so a wrong output is judged exactly as in correctness (below the floor: the relative check
            # too, adjudicated in float64).
            # Where the task's outputs announce the small-elements check, the sample's tiny elements are held to
            # it too (a candidate exact while checked and cutting its small elements once timed: threat model rows
            # 26 and 27); a sample that agrees but for them goes to the full rule, which holds the check itself.
            # Elements the full rule leaves out (ill-conditioned) may trip the sample on honest outputs: the first
            # TIMED_TAIL_FULL such calls always get the full rule, later ones with probability
            # TIMED_TAIL_LATER, drawn after the call (docs/evaluation-protocol.md, "Small elements").
            if _output_problem(meta, expect) is None:
                t0 = time.perf_counter()
                agrees = _sample_agrees(remote, ref_out, tol, timer.random.getrandbits(63), tail=tail_announced[0])
                timer.overhead["sample_ms"] += (time.perf_counter() - t0) * 1e3
                if agrees == SAMPLE_TAIL:
                    tail_trips[0] += 1
                    if tail_trips[0] > TIMED_TAIL_FULL and timer.random.random() >= TIMED_TAIL_LATER:
                        return
                elif agrees:
                    return
            if ref_writes[0] and isinstance(ref_args, _Inputs):
                # The timed reference ran on this very set (no copy inside the window) and wrote into it: the float64
                # adjudication, the small-elements check and the untimed re-run below need the set as the call got it.
                ref_args = make_inputs(ref_args.seed)
            cand_out = remote.fetch()
            # The full rule's, the small-elements check decided: held wherever the base's output announced it (as the
            # sample was), not only where this call's fresh output does so on its own.
            tol = self.tolerances(ref_out, base, announced=tail_announced[0])
            if self.output_passes(tol, ref, ref_args, ref_out, cand_out):
                return
            mismatched.append(call)
            if len(rerun_wrong) or len(mismatched) > 1:
                return
            # Wrong while timed: a skip-work exploit, or simply a kernel that is wrong on these fresh inputs
            # (a bug the correctness variants did not hit).  Re-run it untimed on the same inputs: wrong
            # there too means a plain bug, reported as a failed correctness variant, not a hack.
            again = cand(*_clone_args(ref_args))
            torch.cuda.synchronize()
            facts = _finite(compare.compare(ref_out, again, atol, rtol, tol.relative_atol))
            if not self.output_passes(tol, ref, ref_args, ref_out, again, facts):
                # Wrong again.  A bug gives other wrong outputs for other inputs; a candidate that stopped
                # computing and hands back an old result gives the same output whatever the inputs.  One more
                # call on other inputs tells them apart (unless the task's own output ignores its inputs).
                again = _clone_out(again)
                other = make_inputs(10**6 + 1 + (call if isinstance(call, int) else 10**5))
                other_out = cand(*_clone_args(other))
                ref_other = ref(*_clone_args(other))
                torch.cuda.synchronize()
                if (_passes(compare.compare(again, other_out, 0.0, 0.0)) and
                        not _passes(compare.compare(ref_out, ref_other, atol, rtol))):
                    stale.append(call)
                    return
                rerun_wrong.append({"type": kinds.MSG_VARIANT, "name": "timed_inputs", "sizes": base.sizes,
                                    "dtype": None, "description": "the inputs of a timed call (another seed), re-run untimed",
                                    "status": "ran", "compare": facts, "atol": atol, "rtol": rtol,
                                    "tolerance": _finite(tol.facts()), "error": None})

        def on_overwrite(call, hits):
            if not overwritten:
                overwritten.append(call)
                self.guards.add("out_of_bounds_write", "timing", base.name,
                                _overwrite_message(hits[0], "a timed call's"),
                                {"call": call, "writes": hits[:8]})

        def call_block():
            # The runner holds no input set: the judge draws a new set for every timed call (CrossTimer) and
            # copies it into this block of its own, mapped by the runner, before the call; the canaries around
            # the set's tensors are read back after every call.  Where device blocks cannot be shared, each
            # call's values go with it through host memory, with no canaries.
            first = make_inputs(timer_seed())
            block = None
            if self.runner.share:
                block, views = self.runner.tp.InPlace.make(first, share=True)
            label = self.runner.label(base.name)
            dtypes = sorted({d for _s, d in expect})
            # "profile": the runner sets its profiler up here, in the shared phase (the clock block is profiled)
            reply, _ = self.runner.ask({"cmd": kinds.CMD_TIMING_INPUTS, "flush": bool(cfg.get("flush", True)),
                                        "variant": label, "output_dtypes": dtypes, "profile": want_profile},
                                       views if block is not None else None, in_place=block)
            if reply.get("type") != kinds.REPLY_OK:
                raise RemoteError(reply.get("error") or {"type": "RuntimeError", "message": str(reply)[:500]})
            cand.l2 = reply.get("l2")
            # the judge's side of a checked call loaded here too, not in the exclusive window (_warm_checks)
            for dtype in dtypes:
                x = torch.zeros(tm.SAMPLES + 1, dtype=getattr(torch, dtype, torch.float32), device=self.device)
                (i,) = tm.sample_positions([x.numel()], 0, self.device)
                compare.sample_agrees([x[i]], [x[i]], 0.0, 0.0, samples=tm.SAMPLES, relative_atol=0.0)
            return block

        def timer_seed():
            return int.from_bytes(os.urandom(8), "little") >> 2

        block, _alone = self.shared_or_alone(call_block)
        cand.stage = "timing"
        timer = tm.CrossTimer(timed_ref if time_reference else None, cand, make_inputs, block=block,
                              flush=cfg.get("flush", True), check_every=int(cfg.get("check_every", 5)),
                              on_pair=on_pair, ref_untimed=ref, on_overwrite=on_overwrite, must_check=must_check)
        self.chan.send({"type": kinds.MSG_TIMING_SETUP, "gpu": torch.cuda.get_device_name(), "sizes": base.sizes,
                        "min_bytes": min_bytes, "flops": flops, "warmup": warmup, "iters": iters,
                        "planned_rounds": rounds, "reference_mode": ref_mode,
                        "time_reference": bool(time_reference), "reference_alone": alone,
                        "fresh_inputs": timer.fresh,
                        "input_sets": timer.input_sets, "input_mode": "fresh_set_per_call",
                        "canaries": block is not None,
                        "flush_bytes": timer.flusher.nbytes if timer.flusher else 0,
                        "l2_bytes": tm.l2_bytes()})
        all_ref, all_cand, all_ref_dev, all_cand_dev = [], [], [], []
        done = 0

        round_ms = float(cfg.get("round_ms") or 0)
        if not time_reference or alone:
            # The reference's samples come from kgym's cache, or (alone) from its own rounds below: a round holds
            # one side's calls alone, and half a round's budget gives it as many calls as its half of a round of
            # pairs did (the same precision, half the exclusive time).
            round_ms /= 2
        # rewarm: the next round warms up for the whole warm_ms (a limit appeared that the warm-up had not met);
        # lost: how many rounds this window lost so (at most _MAX_BROKEN_ROUNDS are watched for)
        rewarm, lost = [False], [0]
        gpu_state = _gpu_state(self.device)

        def one_round(warm):
            """One round after its warm-up (``warm`` calls; by time for a first one); returns whether it counts."""
            nonlocal done
            self.gpu_purpose("timing_round")
            # The first round warms up by time (warm_ms, at least 2 pairs; see PairTimer.warm).  Later rounds follow
            # it in the same exclusive window with nothing but a message to kgym between them, or the clock block
            # (block_after below: ~20 ms of the candidate's calls back to back, then the profiler's stop and summary
            # and one reference call, a few ms), so the GPU is as warm as at the first round's end: they warm up
            # with no calls (``warm`` is 0; a couple of calls each cost a 92 ms candidate 0.37 s of exclusive time
            # and measured nothing).  The block's calls are not watched: a limit they brought on shows in the next
            # round, which then does not count (below) and is followed by a whole warm-up.
            first = (done == 0 or rewarm[0]) and round_ms > 0
            # A first warm-up may end early where the judge reads (NVML) that the GPU is at its clock and nothing
            # holds it down (tm.GpuState; cfg warm_settle false: never), as a light kernel's is within the first
            # call; a heavy one that meets its power limit in it warms up for the whole warm_ms.  The warm-up's
            # end state is then watched through the rounds (timer.watch): a candidate whose warm-up calls were
            # light and whose timed calls are heavy meets a limit there, and such a round does not count (below).
            state = gpu_state if first and not rewarm[0] and cfg.get("warm_settle", True) else None
            timer.warm(warm, warm_ms=float(cfg.get("warm_ms", 250)) if first else 0.0, state=state)
            if first:
                # Watched after any warm-up, early-ended or whole (a candidate light for 250 ms and heavy after
                # gains the same ~80 ms), against the reasons the warm-up ended with (a heavy kernel's power cap,
                # met in its warm-up, is its steady state, not news).
                watch = gpu_state is not None and lost[0] < _MAX_BROKEN_ROUNDS
                base = gpu_state.reasons() if watch else 0
                timer.watch = gpu_state if watch and base >= 0 else None
                timer.watch_base = base & tm.HELD_BELOW if base >= 0 else 0
                rewarm[0] = False
            # Slow kernels get fewer calls a round (at least tm.MIN_ROUND_CALLS), so a round costs about round_ms:
            # a 20 ms GEMM is measured as precisely with 3 calls as a 20 us one with 50.  The pace is the fastest
            # the timer has seen, warm-ups and rounds (CrossTimer.pace_ms): a round that outran its warm-up's pace
            # sizes the next (red team 28).
            n = timer.round_size(iters, round_ms)
            self.chan.send({"type": kinds.MSG_TIMING_ROUND, "round": done, "status": "begin", "iters": n})
            before = dict(timer.overhead)
            ref_ms, cand_ms, ref_dev, cand_dev = timer.round(n)
            # A clock limit the warm-up had not met appeared during the round: its calls ran before the
            # candidate's own steady state (faster than it runs).  The round is reported, flagged, counted nowhere
            # (not in the samples below, not in kgym's re-measuring), and the next round warms up for the whole
            # warm_ms first (watched again, up to _MAX_BROKEN_ROUNDS lost a window).
            broken = timer.watch is not None and tm.new_limit(timer.round_reasons, timer.watch_base)
            end = {"type": kinds.MSG_TIMING_ROUND, "round": done, "status": "end",
                   "reference_ms": ref_ms, "candidate_ms": cand_ms,
                   "reference_device_ms": ref_dev, "candidate_device_ms": cand_dev,
                   "warm": _finite(timer.warm_facts),
                   "overhead": {k: timer.overhead[k] - before[k] for k in before}}
            if broken:
                end["warm_broken"] = {"reasons": timer.round_reasons, "warm_reasons": timer.watch_base}
                timer.watch = None
                rewarm[0] = True
                lost[0] += 1
            self.chan.send(end)
            if not broken:
                all_ref.extend(ref_ms)
                all_cand.extend(cand_ms)
                all_ref_dev.extend(ref_dev)
                all_cand_dev.extend(cand_dev)
            done += 1
            return not broken

        # One exclusive window for everything measured: rounds, the clock block and its profile.  Each exclusive
        # grant first waits for every shared phase in progress to end (a Triton compile in another evaluation's
        # tiny run can take seconds) while new shared phases queue behind it, so one window an evaluation costs
        # the others far less than one per round.
        with self.gpu("exclusive", "timing_round"):
            if alone:
                # Its warm-up ends early on the same reading as the candidate's first one (the GPU settled; cfg
                # warm_settle false: never), and its rounds are watched as the candidate's are (a limit that
                # appears in one: the round does not count, the next warms up for the whole warm_ms).
                settle = gpu_state if cfg.get("warm_settle", True) else None
                ref_alone, ref_alone_device = timer.reference_alone(rounds, float(cfg.get("warm_ms", 250)),
                                                                    round_ms, iters, state=settle,
                                                                    max_broken=_MAX_BROKEN_ROUNDS)
                answer = self.chan.request({"type": kinds.MSG_REFERENCE_TIMED, "reference_ms": ref_alone,
                                            "reference_device_ms": ref_alone_device,
                                            "alone": _finite(timer.alone_facts)})
                if answer.get("type") == kinds.MSG_REFERENCE_CACHE and answer.get("hit"):
                    timer.ref = None  # kgym holds the reference's samples now: the candidate is timed alone
                else:
                    round_ms *= 2  # kgym did not take them: rounds of pairs as without a cache
            def clock_block_and_profile():
                med = sorted(all_cand)[len(all_cand) // 2] if all_cand else 1.0
                calls = max(tm.MIN_CLOCK_BLOCK_CALLS, min(tm.MAX_CLOCK_BLOCK_CALLS, int(20.0 / max(med, 1e-3))))
                self.gpu_purpose("clock_block")
                # The block's calls are also the profile's (the share of the forward's device time in the
                # candidate's own kernels): back to back on one input set with nothing of the harness's between
                # them, which is what a profile needs, so the window holds no calls for it alone.  The runner
                # starts its profiler before kgym's clock (clock_prepare) and stops it after (clock_describe).
                timer.clock_block_prepare(profile=want_profile)
                self.chan.send({"type": kinds.MSG_CLOCK_BLOCK, "status": "begin", "calls": calls})
                times = timer.clock_block(calls)
                self.chan.send({"type": kinds.MSG_CLOCK_BLOCK, "status": "end", "calls": calls, "candidate_ms": times})
                # Outside kgym's clock: the canaries read back, the profile stopped and summed up, the output
                # described (the exclusive time from here on is the profile's purpose: what it still costs).
                if want_profile:
                    self.gpu_purpose("profile")
                block_args, block_meta, block_profile = timer.clock_block_finish()
                # The block's last output must be right too: a runner that reports times for calls that
                # computed nothing is caught here, not only by kgym's clock.
                with torch.no_grad():
                    block_ref = ref(*block_args)
                on_pair("clock_block", block_args, block_ref, cand, block_meta)
                del block_args, block_ref
                if want_profile and block_profile is not None and not (rerun_wrong or mismatched or overwritten):
                    # No profile from the runner: no message, and kgym's coverage floor fails closed (unjudged).
                    prof = _own_kernels(block_profile, getattr(self, "kernel_names", set()), _judge_has_stream_ids())
                    # The calls profiled are the block's, as the judge asked for them (not the runner's count): kgym
                    # reads the library kernels' time a call against the timed calls' median (src/eval/timing.c
                    # kg_eval_coverage), which a larger count would shrink.
                    prof["calls"] = calls
                    self.chan.send(dict(_finite(prof), type=kinds.MSG_PROFILE))

            # Where the clock block (and so the profile) runs: after a planned round drawn at random, the first to
            # the last, from the judge's generator (seeded from the operating system; the runner cannot know it),
            # and so always before kgym's first timing_check: the profile can move the figures to the device-wide
            # clock (side-stream time), and the checks must decide on the clock the figure is on (red team 33: a
            # block drawn after the last planned round ran after the checks, which passed two rounds 12% apart
            # on the stream clock).
            # A block always last was the window's last calls, which a forward that counts its calls could locate
            # where the window's shape is predictable, and run a lighter, library-free forward there than in its
            # timed calls (red team 31: tests/fixtures/redteam31/).  Now a forward that switches paths at a count
            # either runs its profiled path in timed rounds too, or is profiled on its timed path.
            block_after = 1 + timer.random.randrange(max(rounds, 1))
            block_done = False
            counted = 0
            while counted < rounds:
                counted += one_round(warmup if done == 0 else 0)
                if rerun_wrong or len(mismatched) > 1 or overwritten:
                    break
                if not block_done and counted >= block_after and not (
                        rerun_wrong or mismatched or overwritten):
                    block_done = True
                    clock_block_and_profile()
                    if rerun_wrong or mismatched or overwritten:
                        break  # the block's output was wrong: no round more
            while not (rerun_wrong or mismatched or overwritten):
                # kgym decides whether the figures are stable (docs/evaluation-protocol.md, "Re-measuring").
                answer = self.chan.request({"type": kinds.MSG_TIMING_CHECK, "rounds": done})
                more = int(answer.get("rounds", 0)) if answer.get("type") == kinds.MSG_TIMING_MORE else 0
                if more <= 0:
                    break
                for _ in range(more):
                    one_round(0)
            if not block_done and not (rerun_wrong or mismatched or overwritten):
                clock_block_and_profile()
        for v in rerun_wrong:
            self.chan.send(v)
        if mismatched and not rerun_wrong:
            self.guards.add("timed_output_mismatch", "timing", base.name,
                            f"{len(mismatched)} of {checked[0]} checked timed calls returned wrong outputs: work "
                            "was skipped or results were reused while being timed"
                            + (" (re-run on other inputs, it returned the very same output)" if stale else ""),
                            {"calls": mismatched[:20], "checked": checked[0], "same_output_for_other_inputs": bool(stale)})
        if block is not None:
            block.release()  # the runner keeps its mapping until it goes; nothing here reads the block again
        self.chan.send({"type": kinds.MSG_TIMING, "reference_ms": all_ref, "candidate_ms": all_cand,
                        "reference_device_ms": all_ref_dev, "candidate_device_ms": all_cand_dev,
                        "gpu": torch.cuda.get_device_name(), "sizes": base.sizes, "min_bytes": min_bytes,
                        "flops": flops, "flops_error": flops_error[0], "fresh_inputs": timer.fresh,
                        "outputs_checked": checked[0], "rounds": done,
                        "l2_persisting": {"judge": timer.l2.facts() if timer.l2 is not None else None,
                                          "runner": cand.l2}})
        return f"{done} round(s) of {iters} calls each", {}

    def output_passes(self, tol, ref, inputs, ref_out, cand_out, facts=None):
        """Whether ``cand_out`` passes against ``ref_out`` by the rule C applies to a correctness variant
        (result.c, variant_result): no element beyond tol's atol, and below the floor no more than tol's share
        beyond its relative tolerance, unless the float64 adjudication finds the candidate as close to the exact
        result as the reference.  ``facts``: compare's facts for this pair when already at hand."""
        from . import compare

        if facts is None:
            facts = compare.compare(ref_out, cand_out, tol.atol, tol.rtol, tol.relative_atol)
        if not _passes(facts, tol):
            if not (_near_miss(facts, ref_out, cand_out) or _relative_miss(facts, tol)):
                return False
            exact_atol = tol.relative_atol if tol.relative_atol is not None else tol.atol
            try:
                exact = _fp64_facts(ref, inputs, ref_out, cand_out, exact_atol, tol.rtol)
            except Exception as exc:  # noqa: BLE001 — no float64 kernel for an op: no adjudication, not a pass
                if is_out_of_memory(exc):
                    raise
                return False
            if exact["mismatches"] != 0:
                return False
        if tol.tail is None:
            return True
        # The small-elements check C requires where announced; kept in the facts, which a failed repeat call
        # reports as its variant's comparison (second_call_wrong).
        facts["tail"] = self.tail_facts(ref, inputs, ref_out, cand_out, tol.atol)
        return facts["tail"].get("mismatches") == 0

    def device_or_host(self, facts_of, failed=None):
        """``facts_of(on_cpu)``'s facts (the float64 adjudication's, the small-elements check's): on the device
        first; out of memory there is raised in a shared phase (shared_or_alone re-runs the variant alone), and
        alone the facts are gathered in host memory (``"device": "cpu"``).  Alone, the float64 copies (twice the
        inputs' size: 12 GiB for level1/24) may still not fit beside what the other evaluations hold between their
        phases; host memory is slower but gives the same verdict whatever the GPU's load, instead of failing the
        candidate's stage with the judge's own allocation (measured: 6 jobs on an H100 turned honest level-1 kernels
        into runtime_error).  Any other failure on the device is ``failed(exc)`` (default: an error fact, which C
        fails); any failure in host memory is an error fact."""
        try:
            return _finite(facts_of(False))
        except Exception as exc:  # noqa: BLE001
            if not is_out_of_memory(exc):
                return (failed or _error_fact)(exc)
            if self.gpu_mode != "exclusive":
                raise
        try:
            return dict(_finite(facts_of(True)), device="cpu")
        except Exception as exc:  # noqa: BLE001
            return _error_fact(exc)

    def tail_facts(self, ref, inputs, ref_out, cand_out, atol):
        """_tail_facts where the device or host memory allows (device_or_host); any failure is an error fact, which
        C fails (the check was announced: no facts, no pass), except the task's own reference refusing to run as
        the check runs it on the device (_ReferenceCannot: skipped).  In host memory that too is an error: the
        retry was forced by device memory, which the candidate's own use takes part in."""
        return self.device_or_host(
            lambda on_cpu: _tail_facts(ref, inputs, ref_out, cand_out, atol, on_cpu=on_cpu),
            lambda exc: _tail_skipped(exc) if isinstance(exc, _ReferenceCannot) else _error_fact(exc))

    def tolerances(self, ref_out, variant=None, tail=True, announced=False):
        """The compare.Tolerance for outputs like ``ref_out`` on ``variant`` (None: the task's own inputs):
        the profile's atol and rtol for the output's dtype (a half-precision variant's: its dtype's), or the
        job's own numbers where it gives them (not for a half-precision variant), scaled to ``ref_out``'s magnitude by compare.variant_tolerance.
        The profile and the share come from the job (kgym's options); without them, the defaults.  ``tail``: whether
        to decide on the small-elements check (compare.tail_tolerance: a pass over the whole output); False where
        only a sample is compared (the timed calls' check, inside the exclusive window), which asks again with it
        before the full rule.  ``announced``: the check holds wherever ``ref_out`` has a tiny element, whatever its
        share (compare.tail_tolerance; the timed calls, where the base inputs' output announced it)."""
        import torch

        from . import compare, tasks

        cfg = self.job.get("tolerance") or {}
        profile = cfg.get("profile") or compare.DEFAULT_PROFILE
        share = cfg.get("below_floor_share")
        share = compare.BELOW_FLOOR_SHARE if share is None else float(share)
        half = variant is not None and variant.dtype
        atol, rtol = compare.tolerances(getattr(torch, variant.dtype) if half else _first_dtype(ref_out), profile)
        if not half:  # --atol/--rtol are float32's numbers; a half-precision variant keeps its dtype's
            if self.job.get("atol") is not None:
                atol = self.job["atol"]
            if self.job.get("rtol") is not None:
                rtol = self.job["rtol"]
        value_range = variant is not None and tasks.is_value_range(variant.transform)
        tol = compare.variant_tolerance(ref_out, atol, rtol, value_range=value_range, profile=profile, share=share)
        if tol.relative_atol is not None and _first_dtype(ref_out) != torch.float32:
            # The relative check is adjudicated against float64 (_fp64_facts), which only float32 outputs get;
            # half-precision outputs near their subnormal range hold no relative accuracy anyway.
            tol.relative_atol = None
        return compare.tail_tolerance(ref_out, tol, value_range=value_range, announced=announced) if tail else tol

    # -- one variant: reference, then candidate, then facts -------------------
    def _task_key(self):
        return (self.task_sha256, self.task_where) if self.task_sha256 else ("evaluation", id(self))

    def note_constant_parameters(self, ref):
        """Notes whether the reference ``ref`` (the tiny run's, built in its phase) has a parameter of one value
        everywhere (models.constant_keys), for has_constant_parameters; once a task: the fact is the task's, and on a
        GPU each parameter's look is a wait for the device."""
        if self._task_key() in _CONSTANT_PARAMETERS:
            return
        if len(_CONSTANT_PARAMETERS) >= 256:
            _CONSTANT_PARAMETERS.clear()
        _CONSTANT_PARAMETERS[self._task_key()] = bool(models.constant_keys(ref))

    def has_constant_parameters(self):
        """Whether the reference has a parameter of one value everywhere: then the parameters variant runs.  Noted
        by the tiny run (kept per task: a kept judge's held tiny run builds no reference); where it was not, the
        reference is built at the tiny run's sizes on the CPU to find out."""
        from . import tasks

        found = _CONSTANT_PARAMETERS.get(self._task_key())
        if found is None:
            try:
                init, _inputs = tasks.build(self.task, self.tiny, "cpu")
                with tasks.sizes(self.task, self.tiny.sizes):
                    found = bool(models.constant_keys(construct(self.task.Model, init, self.tiny.seed, "cpu")))
            except Exception:  # noqa: BLE001 — not buildable on the CPU: the variant runs and finds out on the device
                found = True
        return found

    def spread_keys(self, held_key, init, seed, sizes=None):
        """models.constant_keys of the reference as ``seed`` builds it from ``init`` (the parameters variant's),
        kept under the variant's held key: a held variant does not build its reference again."""
        keys = _SPREAD_KEYS.get(held_key) if held_key is not None else None
        if keys is None:
            keys = models.constant_keys(self.reference(init, seed, sizes=sizes))
            if held_key is not None:
                if len(_SPREAD_KEYS) >= 256:
                    _SPREAD_KEYS.clear()
                _SPREAD_KEYS[held_key] = keys
        return keys

    def _held_key(self, v):
        """The key of variant ``v``'s held inputs and reference output (_Held), or None where nothing is held:
        outside a judge that may be kept (its task's bytes known), and for a reference that is not the same
        function of its inputs every time (randomness other than none).  The key holds everything the inputs,
        the reference's output and its tolerance follow from: the task's bytes and where they lie (a kept judge
        serves every job whose task file has those bytes, and a task may read what lies next to it: the same
        bytes in another folder are another task; red team: tests/fixtures/tasks/held_location), the variant
        (sizes, seed, transform, dtype), the device, and the job's tolerance settings (the reference's precision
        comes from the profile)."""
        if not self.task_sha256 or self.randomness.get("handling") != "none":
            return None
        job = self.job
        settings = json.dumps([job.get("tolerance"), job.get("atol"), job.get("rtol")], sort_keys=True, default=str)
        return (self.task_sha256, self.task_where, self.device, v.name,
                json.dumps(v.sizes, sort_keys=True, default=str), v.seed, v.transform, v.dtype, v.weights, settings)

    def run_variant(self, v):
        import torch

        from . import compare, tasks

        facts = {"name": v.name, "description": v.description, "sizes": v.sizes,
                 "dtype": v.dtype, "status": "ran", "compare": None, "error": None}
        # Where the variant's time goes, on the judge's clock (host time: GPU work the judge queued without
        # waiting shows in the step that waits for it), for tuning only: facts["spent_ms"], never a verdict.
        spent = facts["spent_ms"] = {}
        mark = [time.perf_counter()]

        def lap(step):
            now = time.perf_counter()
            spent[step] = round(spent.get(step, 0.0) + (now - mark[0]) * 1e3, 3)
            mark[0] = now
            if _OPS is not None:
                _OPS.lap(step)

        if _OPS is not None:
            _OPS.lap("outside")

        # A variant this judge already ran for an earlier job of the same task (a kept judge: _Held) needs
        # neither its inputs drawn nor its reference run again: they are the held ones, copied into a new block.
        held_key = self._held_key(v)
        held = _HELD.get(held_key)
        if held is not None:
            init = list(held.init)
            inputs = _Held.fresh_inputs(held.inputs, self.device)
        else:
            try:
                init, inputs = tasks.build(self.task, v, self.device)
            except tasks.StructureNotKept as exc:
                # Dense or shifted inputs where the task states a structure would fail honest kernels that rely
                # on it: the variant is not run, and the result says why.
                facts["status"] = "skipped"
                facts["reason"] = str(exc)
                return facts
        # The parameters variant's refill (models.spread): the reference's constant parameters at these sizes, found
        # before any block is made (a variant that ends here holds none).
        spread_keys = None
        if v.weights == "spread":
            try:
                spread_keys = self.spread_keys(held_key, init, v.seed, v.sizes)
            except Exception as exc:  # noqa: BLE001 — the reference cannot be built at these sizes
                if is_out_of_memory(exc):
                    raise
                facts["status"] = "reference_failed"
                facts["reason"] = f"the reference raised {type(exc).__name__}: {str(exc)[:300]}"
                return facts
            if not spread_keys:
                facts["status"] = "skipped"
                facts["reason"] = "no parameter of the model holds one value everywhere at these sizes"
                return facts
        # The inputs live in a block the runner gets in place (transport.InPlace): on a GPU a device block,
        # one copy of multi-GB inputs on the device instead of two; on the CPU a shared memfd.  The judge
        # fingerprints them before the call and checks them after it, with the canaries around them, and does
        # not read them again for anything it decides (the runner may still write there): a later use builds
        # them again (rebuild).  Where no block can be had (device memory not shared), the runner gets its own
        # copy: nothing it does to its inputs reaches these.
        in_place, inputs = self.runner.tp.InPlace.make(inputs, share=self.runner.share)
        cand_inputs = inputs
        lap("inputs")

        def rebuild():
            if in_place is None:
                return inputs
            if held is not None:
                return _Held.fresh_inputs(held.inputs, self.device)
            return tasks.build(self.task, v, self.device)[1]

        def make_reference():
            model = self.reference(init, v.seed, spread_keys, sizes=v.sizes)
            return model.to(getattr(torch, v.dtype)) if v.dtype else model

        if held is not None:
            ref = None  # made only where a later check calls it (float64 adjudication, repeat checks)
            ref_out = _Held.fresh(held.ref_out, self.device)
            tol, ok = copy.copy(held.tol), True
            facts["reference_source"] = "held"
            lap("reference")
        else:
            facts["reference_source"] = "computed"
            # The inputs as the reference gets them, for _Held (None where this variant will not be held).
            before = _Held.snapshot(held_key, init, inputs)
            try:
                ref = make_reference()
                with torch.no_grad():
                    ref_out = ref(*inputs)
                if in_place is not None and any(in_place.holds(t) for t in _tensor_list(ref_out)):
                    # A reference that returns a view of its inputs (a reshape, the input itself) would leave
                    # its output in the block the runner can write, even after answering: the judge keeps its own.
                    ref_out = _clone_out(ref_out)
                ok, reason = compare.reference_ok(ref_out)
                lap("reference")
            except Exception as exc:  # noqa: BLE001 — the task cannot run this variant
                if is_out_of_memory(exc):
                    # Not "the task cannot run these inputs": a variant skipped for want of memory would let a
                    # candidate pass on the small variants alone.  Retried alone, or the stage fails.
                    raise
                ok, reason = False, f"the reference raised {type(exc).__name__}: {str(exc)[:300]}"
            if ok:
                tol = self.tolerances(ref_out, v)
                if tasks.is_value_range(v.transform) and tol.scale == 0.0:
                    # A tiny input whose every product underflowed: nothing left to compare at this range.
                    ok, reason = False, ("the reference output is all zero at these input magnitudes: nothing to "
                                         "compare")
            if not ok:
                facts["status"] = "reference_failed"
                facts["reason"] = reason
                return facts
            # Held for this task's next jobs: the inputs the reference ran on (copied before it ran, from the block
            # no other process has been given yet) and its output, in this process's host memory (_Held says why).
            _Held.keep(held_key, init, before, inputs, ref_out, tol)
        if v is getattr(self, "tiny", None):
            if _no_elements(ref_out):
                raise _DegenerateTask(
                    f"the reference's output has no elements at the tiny run's sizes "
                    f"{json.dumps(v.sizes, default=str)} (a zero-size dimension): nothing to compute, compare or time; "
                    "the task needs a nonempty output")
            self.index_output = any(not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)
                                    for t in _tensor_list(ref_out))
            if ref is not None:
                self.note_constant_parameters(ref)
        atol, rtol = tol.atol, tol.rtol
        if self.current_stage == "correctness":
            self.degeneracy.add(v.name, ref_out, inputs, atol, rtol, model=self.degeneracy.model_key(v))
        # The reference's intermediates are garbage now, but cached: the runner needs that memory.  The seal below
        # reads the device back before anything is sent, so no wait here.
        _give_back_device_memory(self.device, collect=False, wait=in_place is None)
        lap("tolerance")
        try:
            if in_place is not None:
                # Sealed before the model is built: the runner gets the block only with the call, and a construct
                # that raises (an __init__ failing at these sizes) still ends in the input check below, which
                # needs the fingerprints (it read None and failed the stage as a kgym TypeError: red team,
                # twenty-fifth session).
                in_place.seal()
            cand = self.runner.construct(init, v.seed, v.dtype, spread_keys, sizes=v.sizes)
            lap("construct")
            cand_out = cand.call(cand_inputs, self.current_stage, v.name, poison=ref_out, in_place=in_place)
            facts["candidate_ms"] = cand.last_ms
            lap("call")
        except RemoteError as exc:  # everything the candidate raises is data
            facts["status"] = "candidate_raised"
            facts["error"] = describe_exception(exc)
            return facts
        finally:
            if in_place is not None:
                self.check_in_place(in_place, v.name)
                # From here on nothing reads the block (module comment above); it goes with its last view.
                inputs = cand_inputs = None
                in_place.release()
            lap("input_check")
        facts["atol"], facts["rtol"] = atol, rtol
        facts["tolerance"] = _finite(tol.facts())
        # The float64 adjudication holds the candidate to the tolerance relative to the output (below the
        # floor, the relative check's), plus the float32 reference's own error.
        exact_atol = tol.relative_atol if tol.relative_atol is not None else atol
        try:
            facts["compare"] = _finite(compare.compare(ref_out, cand_out, atol, rtol, tol.relative_atol))
            lap("compare")
            if _near_miss(facts["compare"], ref_out, cand_out) or _relative_miss(facts["compare"], tol):
                inputs = rebuild()
                ref = ref if ref is not None else make_reference()
                # An error (e.g. no float64 kernel for an op) is no adjudication.
                # On a value range the draws (_rounding_noise) may also be asked: there an output can be the
                # rounding of intermediates scaled up (a variance far below its eps), which no kernel computes.
                rounding = tasks.is_value_range(v.transform)
                facts["fp64"] = self.device_or_host(
                    lambda on_cpu: _fp64_facts(ref, inputs, ref_out, cand_out, exact_atol, rtol, on_cpu=on_cpu,
                                               rounding=rounding))
                lap("fp64")
            if tol.tail is not None and _passes_but_tail(facts["compare"], tol, facts.get("fp64")):
                # Announced (compare.tail_tolerance): C requires these facts of a variant that passes otherwise.
                inputs = inputs if inputs is not None else rebuild()
                ref = ref if ref is not None else make_reference()
                facts["compare"]["tail"] = self.tail_facts(ref, inputs, ref_out, cand_out, atol)
                lap("tail")
            if v.name == "base":
                small = self.repeat_check_variant(v)
                if small is None:
                    inputs = rebuild()
                    ref = ref if ref is not None else make_reference()
                    facts["repeat_checks"] = self.repeat_checks(
                        v, lambda checks: self.second_call(v, ref, cand, inputs, inputs, ref_out, cand_out, tol,
                                                           checks, (facts.get("compare") or {}).get("tail")))
                else:
                    # The repeat checks hold about ten outputs' worth at once: at 6 GB tensors that is more
                    # than a GPU has, so they run on the capped sizes, after base's tensors are let go.
                    del inputs, cand_inputs, ref_out, cand_out
                    facts["repeat_checks"] = self.repeat_checks(
                        small, lambda checks: self.repeat_checks_apart(small, checks))
                lap("repeat_checks")
        except Exception as exc:  # noqa: BLE001 — out of memory while checking (only that is re-raised above)
            if not is_out_of_memory(exc):
                raise
            # Out of memory after the candidate's call: in a shared phase the variant is re-run alone; alone,
            # the memory this evaluation holds (the candidate's included) did not leave room to check it.
            facts["status"] = "candidate_raised"
            facts["error"] = describe_exception(exc)
            facts["compare"] = None
        return facts

    def run(self):
        from . import compare, tasks

        if self.job.get("stay") is True:
            # What a kept judge must find unchanged after the job (_clean_for_next), before the task's import, and
            # the task's bytes: kgym gives a kept judge only jobs of the same task (src/supervisor/pair.c).
            self.fingerprint = _process_fingerprint()
            try:
                import hashlib

                with open(self.job["task"], "rb") as f:
                    self.task_sha256 = hashlib.sha256(f.read()).hexdigest()
                # Where the task file lies (its folder is the task's too: _held_key).
                self.task_where = os.path.realpath(self.job["task"])
            except OSError:
                self.task_sha256 = None
        try:
            self.task = tasks.load_task(self.job["task"])
        except Exception as exc:  # noqa: BLE001 — a broken task is not the candidate's fault
            self.chan.send({"type": kinds.MSG_TASK_ERROR, "error": describe_exception(exc)})
            return
        # The reference's precision is the tolerance profile's (after the task's import, so that the profile
        # decides), reported as read back: every result states it.
        profile = (self.job.get("tolerance") or {}).get("profile") or compare.DEFAULT_PROFILE
        if profile not in compare.PROFILES:
            self.chan.send({"type": kinds.MSG_TASK_ERROR, "error": {"type": "ValueError", "message":
                            f"unknown tolerance profile {profile!r}", "frames": []}})
            return
        self.chan.send(dict(compare.apply_reference_precision(profile), type=kinds.MSG_REFERENCE_PRECISION,
                            profile=profile, device="cuda" if self.device.startswith("cuda") else "cpu"))
        if not self.check_randomness():
            return
        # The judge's stages in kgym's order (kinds.def); each is the method of its name.  Timing runs on a GPU only.
        timed = (self.job.get("timing") or {}).get("enabled") and self.device.startswith("cuda")
        stages = [name for name in kinds.JUDGE_STAGES if name != "timing" or timed]
        send = self.chan.send
        for name in stages:
            failed = False
            try:
                self.stage(name, getattr(self, name))
            except StageFailed:
                failed = True
            if name not in ("parse", "static"):
                # The runner's own process checks (threads left running, global state, tampering): evidence.  A
                # check that did not complete is never a pass: guard_error, which kgym reads as unjudged.
                reply, _ = self.runner.ask({"cmd": kinds.CMD_CHECK, "stage": name})
                if reply.get("type") != kinds.REPLY_OK:
                    err = reply.get("error") if isinstance(reply.get("error"), dict) else {}
                    self.guards.add("guard_error", name, None,
                                    f"the runner's process checks after stage {name} did not complete: "
                                    f"{err.get('type', '?')}: {str(err.get('message', reply))[:300]}")
                self.check_source(name)
            new = self.guards.findings[self.sent_findings:]
            self.sent_findings = len(self.guards.findings)
            for f in new:
                send({"type": kinds.MSG_FINDING, "finding": _finite(f)})
            # A finding the policy calls a hack ends the evaluation: kgym's verdict will be `hacked`, and
            # running more of a cheating candidate only costs time.
            if failed or any(self.severity(self.policy, f["type"]) == "hack" for f in new):
                return

    def check_source(self, stage):
        """The judge's own look, after each stage, at the source folder the runner cannot change
        (transport.source_path): the checked bytes still there, and nothing else.  A tripwire behind the
        sandbox's guards (sandbox._checked_bytes): it fires only where none of them stood, and then the runner's
        Triton may have compiled kernel source no check read."""
        path = getattr(self, "source_file", None)
        if not path:
            return
        import stat

        changes = []
        try:
            # Never through a link, never blocking on a FIFO, never more than the checked length plus one byte:
            # where no guard stood, the runner chose what lies there.
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    changes.append("it is no longer a regular file")
                elif os.read(fd, len(self.source) + 1) != self.source:
                    changes.append("it holds other bytes")
            finally:
                os.close(fd)
        except OSError as exc:
            changes.append(f"it cannot be opened ({exc.strerror or exc})")
        try:
            others = sorted(set(os.listdir(os.path.dirname(path))) - {os.path.basename(path)})
        except OSError as exc:
            others = [f"(its folder cannot be listed: {exc.strerror or exc})"]
        if others:
            changes.append(f"{', '.join(others[:4])} put beside it")
        if changes:
            self.guards.add("harness_tampering", stage, None,
                            "the checked source file was changed during the evaluation: " + "; ".join(changes),
                            {"file": path})
            self.source_file = None  # said once

    def check_randomness(self):
        """Whether the task can be judged at all: a reference that draws random numbers in forward is judged
        with its dropout modules in eval mode, or refused (tasks.forward_randomness; docs/evaluation-protocol.md,
        "Random references").  Sends ``task_mode`` (what kgym puts in the result's ``task.randomness``; a request,
        so that kgym keeps a mode found here), then ``task_error`` for a refused task; False when the evaluation
        stops here."""
        import torch

        # An earlier evaluation of this task in kgym's process may have decided it (eval.c, task_modes): the
        # mode is a fact of the task alone, found before any candidate code is loaded, and running the reference's
        # forwards again costs a new judge ~0.24 s of a shared GPU phase (mostly its first kernel uses).
        answer = self.chan.request({"type": kinds.MSG_TASK_MODE_LOOKUP, "torch": torch.__version__})
        cached = _cached_mode(answer)
        if cached is not None:
            self.randomness = cached
        else:
            self._find_randomness()
        # A request: kgym keeps a mode found here for the task's next evaluations (never one it handed out).
        self.chan.request(dict(_finite(self.randomness), type=kinds.MSG_TASK_MODE))
        if self.randomness["handling"] == "refused":
            self.refuse_task("RandomReference", "the reference is random: " + self.randomness["reason"])
            return False
        return True

    def _find_randomness(self):
        from . import tasks

        try:
            with self.gpu_if_device("shared", "task_check"):
                # Last, the sizes the variants run at (the CPU budget, or the task's own on a GPU): a reference
                # that cannot run small is still checked before it is judged.
                self.randomness = tasks.forward_randomness(self.task, self.device,
                                                           budget=int(self.job.get("tiny_budget") or 4096),
                                                           seed=int(self.job.get("seed", 42)),
                                                           last_budget=self.job.get("budget"))
        except Exception as exc:  # noqa: BLE001 — unknown randomness is never taken for none (result.c)
            if is_out_of_memory(exc):
                raise
            self.randomness = {"handling": "unknown", "ops": {}, "differs": None, "modules": [],
                               "reason": f"the reference could not be run to find out: {type(exc).__name__}: "
                                         f"{str(exc)[:300]}"}

    def reference(self, init, seed, spread_keys=None, sizes=None):
        """The task's reference model as every comparison and timing uses it: seeded like the candidate's, with
        its dropout modules in eval mode where check_randomness chose that; ``spread_keys``: the parameters
        variant's refill (models.spread).  Built while the task's module has the variant's ``sizes`` (its
        constants): a Model whose __init__ reads a module-level size (level3/33's hidden state of batch_size rows)
        is built for the variant's inputs, not the task's own (every variant of another batch size raised there:
        the reference-as-candidate scan, twenty-fifth session)."""
        from . import tasks

        with tasks.sizes(self.task, sizes or {}):
            ref = construct(self.task.Model, init, seed, self.device, spread_keys=spread_keys)
        if self.randomness.get("handling") == "dropout_as_identity":
            tasks.dropout_off(ref)
        return ref

    def check_in_place(self, in_place, variant):
        """The judge's own check that the forward left its inputs unchanged and wrote nothing around them
        (inputs handed over in place, with canaries: transport.InPlace): the runner's snapshot of them is
        skipped, and what it reports is evidence only."""
        try:
            # The fingerprints and the canaries read back together (InPlace.check: one wait for the GPU).
            changed, hits = in_place.check()
        except Exception as exc:  # noqa: BLE001 — out of memory for the check's temporaries: re-run alone
            if self.gpu_mode != "exclusive":
                raise
            self.guards.add("guard_error", self.current_stage, variant,
                            f"the judge's input and canary check failed: {type(exc).__name__}: {exc}"[:500])
            return
        for j in changed:
            shape = list(in_place.tensors[j].shape)
            self.guards.add("input_mutation", self.current_stage, variant,
                            f"input {j} was modified by forward", {"input": j, "shape": shape})
        if hits:
            self.guards.add("out_of_bounds_write", self.current_stage, variant,
                            _overwrite_message(hits[0], "the"), {"writes": hits[:8]})

    def call_in_place(self, cand, inputs, variant, poison):
        """``cand.call`` on a copy of ``inputs`` in a block of the judge's handed over in place, checked after the
        answer like a variant's inputs (fingerprints, canaries: check_in_place); ``inputs`` stay the judge's own
        (the block holds a copy), so the caller may read them afterwards.  Where no block can be had, the usual
        copy."""
        in_place, args = self.runner.tp.InPlace.make(list(inputs), share=self.runner.share)
        if in_place is None:
            return cand.call(inputs, self.current_stage, variant, poison=poison)
        try:
            in_place.seal()
            return cand.call(args, self.current_stage, variant, poison=poison, in_place=in_place)
        finally:
            self.check_in_place(in_place, variant)
            args = None
            in_place.release()

    def repeat_check_variant(self, base):
        """The variant the repeat checks (second_call) run on when base is larger than
        tasks.VALUE_VARIANT_BUDGET elements a tensor (full sizes on a GPU); None to run them on base itself."""
        from . import tasks

        if self.job.get("budget") is not None:
            return None
        capped = next((x.sizes for x in getattr(self, "variants", []) if x.name == "seed_1"), None)
        if capped is None:
            capped = dict(tasks.plan_sizes(self.task, tasks.VALUE_VARIANT_BUDGET))
        if dict(capped) == dict(base.sizes):
            return None
        return tasks.Variant(name="base", sizes=dict(capped), seed=base.seed, transform=base.transform,
                             dtype=base.dtype, description=base.description)

    def repeat_checks(self, v, run):
        """The repeat checks (second_call) as facts kgym requires for a pass (src/eval/result.c): each check's
        status ("ran" once its decision was made, else "not_run") and, when one raised, the exception and who
        raised it ("candidate": an answer of the runner's that was an error; "judge": the judge's own work).  An
        exception here is never a pass: kgym reads a check that did not run as a verdict it cannot give.  Out
        of memory is raised on (shared_or_alone re-runs the variant alone)."""
        checks = {"cached_output": "not_run", "nondeterministic": "not_run"}
        out = {"variant": v.name, "sizes": v.sizes, "checks": checks, "error": None, "raised_by": None}
        try:
            run(checks)
        except Exception as exc:  # noqa: BLE001 — reported as facts; kgym fails the evaluation closed
            if is_out_of_memory(exc):
                raise
            out["error"] = describe_exception(exc)
            out["raised_by"] = "candidate" if isinstance(exc, RemoteError) else "judge"
        return out

    def repeat_checks_apart(self, v, checks):
        """second_call's checks on their own (smaller) variant: models, inputs and first outputs of their own."""
        import torch

        from . import tasks

        init, inputs = tasks.build(self.task, v, self.device)
        cand_inputs = inputs
        ref = self.reference(init, v.seed, sizes=v.sizes)
        cand = self.runner.construct(init, v.seed, None, sizes=v.sizes)
        with torch.no_grad():
            ref_out = ref(*inputs)
        cand_out = self.call_in_place(cand, cand_inputs, "base_checks", ref_out)
        self.second_call(v, ref, cand, inputs, cand_inputs, ref_out, cand_out, self.tolerances(ref_out, v), checks)

    def second_call_wrong(self, v, again, ref, ref_out2, tol2, facts2):
        """The model's second call, on new inputs of the variant's kind (``again``), was wrong.  A new model's
        first call on the same inputs tells the two causes apart: wrong there too, the kernel is wrong on these
        inputs (a bug), reported as a variant C counts (incorrect); right there, the output depended on the calls
        before it, not only on the inputs (a call counter, state kept between calls: how a candidate would tell
        the calls that are compared from those that are timed), the hack ``nondeterministic``.  Making the new
        model drops the old one (RunnerLink.construct): it comes after the old model's last call."""
        from . import tasks

        init, inputs2 = tasks.build(self.task, again, self.device)
        fresh = self.runner.construct(init, v.seed, None, sizes=v.sizes)
        out = self.call_in_place(fresh, inputs2, "base_again_new_model", ref_out2)
        if self.output_passes(tol2, ref, inputs2, ref_out2, out):
            self.guards.add("nondeterministic", self.current_stage, "base_again",
                            "a second call on new inputs gave a wrong output that a new model's first call on the "
                            "same inputs gets right: the result depends on the calls before it (state kept between "
                            "calls, a call counter), not only on the inputs", {"variant": v.name})
            return
        self.chan.send({"type": kinds.MSG_VARIANT, "name": "base_again", "sizes": v.sizes, "dtype": v.dtype,
                        "description": "the variant's inputs drawn again (another seed), the same model's second "
                                       "call", "status": "ran", "compare": _finite(facts2), "atol": tol2.atol,
                        "rtol": tol2.rtol, "tolerance": _finite(tol2.facts()), "error": None})

    def second_call(self, v, ref, cand, inputs, cand_inputs, ref_out, cand_out, tol, checks, first_tail=None):
        """The same candidate model called again on fresh input values of the same shapes: a candidate that
        caches results (by shape, data_ptr, call count) returns the first call's output.  The facts also say
        whether the task itself is degenerate (the reference output does not depend on the inputs, is zero,
        constant, or equal to an input), so its rewards can be ignored.  Outputs are held to ``tol``'s
        per-element rule (the first call's scale): these checks compare calls with each other, and an honest
        output must never look cached or nondeterministic for want of a float64 adjudication.  ``checks[name]``
        becomes "ran" as each check's decision is made (repeat_checks)."""
        import torch

        from . import compare, tasks

        atol, rtol = tol.atol, tol.rtol
        again = tasks.Variant(name=v.name, sizes=v.sizes, seed=v.seed + 7919, transform=v.transform,
                              dtype=v.dtype, description=v.description)
        _init, inputs2 = tasks.build(self.task, again, self.device)
        cand_inputs2 = inputs2
        # Each output is judged before the next call: a candidate may legitimately reuse one output buffer.  Where
        # the small-elements check is announced, every call is held to it (its facts for the first call come from
        # the variant's own check when the caller has them): a candidate exact on a model's first call and cut
        # from its second passed these checks before (the session review, twentieth session).
        tail_on = tol.tail is not None
        first_ok = _passes(compare.compare(ref_out, cand_out, atol, rtol))
        if first_ok and tail_on:
            if first_tail is None:
                first_tail = self.tail_facts(ref, inputs, ref_out, cand_out, atol)
            first_ok = first_tail.get("mismatches") == 0
        first = _clone_out(cand_out)
        with torch.no_grad():
            ref_out2 = ref(*inputs2)
        cand_out2 = self.call_in_place(cand, cand_inputs2, "base_again", ref_out2)
        second_ok = _passes(compare.compare(ref_out2, cand_out2, atol, rtol))
        same_as_first = _passes(compare.compare(first, cand_out2, 0.0, 0.0))
        input_independent = _passes(compare.compare(ref_out, ref_out2, atol, rtol))
        if self.current_stage == "correctness":
            self.degeneracy.again("base_again", ref_out2, not input_independent, self.degeneracy.model_key(v))
        wrong_again = None
        if first_ok and not second_ok and not input_independent and same_as_first:
            self.guards.add("cached_output", self.current_stage, "base_again",
                            "a second call with new input values returned the first call's output: results may "
                            "not be cached across calls", {"variant": v.name})
        elif not second_ok or tail_on:
            # A wrong output on fresh inputs of the variant's own kind is a wrong answer like any variant's, judged
            # by the full rule (its own scale, float64 adjudication): before, only an exact copy of the first
            # output failed here, and a candidate that counted its calls could return anything on this one (red
            # team, 2026-11-26).  Decided after the repeat call below (second_call_wrong makes a new model).
            tol2 = self.tolerances(ref_out2, v)
            facts2 = compare.compare(ref_out2, cand_out2, tol2.atol, tol2.rtol, tol2.relative_atol)
            if not self.output_passes(tol2, ref, inputs2, ref_out2, cand_out2, facts2):
                wrong_again = (tol2, facts2)
        checks["cached_output"] = "ran"
        # The first inputs once more: an output that passed once and now does not depends on something
        # other than the inputs (uninitialised or stale memory, a race).
        cand_out3 = self.call_in_place(cand, cand_inputs, "base_repeat", ref_out)
        repeat_ok = _passes(compare.compare(ref_out, cand_out3, atol, rtol))
        if first_ok and repeat_ok and tail_on:
            repeat_ok = self.tail_facts(ref, inputs, ref_out, cand_out3, atol).get("mismatches") == 0
        if first_ok and not repeat_ok:
            self.guards.add("nondeterministic", self.current_stage, "base_repeat",
                            "the same inputs a second time gave a wrong output: the result depends on memory "
                            "contents or timing, not only on the inputs", {"variant": v.name})
        if wrong_again is not None:
            self.second_call_wrong(v, again, ref, ref_out2, *wrong_again)
        checks["nondeterministic"] = "ran"
        facts = {"input_independent": input_independent}
        if torch.is_tensor(ref_out) and ref_out.numel() and ref_out.is_floating_point():
            r = ref_out.detach().float()
            facts["zero_output"] = bool(r.abs().max() <= atol)
            facts["constant_output"] = bool((r - r.reshape(-1)[0]).abs().max() <= atol + rtol * r.abs().max())
            facts["output_equals_input"] = any(
                torch.is_tensor(x) and x.shape == r.shape and x.is_floating_point() and
                bool(((x.float() - r).abs() <= atol + rtol * r.abs()).all()) for x in inputs)
        self.chan.send({"type": kinds.MSG_TASK_FACTS, "facts": facts})


# tl.dot's input_precision values that compute float32 products to float32 accuracy ("tf32x3" splits each input
# into three TF32 parts); anything else, or none (the default, TF32 for float32 inputs), rounds to 10 bits.
_FULL_DOT_PRECISION = ("ieee", "tf32x3")
_HALF_NAMES = ("float16", "bfloat16", "half")


def _cached_mode(answer):
    """The task mode in kgym's answer to task_mode_lookup, as tasks.forward_randomness returns one, or None (a miss,
    or an answer not of that shape: the judge then finds the mode itself)."""
    mode = answer.get("mode") if answer.get("type") == kinds.MSG_TASK_MODE_CACHE and answer.get("hit") is True else None
    if not (isinstance(mode, dict) and mode.get("handling") in ("none", "dropout_as_identity", "refused")
            and isinstance(mode.get("reason"), str) and isinstance(mode.get("modules", []), list)
            and isinstance(mode.get("ops", {}), dict)):
        return None
    return {"handling": mode["handling"], "ops": mode.get("ops", {}), "drew": mode.get("drew"),
            "differs": mode.get("differs"), "modules": list(mode.get("modules", [])), "reason": mode["reason"]}


def _precision_ops(tree) -> dict:
    """What the candidate's source asks of precision, for the feedback (result.c's tolerance block): tl.dot
    calls that round float32 inputs to TF32 (no input_precision="ieee" or "tf32x3", no allow_tf32=False), those
    that do not, and references to fp16/bf16 (tl.float16, torch.bfloat16, .half(), ...).  Facts about the text
    only: a dot of inputs that are not float32 rounds nothing more."""
    reduced = full = half = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "dot" \
                and ast.unparse(node.func.value) in ("tl", "triton.language", "language"):
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            prec = kw.get("input_precision")
            tf32 = kw.get("allow_tf32")
            if (isinstance(prec, ast.Constant) and prec.value in _FULL_DOT_PRECISION) or \
                    (isinstance(tf32, ast.Constant) and tf32.value is False):
                full += 1
            else:
                reduced += 1
        elif isinstance(node, ast.Attribute) and node.attr in _HALF_NAMES:
            half += 1
    return {"dot_reduced": reduced, "dot_full": full, "half_precision": half}


SAMPLE_TAIL = "tail"  # _sample_agrees: the sample agrees by atol and rtol but not by the small-elements bound
# A timed call whose sample trips only the small-elements bound gets the full rule (its float64 and three float32
# reference runs): always for the first TIMED_TAIL_FULL such calls of an evaluation, then with probability
# TIMED_TAIL_LATER.  An exact or honestly rounded kernel trips it only on elements the full rule leaves out
# (ill-conditioned ones: level2's normalised one-element groups), so this bounds what they cost inside the
# exclusive window (3 + a quarter of the rest); a kernel that cuts its small elements trips it on every checked
# call and meets the full rule on the first.
TIMED_TAIL_FULL = 3
TIMED_TAIL_LATER = 0.25


def _sample_agrees(remote, ref_out, tol, seed, tail=False):
    """compare.sample_agrees with the candidate's output still in the runner: positions drawn from ``seed``
    on both sides (timing.sample_positions), only the values there fetched.  None (compare in full) when the
    outputs' structure does not allow it, or the runner counts non-finite values in them (a sample may miss
    them; its count is its word, so it can only add a full comparison).  ``tail`` (the small-elements check is
    announced for the task's outputs): the sampled tiny elements are held to compare.sample_tail_agrees too, and
    SAMPLE_TAIL (not True) says they are not."""
    import torch

    from ..shared import timing as tm
    from . import compare

    refs = list(ref_out) if isinstance(ref_out, (tuple, list)) else [ref_out]
    if not refs or not all(torch.is_tensor(r) and r.is_contiguous() for r in refs):
        return None
    idx = tm.sample_positions([r.numel() for r in refs], seed, refs[0].device)
    got, counts = remote.sample(seed, [r.numel() for r in refs], max(r.element_size() for r in refs))
    if not isinstance(got, list) or len(got) != len(refs):
        return None
    if not isinstance(counts, list) or len(counts) != len(refs) or any(c != 0 for c in counts):
        return None
    picked_ref, picked = [], []
    for r, i, c in zip(refs, idx, got):
        if not torch.is_tensor(c):
            return None
        rf = r.reshape(-1) if i is None else r.reshape(-1)[i]
        if c.shape != rf.shape or c.dtype != rf.dtype:
            return None
        picked_ref.append(rf)
        picked.append(c.to(rf.device))
    agrees = compare.sample_agrees(picked_ref, picked, tol.atol, tol.rtol, samples=tm.SAMPLES, seed=seed,
                                   relative_atol=tol.relative_atol, share=tol.share)
    if agrees is True and tail and not compare.sample_tail_agrees(picked_ref, picked, tol.atol):
        return SAMPLE_TAIL
    return agrees


def _output_problem(meta, expect):
    """Why a timed output, as the runner describes it (guards.describe_outputs), must be compared in full:
    another number of tensors, type, shape or dtype than the reference output's ``expect`` ([(shape, dtype)]),
    or non-finite values where it counted them (a sample may miss them; a timed call's description leaves the
    count out, and the checked calls get it with their sample: _sample_agrees); None when nothing in the
    description says so (the description is the runner's word: it can only add checks)."""
    if not isinstance(meta, list) or len(meta) != len(expect):
        return "the output's description does not match the reference's number of tensors"
    for i, (m, (shape, dtype)) in enumerate(zip(meta, expect)):
        if not isinstance(m, dict) or m.get("type") != "torch.Tensor":
            return f"output {i} is not a plain tensor"
        if m.get("shape") != shape or m.get("dtype") != dtype:
            return f"output {i} is {m.get('dtype')} {m.get('shape')}, the reference's {dtype} {shape}"
        if m.get("nonfinite") is not None and m.get("nonfinite") != 0:
            return f"output {i} holds non-finite values"
    return None


def _overwrite_message(hit, whose):
    """The finding's text for a changed canary (transport._Canaries.check)."""
    off = hit["offset"]
    where = (f"{-off} byte(s) before its start" if off < 0 else f"at byte {off} from its start, past its end")
    return (f"{whose} forward wrote outside input {hit['input']} ({hit['bytes']} byte(s) changed, the first "
            f"{where}): kernels must store only inside their tensors (mask every store)")


# The name ATen's constant-fill kernels carry (at::native::FillFunctor<T>, in every dtype), and the name its
# element copies carry (`.contiguous()`, `.clone()`, `copy_`, a permuted or expanded tensor made dense, and every
# dtype conversion but float32 to float16/bfloat16/float8: at::native::direct_copy_kernel_cuda): _own_kernels.
_FILL_KERNEL = "at::native::FillFunctor<"
_COPY_KERNEL = "direct_copy_kernel_cuda"


def _judge_has_stream_ids() -> bool:
    """Whether this process's driver gives stream ids (cudashare.stream_id, cuStreamGetId), which the runner's
    profile needs to name the stream of each kernel: the runner's driver is this one."""
    try:
        import torch

        from ..shared import cudashare

        cudashare.stream_id(torch.cuda.current_stream().cuda_stream)
        return True
    except Exception:  # noqa: BLE001 — no driver API: the runner cannot say either
        return False


def _own_kernels(prof, names, stream_ids=False):
    """The runner's profile, re-judged here: a kernel is the candidate's only when the runner says it
    launched it AND its name is one of the @triton.jit functions the judge read in the candidate's source;
    everything else (cuBLAS, cuDNN, ATen's own kernels) is library compute.  Totals are recomputed from the
    rows, not taken from the runner."""
    rows = [k for k in prof.get("kernels") or [] if isinstance(k, dict)]
    for k in rows:
        k["candidate"] = bool(k.get("candidate")) and str(k.get("name")) in names
        k["device_us"] = float(k.get("device_us") or 0.0)
        # A constant fill (ATen's FillFunctor: torch.zeros/ones/full/empty().fill_) is allocation, not
        # computation: it writes one value decided before the launch and reads no input, so it is neither the
        # candidate's work nor library compute, and counts in neither side of coverage.  On a task as small as
        # add_one an honest torch.zeros_like output costs as much device time as the kernel (coverage 0.49 on an
        # H200, fixture h36) though it computes nothing.
        k["fill"] = not k["candidate"] and _FILL_KERNEL in str(k.get("name"))
        # An element copy is layout, not computation either: it moves each element (at most cast), so no output of a
        # KernelBench task can be computed by it (every reference runs at least one computing operator), and the
        # runtime recorder refuses PyTorch compute in forward on its own.  Counted, it made honest plumbing the
        # hack low_coverage: the honest probe's c12 and c13 (a reduction over a middle dimension, the input made
        # contiguous with that dimension last) spent 75-89% of their forward in the strided copy on an H200.
        k["copy"] = not k["candidate"] and not k["fill"] and _COPY_KERNEL in str(k.get("name"))
    fill_us = sum(k["device_us"] for k in rows if k["fill"])
    copy_us = sum(k["device_us"] for k in rows if k["copy"])
    # kernel_count is the runner's claim: never fewer than the distinct rows it sent (a smaller count would
    # raise kernel_coverage)
    out = {"calls": int(prof.get("calls") or 0), "kernels": rows,
           "kernel_count": max(int(prof.get("kernel_count") or 0), len({str(k.get("name")) for k in rows})),
           # The runner's total may cover kernels beyond the rows it sent; a larger total only lowers coverage.
           "total_device_us": max(sum(k["device_us"] for k in rows), float(prof.get("total_device_us") or 0.0))
           - fill_us - copy_us,
           "fill_device_us": fill_us,
           "copy_device_us": copy_us,
           "candidate_device_us": sum(k["device_us"] for k in rows if k["candidate"]),
           # counted here, among the rows the runner sent (the top 20 by time): a lower bound when
           # kernel_count is larger, never the runner's own claim
           "candidate_kernel_count": sum(1 for k in rows if k["candidate"]),
           "launched": [n for n in prof.get("launched") or [] if isinstance(n, str)][:50]}
    # Device time on streams other than the timed one (the runner's word, as every profile figure is): kgym then
    # times on the device-wide clock (timing.c use_device_times).  Only a finite number >= 0 passes; anything else
    # is unknown (None), never 0.
    side = prof.get("side_stream_device_us")
    out["side_stream_device_us"] = float(side) if isinstance(side, (int, float)) and not isinstance(side, bool) \
        and math.isfinite(side) and side >= 0 else None
    # ... and unknown where this driver gives stream ids (``stream_ids``: the runner's is the same driver) is a
    # figure the runner withheld (red team 33: its cudashare.stream_id replaced): kgym then takes the device-wide
    # clock, as for side-stream time (fail closed).  Where the driver cannot say, the gap decides alone.
    out["side_stream_missing"] = bool(stream_ids) and out["side_stream_device_us"] is None
    return out


def _out_of_memory(result):
    """Whether a variant failed for want of GPU memory (the candidate's or the reference's call)."""
    err = result.get("error") or {}
    return says_out_of_memory(" ".join(str(x) for x in (err.get("type"), err.get("message"),
                                                        err.get("cause_type"), result.get("reason")) if x))


def _relative_miss(cmp, tol):
    """Whether an output below the floor missed its relative tolerance on more than tol's share of its
    elements (compare.variant_tolerance): C fails it unless the float64 adjudication clears it, so the judge
    gathers that fact.  Outputs that are wrong in other ways (shape, dtype, NaN) are not rounding questions."""
    if tol is None or tol.relative_atol is None:
        return False
    if cmp.get("error") or not cmp.get("shape_ok") or cmp.get("candidate_nonfinite") != cmp.get("reference_nonfinite"):
        return False
    missed = cmp.get("relative_mismatches")
    return isinstance(missed, int) and missed > tol.share * max(int(cmp.get("elements") or 0), 1)


def _near_miss(cmp, ref_out, cand_out):
    """A float32 output that mismatches only slightly: worth asking how far the reference itself is from
    the exact result.  Long reductions over signed inputs (a 1M-term dot product, a 32K-long cumsum)
    make fp32 results depend on summation order by more than 1e-4, so an honest kernel can "miss" a
    reference that is no closer to the truth than it is."""
    import torch

    if not (torch.is_tensor(ref_out) and torch.is_tensor(cand_out)):
        return False
    if ref_out.dtype != torch.float32 or cand_out.dtype != torch.float32:
        return False
    if cmp.get("error") or not cmp.get("shape_ok") or not cmp.get("mismatches"):
        return False
    if cmp.get("candidate_nonfinite") != cmp.get("reference_nonfinite"):
        return False
    err = cmp.get("max_abs_error")
    if not isinstance(err, float):
        return False
    scale = float(ref_out.abs().max()) if ref_out.numel() else 0.0
    return err <= 1e-2 * max(1.0, scale)


def _error_fact(exc):
    """An exception as a short fact: {"error": "Type: message"}."""
    return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}


def _fp64_facts(ref_model, inputs, ref_out, cand_out, atol, rtol, on_cpu=False, rounding=False):
    """The reference re-run in float64 (same weights, same inputs) and both float32 outputs measured
    against it.  ``mismatches`` counts elements where the candidate is further from the float64 result
    than atol + rtol*|exact| + twice the reference's own largest float32 error; with ``rounding`` (a value-range
    variant), where that leaves mismatches, each element may also be ROUNDING_SLACK times further than it moves
    when the reference's intermediates round otherwise (_rounding_noise).  ``on_cpu``: all of it in host memory
    (the GPU had no room for the float64 copies)."""
    import torch

    model64, inputs64 = _float64_copies(ref_model, inputs, on_cpu)
    with torch.no_grad():
        exact = model64(*inputs64)
    del model64, inputs64
    exact = exact.reshape(-1)
    r32 = ref_out.reshape(-1)
    c32 = cand_out.reshape(-1)
    if on_cpu:
        r32, c32 = r32.cpu(), c32.cpu()
    chunk = 1 << 24
    ref_err = 0.0
    for i in range(0, exact.numel(), chunk):
        d = (r32[i:i + chunk].double() - exact[i:i + chunk]).abs()
        d = d[torch.isfinite(d)]
        if d.numel():
            ref_err = max(ref_err, float(d.max()))
    slack = 2.0 * ref_err

    def count(noise):
        cand_err, bad = 0.0, 0
        for i in range(0, exact.numel(), chunk):
            e = exact[i:i + chunk]
            d = (c32[i:i + chunk].double() - e).abs()
            both_nan = torch.isnan(c32[i:i + chunk]) & torch.isnan(e)
            bound = atol + rtol * e.abs() + slack
            if noise is not None:
                bound = bound + ROUNDING_SLACK * noise[i:i + chunk].to(e.device, torch.float64)
            bad += int((~((d <= bound) | both_nan)).sum())
            d = d[torch.isfinite(d)]
            if d.numel():
                cand_err = max(cand_err, float(d.max()))
        return cand_err, bad

    cand_err, bad = count(None)
    facts = {"reference_error": ref_err, "candidate_error": cand_err, "slack": slack, "mismatches": bad}
    if rounding and bad and r32.dtype == torch.float32:
        noise = _rounding_noise(ref_model, inputs, exact, on_cpu)
        if noise is not None:
            facts["rounding"] = {"draws": ROUNDING_DRAWS, "slack": ROUNDING_SLACK, "noise": float(noise.max()),
                                 "mismatches_before": bad}
            facts["candidate_error"], facts["mismatches"] = count(noise)
    return facts


# The float64 adjudication's second question, asked on value-range variants only (_fp64_facts; docs/evaluation-
# protocol.md, "Float64 adjudication"): how far an element moves when the reference's own intermediates round
# otherwise.  ROUNDING_DRAWS re-runs of the float32 reference, every float32 output of every operation it computes
# from floating values (views and in-place results aside) multiplied by 1 + ROUNDING_ULPS·2^-23·g, g normal per
# element (from ROUNDING_SEED: the same draws every time); an element's noise is its largest distance from the float64
# result over the draws, and the candidate may be ROUNDING_SLACK times that far from it.  A well-conditioned element
# moves by tens of ulps of itself (the largest of eight normal draws is ~2.4 sigma an operation), ~1e-5 of it beside
# rtol's 1e-4; one computed as the difference of nearly equal intermediates and then scaled up moves as an honest
# kernel's other order of sums moves it: level2's GroupNorm and BatchNorm on inputs x1e-25, whose variance is far
# below eps and whose output is the rounding of the conv's or GEMM's bias divided by sqrt(eps).  Measured: on an H200
# level2/39's honest_probe p3_c34 (a BatchNorm over 4,096 rows, its mean a sum in another order) missed on 610,304
# of 16.8M elements by the first rule and on none with these draws; with ±1 moves instead of normal ones (three draws
# of ±8 and of ±64 ulps) 41,526 and 9,780 still missed: moves of +a then -a along a chain of elementwise operations
# cancel exactly on half of a draw's elements.  harness/tests/test_fp64.py has a one-channel GroupNorm (the red team's
# level2/85 baseline at CPU sizes) and the failures that stay failures.  Why not every variant: at the task's own
# magnitudes the outputs are what the task is about, and the first rule (the reference's own error) stands alone.
ROUNDING_DRAWS = 8
ROUNDING_SLACK = 2.0
ROUNDING_ULPS = 16
ROUNDING_SEED = 28


def _rounding_noise(ref_model, inputs, exact, on_cpu=False):
    """Per element of the reference's (single, flat) float64 output ``exact``: the largest |draw - exact| over
    ROUNDING_DRAWS float32 runs of the reference with every intermediate moved (_RoundingDraw), as a
    float32 tensor on exact's device; non-finite distances count as 0 (no latitude where a draw blows up).  None
    where the reference cannot run so, or casts floating values to an integer dtype (no latitude either)."""
    import torch

    model = copy.deepcopy(ref_model)
    if on_cpu:
        model = model.cpu()
    device = exact.device
    gen = torch.Generator(device=device)
    gen.manual_seed(ROUNDING_SEED)
    noise = torch.zeros(exact.numel(), dtype=torch.float32, device=device)
    chunk = 1 << 24
    try:
        for _ in range(ROUNDING_DRAWS):
            # Fresh copies every draw: a reference that writes into its inputs would otherwise give the next draw
            # other inputs (the red team's x *= 3: the draws then measured another function, noise of the
            # output's size), and the checks after this one too.
            args = [(x.cpu() if on_cpu else x).clone() if torch.is_tensor(x) else x for x in inputs]
            mode = _RoundingDraw(gen, device)
            with torch.no_grad(), mode:
                draw = model(*args)
            del args
            if mode.to_integer:
                return None
            if not torch.is_tensor(draw) or draw.numel() != exact.numel():
                return None
            draw = draw.reshape(-1)
            for i in range(0, exact.numel(), chunk):
                d = (draw[i:i + chunk].to(device, torch.float64) - exact[i:i + chunk]).abs()
                d = torch.where(torch.isfinite(d), d, torch.zeros_like(d)).to(torch.float32)
                torch.maximum(noise[i:i + chunk], d, out=noise[i:i + chunk])
            del draw
    except Exception as exc:  # noqa: BLE001 — no draws, no latitude: the first count stands
        if is_out_of_memory(exc):
            raise
        return None
    return noise


# Operations whose float32 results are exact in any kernel: they move, select, compare or make values and round
# nothing, so the draws leave their outputs as they are (moved, they would add latitude no honest kernel needs: four
# clone() calls before level2/85's GroupNorm doubled its noise; the review of the twenty-third session).  By
# overload packet name; `_to_copy` is exact only where the dtype stays (a float64 to float32 cast rounds).
_EXACT_OPS = frozenset((
    "clone", "copy", "alias", "lift_fresh", "detach", "_unsafe_view", "view", "reshape", "_reshape_alias",
    "expand", "permute", "transpose", "t", "squeeze", "unsqueeze", "select", "slice", "narrow", "diagonal",
    "unfold", "split", "split_with_sizes", "unbind", "chunk", "flatten", "contiguous", "repeat", "tile", "flip",
    "roll", "rot90", "cat", "stack", "hstack", "vstack", "constant_pad_nd", "reflection_pad1d", "reflection_pad2d",
    "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d", "index", "index_select",
    "gather", "take", "take_along_dim", "masked_select", "masked_fill", "where", "embedding", "tril", "triu",
    "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "im2col", "upsample_nearest1d", "upsample_nearest2d",
    "upsample_nearest3d", "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d",
    "relu", "neg", "abs", "sign", "sgn", "floor", "ceil", "round", "trunc", "max", "min", "amax", "amin",
    "maximum", "minimum", "fmax", "fmin", "clamp", "clamp_min", "clamp_max", "hardtanh", "max_pool1d",
    "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "max_pool3d_with_indices", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "sort", "topk", "kthvalue", "median", "cummax", "cummin",
    "zeros_like", "ones_like", "full_like", "empty_like", "empty_strided", "new_zeros", "new_ones", "new_full",
    "new_empty", "new_empty_strided", "fill", "zero", "scalar_tensor"))


@functools.lru_cache(maxsize=None)
def _rounding_draw_class():
    """The dispatch mode's class, made on first use (torch is imported only where the judge needs it)."""
    import weakref

    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves, tree_map

    class _RoundingDraw(TorchDispatchMode):
        """Moves every finite float32 element of every operation's fresh output by about ROUNDING_ULPS ulps, up or
        down at random (a generator of its own: the process's RNG, which kgym's guards watch, is left alone).  Views,
        in-place results, operations that round nothing (_EXACT_OPS) and values made from no floating input are left
        as they are.  Integer or boolean tensors computed from floating values (indices, masks, counts) are followed
        through views and integer arithmetic: where one takes part in a floating result, a moved value may have
        picked another element or branch, the draw would measure that and not rounding, and ``to_integer`` tells
        _rounding_noise to give no latitude (a max pool's indices, made and dropped, change nothing)."""

        def __init__(self, gen, device):
            super().__init__()
            self.gen, self.device = gen, device
            self.to_integer = False  # an integer or boolean tensor made from floating values was used again
            # Such tensors, while they live: id -> weak reference (not a WeakSet, whose lookups compare tensors
            # with ==, elementwise).
            self.made = {}

        def was_made(self, t):
            ref = self.made.get(id(t))
            return ref is not None and ref() is t

        def nudge(self, t):
            import torch

            if not (isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.numel()):
                return t
            # Normal, not ±1: along a chain of elementwise operations ±1 moves cancel exactly (+a, then -a) on half
            # the elements of a draw, which would leave them no latitude at all.
            g = torch.randn(t.shape, generator=self.gen, device=self.device, dtype=torch.float32).to(t.device)
            moved = torch.addcmul(t, t, g, value=ROUNDING_ULPS * 2.0 ** -23)
            return torch.where(torch.isfinite(moved), moved, t)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            import torch

            kwargs = kwargs or {}
            given = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
            uses_made = any(self.was_made(a) for a in given)
            floating = [a for a in given if a.is_floating_point()]
            out = func(*args, **kwargs)
            results = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            if uses_made:
                if any(t.is_floating_point() or t.is_complex() for t in results):
                    self.to_integer = True  # the indices or the mask chose floating values
                else:
                    for t in results:  # a view of them, or arithmetic on them: followed further
                        self.made[id(t)] = weakref.ref(t)
            if floating:
                # In-place and out= results too: copy_ of floats into a long tensor makes indices as .long() does.
                for t in results:
                    if not (t.is_floating_point() or t.is_complex()):
                        self.made[id(t)] = weakref.ref(t)
            if not floating or any(r.alias_info is not None for r in func._schema.returns):
                return out
            name = func.overloadpacket.__name__
            if name in _EXACT_OPS or (name == "_to_copy" and all(t.dtype == floating[0].dtype for t in results)):
                return out
            return tree_map(self.nudge, out)

    return _RoundingDraw


def _RoundingDraw(gen, device):
    """An instance of the dispatch mode (_rounding_draw_class)."""
    return _rounding_draw_class()(gen, device)


def _float64_copies(ref_model, inputs, on_cpu=False):
    """The reference model and its inputs in float64 (same weights, same values), for _fp64_facts and _tail_facts;
    ``on_cpu``: in host memory."""
    import copy

    import torch

    model64 = copy.deepcopy(ref_model).double()
    if on_cpu:
        model64 = model64.cpu()
    inputs64 = [x.to("cpu" if on_cpu else x.device, torch.float64) if torch.is_tensor(x) and x.is_floating_point()
                else (x.cpu() if on_cpu and torch.is_tensor(x) else x) for x in inputs]
    return model64, inputs64


class _ReferenceCannot(Exception):
    """The reference itself could not run as the small-elements check runs it (in float64, or on inputs moved by one
    ulp): a fact of the task, whatever the candidate did (only the judge's model and inputs take part)."""


# Failures of the device or of a library's resources, not of the task: they stay errors (the check fails closed), as
# they may follow from what else holds the GPU (the candidate's memory among it).  cuBLAS, cuDNN and cuFFT name their
# allocation failures without saying "out of memory".
_DEVICE_FAULTS = ("CUDA error", "CUBLAS_STATUS", "CUDNN_STATUS", "cuDNN error", "CUFFT", "ALLOC_FAILED",
                  "NOT_INITIALIZED", "device-side assert", "illegal memory", "AcceleratorError")


@contextlib.contextmanager
def _reference_runs(how):
    """Turns a failure of the reference's own run into _ReferenceCannot (a fact of the task: it raises on float64,
    say); out of memory passes as it is (re-run alone, or in host memory: Evaluation.tail_facts), and so does a
    fault of the device or of a library's resources (_DEVICE_FAULTS: an error fact, which fails closed)."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001
        text = f"{type(exc).__name__}: {exc}"
        if is_out_of_memory(exc) or any(k in text for k in _DEVICE_FAULTS):
            raise
        raise _ReferenceCannot(f"the reference cannot run {how}: {text}"[:300]) from exc


def _tail_skipped(exc):
    """The small-elements check's facts where the task's reference cannot take part in it (_ReferenceCannot): no
    element checked, so none failed, and why.  Sound because the candidate has no part in the reason (the judge's
    model, weights and inputs alone); a reference that refuses float64 would otherwise fail every candidate."""
    return {"tiny": None, "checked": 0, "mismatches": 0, "skipped": str(exc)[:300]}


def _tail_facts(ref_model, inputs, ref_out, cand_out, atol, on_cpu=False):
    """The small-elements check (compare.tail_tolerance announced it; docs/evaluation-protocol.md, "Small
    elements").  Its elements are the tiny ones of the float32 reference r: 0 < |r| < ``atol`` (the applied
    absolute tolerance, which alone would accept a zero there).  The reference is re-run in float64 on its inputs
    and weights (e), and TAIL_DRAWS times more in its own precision with every floating input, parameter and buffer
    moved by one ulp (random signs from the judge's own generator, seeded: the same draws every time).  A tiny
    element is checked when |e| >= TAIL_LEAST and neither r nor any draw is further than TAIL_CONDITIONED·|e| from
    e: the element is determined by the inputs to that accuracy, through the rounding of every intermediate as the
    reference computes them (a GEMM element near zero is the rounding noise of a cancellation and is left out; a
    cumprod's k-th product moves by ~sqrt(k) ulps and is checked).  It passes when |c - e| <= TAIL_BOUND·|e|.
    ``mismatches`` counts the checked elements that do not pass (NaN and inf among them).  ``on_cpu``: all of it in
    host memory."""
    import copy
    import itertools

    import torch

    from . import compare

    with torch.no_grad(), _reference_runs("in float64"):
        model64, inputs64 = _float64_copies(ref_model, inputs, on_cpu)
        exact = [t.reshape(-1) for t in _tensor_list(model64(*inputs64))]
        del model64, inputs64
    with torch.no_grad():
        refs, cands = _tensor_list(ref_out), _tensor_list(cand_out)
        if len(refs) != len(exact) or len(cands) != len(exact):
            raise RuntimeError(f"{len(exact)} float64 outputs for {len(refs)} reference and {len(cands)} candidate "
                               "outputs")
        chunk = 1 << 24

        def steady_so_far(mask, o, e):
            """mask &= |o - e| <= TAIL_CONDITIONED·|e|, a chunk at a time: a byte an element kept, not the float64
            distances (at level1/90's full size, 8 GB an output), and float64 temporaries of a chunk only.  NaN
            compares false: such an element is not checked."""
            o = o.detach().reshape(-1)
            for i in range(0, e.numel(), chunk):
                ee = e[i:i + chunk]
                mask[i:i + chunk] &= ((o[i:i + chunk].to(ee.device, torch.float64) - ee).abs()
                                      <= compare.TAIL_CONDITIONED * ee.abs())

        # Whether r and every draw lie within TAIL_CONDITIONED·|e| of e, per element (where e lies).
        steady = []
        for r, e in zip(refs, exact):
            mask = torch.ones(e.numel(), dtype=torch.bool, device=e.device)
            steady_so_far(mask, r, e)
            steady.append(mask)
        model = copy.deepcopy(ref_model)
        if on_cpu:
            model = model.cpu()
        weights = [p for p in itertools.chain(model.parameters(), model.buffers()) if p.is_floating_point()]
        saved = [p.detach().clone() for p in weights]
        device = exact[0].device if exact else torch.device("cpu")
        gen = torch.Generator(device=device)
        gen.manual_seed(compare.TAIL_SEED)

        def nudge(t):
            up = torch.randint(0, 2, t.shape, generator=gen, device=device, dtype=torch.bool).to(t.device)
            return torch.nextafter(t, torch.where(up, torch.inf, -torch.inf).to(t.dtype))

        for _ in range(compare.TAIL_DRAWS):
            for p, p0 in zip(weights, saved):
                p.copy_(nudge(p0))
            args = [nudge(x.cpu() if on_cpu else x) if torch.is_tensor(x) and x.is_floating_point()
                    else (x.cpu() if on_cpu and torch.is_tensor(x) else x) for x in inputs]
            with _reference_runs("on inputs moved by one ulp"):
                draw = [t.reshape(-1) for t in _tensor_list(model(*args))]
            del args
            if len(draw) != len(exact):
                raise RuntimeError("the reference returned another number of outputs when its inputs moved")
            for mask, e, o in zip(steady, exact, draw):
                steady_so_far(mask, o, e)
            del draw
        del model, weights, saved
        facts = {"tiny": 0, "checked": 0, "ill_conditioned": 0, "least": 0, "mismatches": 0, "max_rel_error": 0.0,
                 "first_mismatch": None, "first_mismatch_values": None}
        for k, (r, c, e, m) in enumerate(zip(refs, cands, exact, steady)):
            if r.dtype != torch.float32:
                continue
            shape = r.shape
            r, c = r.detach().reshape(-1), c.detach().reshape(-1)
            # Summed where e lies and fetched once an output (each fetch on a GPU waits for a turn between
            # contexts): tiny, checked, least, ill-conditioned, mismatches (exact in float64: below 2**53), the
            # largest relative error, and the first mismatch's flat index (e.numel() where none).
            acc = torch.zeros(5, dtype=torch.float64, device=e.device)
            worst = torch.zeros((), dtype=torch.float64, device=e.device)
            first = torch.full((), e.numel(), dtype=torch.int64, device=e.device)
            for i in range(0, e.numel(), chunk):
                ee, mm = e[i:i + chunk], m[i:i + chunk]
                rr = r[i:i + chunk].to(ee.device, torch.float64).abs()
                cc = c[i:i + chunk].to(ee.device, torch.float64)
                tiny = (rr > 0) & (rr < atol)
                mag = ee.abs()
                big = tiny & (mag >= compare.TAIL_LEAST)
                well = big & mm
                err = (cc - ee).abs()
                bad = well & ~(err <= compare.TAIL_BOUND * mag)  # NaN compares false: a mismatch
                acc += torch.stack([tiny.sum(), well.sum(), (tiny & ~big).sum(), (big & ~well).sum(),
                                    bad.sum()]).double()
                rel = torch.where(well, err / mag.clamp_min(compare.TAIL_LEAST), 0.0)
                worst = torch.maximum(worst, torch.where(torch.isnan(rel), torch.inf, rel).max())
                at = torch.where(bad, torch.arange(i, i + bad.numel(), device=bad.device), e.numel()).min()
                first = torch.minimum(first, at)
            got = torch.cat([acc, worst.reshape(1), first.double().reshape(1)]).tolist()
            for name, v in zip(("tiny", "checked", "least", "ill_conditioned", "mismatches"), got[:5]):
                facts[name] += int(v)
            facts["max_rel_error"] = max(facts["max_rel_error"], got[5])
            j = int(got[6])
            if j < e.numel() and facts["first_mismatch"] is None:
                at = [int(x) for x in torch.unravel_index(torch.tensor(j), shape)] if len(shape) else []
                facts["first_mismatch"] = ([k] if len(refs) > 1 else []) + at
                facts["first_mismatch_values"] = [float(e[j]), float(c[j])]
    return facts


class _Held:
    """A variant's inputs, reference output and tolerance, held by a judge for its task's next jobs.

    Why: the samples of a GRPO group are jobs of one task, and a variant's inputs follow from the job's seed and
    the variant alone, so every sample's judge drew the same inputs and ran the same reference on them again (on
    the GRPO mix, ~13 variants an evaluation: the inputs, the reference's forward and its tolerance were ~20% of a
    judge's own time).  A kept judge serves only jobs of the task it ran (kgym's pair.c, by the task's bytes), and
    the key (Evaluation._held_key) holds the rest.

    Trust: the inputs are copied from the new block no other process has been given yet (the runner gets its
    descriptor with the call) just before the reference runs on them, into this process's host memory, which no
    runner maps, and held only if the block still equals the copy after the reference ran.  A later job's block is
    a new one filled from them: the candidate gets exactly the inputs the held output was computed on, and nothing
    a runner does to its block reaches them.  Held: variants up to _HELD_ENTRY_MAX of inputs and outputs,
    _held_total_max() in all (least recently used out first); plain init arguments only.  Host memory, so that a
    kept judge's device memory stays as a new judge's (_clean_for_next); pinned on a GPU, so that the copy into
    the next block is one fast transfer."""

    def __init__(self, init, inputs, ref_out, tol, nbytes):
        self.init, self.inputs, self.ref_out, self.tol, self.nbytes = init, inputs, ref_out, tol, nbytes

    @staticmethod
    def fresh(held, device):
        """New tensors on ``device`` with the values of ``held`` (an output: a tensor, or lists and tuples of
        them): whatever later code does to them, the held ones stay.  On a GPU the copies leave pinned memory
        without a wait (stream-ordered before every use; held memory is never written)."""
        gpu = device.startswith("cuda")
        return _map_tensors(held, lambda t: t.to(device, non_blocking=gpu, copy=True))

    @staticmethod
    def fresh_inputs(held, device):
        """fresh() for an argument list: its tensors copied, its plain values as they are."""
        import torch

        return [_Held.fresh(x, device) if torch.is_tensor(x) else x for x in held]

    @staticmethod
    def snapshot(key, init, inputs):
        """Host copies of ``inputs`` (_host_copy), taken before the reference runs on them; None where the
        variant is not to be held: no key, init arguments that are not plain values, inputs that are not tensors
        and plain values, or more than _HELD_ENTRY_MAX of them."""
        import torch

        if key is None or key in _HELD or not all(_plain(x) for x in init):
            return None
        if not all(torch.is_tensor(x) or _plain(x) for x in inputs):
            return None
        if sum(x.numel() * x.element_size() for x in inputs if torch.is_tensor(x)) > _HELD_ENTRY_MAX:
            return None
        try:
            return [_host_copy(x) if torch.is_tensor(x) else x for x in inputs]
        except Exception:  # noqa: BLE001 — no host memory for it (pinned memory may be short): not held
            return None

    @staticmethod
    def keep(key, init, before, inputs, ref_out, tol):
        """Holds the variant under ``key``: ``before`` (snapshot's) as its inputs, ``ref_out`` and ``tol`` as the
        reference's output and tolerance.  Not where the reference changed its inputs (``inputs`` no longer
        equal ``before``: a candidate given the held ones would get other inputs than the first job's did), or
        the output is not tensors or would pass _HELD_ENTRY_MAX with the inputs."""
        import torch

        if before is None or _map_tensors(ref_out, lambda t: t) is None:
            return
        nbytes = sum(t.numel() * t.element_size() for t in [x for x in before if torch.is_tensor(x)] +
                     _tensor_list(ref_out))
        if nbytes > _HELD_ENTRY_MAX:
            return
        try:
            if not all(_same_bytes(h, x) if torch.is_tensor(x) else h == x for h, x in zip(before, inputs)):
                return
            entry = _Held(tuple(init), before, _map_tensors(ref_out, _host_copy), copy.copy(tol), nbytes)
        except Exception:  # noqa: BLE001 — as in snapshot
            return
        _HELD.put(key, entry)


class _HeldCache(collections.OrderedDict):
    """_Held entries by key, least recently used first: a hit moves its entry to the end.  ``nbytes``: what the
    entries hold in all, never more than _held_total_max()."""

    nbytes = 0

    def get(self, key, default=None):
        if key is None or key not in self:
            return default
        self.move_to_end(key)
        return self[key]

    def put(self, key, entry):
        """Holds ``entry`` (new under ``key``), letting the least recently used go until it fits; not at all when
        it alone is more than the budget."""
        total = _held_total_max()
        if entry.nbytes > total:
            return
        while self and self.nbytes + entry.nbytes > total:
            self.nbytes -= self.popitem(last=False)[1].nbytes
        self[key] = entry
        self.nbytes += entry.nbytes


# One variant's held inputs and outputs at most (bytes), and all of a judge's (host memory): the GRPO mix's
# variants below the task's own sizes are a few MB each; the task-sized ones (base, size_large) run again.  On a
# GPU the host memory is pinned: 8 kept judges hold at most 2 GiB of it (up to twice that from torch's pinned
# allocator, which rounds a block up to a power of two and keeps what is freed for reuse).
_HELD_ENTRY_MAX = 64 << 20
_HELD_TOTAL_MAX = 256 << 20
_HELD = _HeldCache()
# A kept judge's facts about its task's models: whether the reference has constant parameters (by task), and the
# parameters variant's models.constant_keys (by held key).  Small: a few pairs a task.
_CONSTANT_PARAMETERS: dict = {}
_SPREAD_KEYS: dict = {}


def _host_copy(t):
    """A copy of tensor ``t`` in this process's host memory, pinned when ``t`` is on a GPU (the copy back into a
    block is then one fast transfer)."""
    import torch

    out = torch.empty(t.shape, dtype=t.dtype, pin_memory=t.is_cuda)
    out.copy_(t.detach())
    return out


def _held_total_max():
    """What a judge may hold in all: _HELD_TOTAL_MAX, and no more than an eighth of the address space kgym lets it
    have (RLIMIT_AS, `--memory-limit`), so a kept judge has nearly the room a new one has for the references it
    still runs (red team: held memory counts against that limit)."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return _HELD_TOTAL_MAX if soft == resource.RLIM_INFINITY else min(_HELD_TOTAL_MAX, soft // 8)


def _same_bytes(held, x):
    """Whether tensor ``x`` holds exactly ``held``'s bytes (a snapshot of it): bit for bit, so NaNs compare equal
    and -0.0 differs from 0.0 (torch.equal would say otherwise of both).  Compared where ``x`` lies: the snapshot
    (pinned host memory on a GPU) goes to the device, one fast copy, instead of ``x`` coming back through pageable
    memory to be compared by the CPU (~20 ms a 64 MiB variant on an H200, in a shared phase: twenty-fourth
    session)."""
    import torch

    if x.shape != held.shape or x.dtype != held.dtype:
        return False
    x = x.detach().contiguous()
    ref = held.to(x.device, non_blocking=x.is_cuda).contiguous()
    return torch.equal(x.reshape(-1).view(torch.uint8), ref.reshape(-1).view(torch.uint8))


def _plain(x):
    """Whether ``x`` is a plain value a held entry may keep as it is (no tensor, nothing mutable)."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return True
    return isinstance(x, tuple) and all(_plain(y) for y in x)


def _map_tensors(out, fn):
    """``out`` (a tensor, or a list or tuple of them, nested) with ``fn`` applied to each tensor; None where it
    holds anything else."""
    import torch

    if torch.is_tensor(out):
        return fn(out)
    if isinstance(out, (list, tuple)):
        parts = [_map_tensors(o, fn) for o in out]
        if any(p is None for p in parts):
            return None
        return parts if isinstance(out, list) else tuple(parts)
    return None


class _DegenerateTask(Exception):
    """The task itself gives nothing to judge (tiny_run: a reference output without elements)."""


def _no_elements(out):
    """Whether ``out`` is a tensor, or a (nested) sequence of nothing but tensors, without a single element."""
    import torch

    if torch.is_tensor(out):
        return out.numel() == 0
    if isinstance(out, (list, tuple)):
        return all(_no_elements(o) for o in out)
    return False


def _tensor_list(out):
    import torch

    if torch.is_tensor(out):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensor_list(o)]
    return []


class _Inputs(list):
    """A timed call's input set (Evaluation.timing's make_inputs) with the seed it was drawn from, so it can be drawn
    again as it was: a reference that writes into its inputs changes the set the timer handed it."""

    def __init__(self, values, seed):
        super().__init__(values)
        self.seed = seed


def _reference_writes_inputs(ref, inputs):
    """(the reference's output on a copy of ``inputs``, whether it wrote into that copy).  Where it does, inputs a
    reference already ran on are not the inputs its output belongs to: the float64 adjudication and the small-elements
    check re-run the reference on them (before: a cumprod after x.mul_(0.5) was checked against the product of x/4,
    no element was well-conditioned, and a cut passed the timed full rule).  NaN inputs count as written (a redraw
    then costs time, never a verdict)."""
    import torch

    args = _clone_args(inputs)
    with torch.no_grad():
        out = ref(*args)
    writes = any(torch.is_tensor(a) and torch.is_tensor(x) and not torch.equal(a, x) for a, x in zip(args, inputs))
    return out, writes


def _clone_args(args):
    import torch

    return [x.clone() if torch.is_tensor(x) else x for x in args]


def _clone_out(out):
    import torch

    if torch.is_tensor(out):
        return out.detach().clone()
    if isinstance(out, (list, tuple)):
        return type(out)(_clone_out(o) for o in out) if isinstance(out, list) else tuple(_clone_out(o) for o in out)
    return out


def _passes(cmp, tol=None):
    """Whether compare's facts are a pass without adjudication: no error, shape and dtype right, no mismatch;
    with ``tol`` below the floor, also no more than its share of relative mismatches (result.c's rule)."""
    if cmp.get("error") or not cmp.get("shape_ok") or not cmp.get("dtype_ok", True) or cmp.get("mismatches"):
        return False
    if tol is not None and tol.relative_atol is not None:
        missed = cmp.get("relative_mismatches")
        return isinstance(missed, int) and missed <= tol.share * max(int(cmp.get("elements") or 0), 1)
    return True


def _passes_but_tail(cmp, tol, fp64):
    """Whether C passes compare's facts (with the float64 adjudication's, where run) before it asks for the
    small-elements check's: only then are they worth gathering (result.c asks for them last)."""
    if _passes(cmp, tol):
        return True
    if cmp.get("error") or not cmp.get("shape_ok") or not cmp.get("dtype_ok", True):
        return False
    return isinstance(fp64, dict) and fp64.get("mismatches") == 0


def _first_dtype(out):
    import torch

    if torch.is_tensor(out):
        return out.dtype
    if isinstance(out, (list, tuple)) and out and torch.is_tensor(out[0]):
        return out[0].dtype
    return torch.float32


def _hide_fd(fd):
    """Moves the protocol socket to a random high descriptor: a candidate guessing small fd numbers does not
    find it (the nonce is what actually protects the channel)."""
    import random

    try:
        target = random.SystemRandom().randrange(300, 1000)
        new = os.dup2(fd, target, inheritable=False)
        os.close(fd)
        return new
    except OSError:
        return fd


# What the runner is told of the job: where the candidate is and how to lock itself down.  Not the task, the
# nonce, the tolerances or the variants.  kgym's pair.c lists the same keys (runner_part) for a warm pair's prelude.
_RUNNER_JOB_KEYS = ("workdir", "device", "threads", "sandbox", "runner_uid", "policy")


def _file_name(job):
    """The name of the candidate's source file in the evaluation's source folder (the rule is
    transport.source_file_name's, which the runner applies to what ``load`` sends it)."""
    from ..shared import transport

    return transport.source_file_name(job.get("candidate"))


def _source_path(job):
    from ..shared import transport

    return transport.source_path(job["workdir"], _file_name(job))


def _runner_owner(job):
    """The runner's uid when this process can give it files (root), else None (the runner runs as ours)."""
    uid = job.get("runner_uid")
    return int(uid) if uid and os.geteuid() == 0 else None


def _prepare_workdir(job):
    """The evaluation's folder laid out for the runner (transport.py), before its set-up binds it into the
    runner's view: the workdir stays ours, 0711 (the runner passes through it, lists and changes nothing);
    src/ is ours, the runner's group may read it (0750; the file comes at ``load``); run/ is the runner's (0700).
    A re-run of the same job (kgym's solo re-run after running out of memory) starts both again empty."""
    import shutil

    from ..shared import transport

    workdir = job.get("workdir")
    if not workdir:
        return
    owner = _runner_owner(job)
    os.chmod(workdir, 0o711)
    src = os.path.dirname(transport.source_path(workdir, None))
    run = transport.run_dir(workdir)
    for d in (src, run):
        if os.path.lexists(d):
            shutil.rmtree(d) if os.path.isdir(d) and not os.path.islink(d) else os.unlink(d)
    os.mkdir(src, 0o700)
    os.mkdir(run, 0o700)
    if owner is not None:
        os.chown(src, 0, owner)
        os.chmod(src, 0o750)
        os.chown(run, owner, owner)


def _write_source(job, data):
    """The checked bytes into the source folder, as a new file (never through anything that was there) the runner
    may only read: root's 0440 with the runner's group, in a folder then 0550 (when kgym is not root, the
    runner runs as our uid, so the file modes are no barrier to it: Landlock is; sandbox._checked_bytes says
    which guards stand).  Returns the path."""
    path = _source_path(job)
    owner = _runner_owner(job)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o400)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if owner is not None:
            os.fchown(fd, 0, owner)
            os.fchmod(fd, 0o440)
    finally:
        os.close(fd)
    os.chmod(os.path.dirname(path), 0o550 if owner is not None else 0o500)
    return path


def _runner_part(job):
    """What of a job reaches the runner at its setup (nothing of the candidate: its source and file name come
    with ``load``, so a warm runner serves a job whatever its candidate is called)."""
    return {k: job.get(k) for k in _RUNNER_JOB_KEYS}


class _Early:
    """The warm start's outcome, taken once the job has come: the runner's link and setup report, or what
    went wrong, raised where a cold start would have raised it."""

    def __init__(self, value=None, exc=None):
        self.value, self.exc = value, exc

    def result(self):
        if self.exc is not None:
            raise self.exc
        return self.value


def _warm_start(peer_fd, prelude, device):
    """The runner's set-up and both CUDA contexts, from the prelude, before the job exists."""
    import socket as _socket

    try:
        if device.startswith("cuda"):
            _enable_fused_compare()
        return _Early(_start_runner(_socket.socket(fileno=peer_fd), prelude, device, []))
    except (Exception, RunnerLost) as exc:  # noqa: BLE001 — raised where a cold start would raise it
        return _Early(exc=exc)


def _setup_split(device):
    """Whether a cold start splits its set-up (the default on a GPU; KGYM_SETUP_SPLIT=0 turns it off, for a paired
    measurement): the driver's initialisation (cuInit, in both processes) and the runner's sandbox run outside any
    GPU phase, and only the contexts and the device-memory probe inside the shared phase (purpose setup), which
    every timing window has to drain.  Making a context outside any phase puts other evaluations' timing off
    (docs/PERFORMANCE.md, nineteenth session: speedups moved by up to 14.85%); cuInit and the sandbox do not: three
    pairs of `sh bench/grpo.sh 6 --baseline build/kgym --head-env KGYM_SETUP_SPLIT=1 --repeat 3` on an H200
    gave ×1.062 at the median, and every split run's speedups within 1.62% of the first unsplit run's, the
    unsplit runs' own within 1.64% (twentieth session)."""
    return device.startswith("cuda") and os.environ.get("KGYM_SETUP_SPLIT", "1") != "0"


def _stage_reserve():
    """Whether each stage reserves its own device memory (Evaluation.reserve_for): KGYM_STAGE_RESERVE=1, for
    measurements.  By default the larger of the correctness and timing figures is reserved from correctness to the
    end.  Measured on an H200 (forty-second session, docs/PERFORMANCE.md): on the plain mix at 10 jobs the stage
    figures cut the waits for memory by 18-38% in every pair; throughput x0.97-x0.99 with the compile cache warm and
    x1.04-x1.09 cold (single runs of different calls, inside a run's +-8%): not settled.  And the correctness figure
    is below what that stage was seen to hold (gpu_phases.memory_by_stage: a reduction's float64 adjudication holds
    three input sets, 24.4 GiB against 8), so it leans on the device's unreserved tenth and the retry alone."""
    return os.environ.get("KGYM_STAGE_RESERVE") == "1"


# The most device memory either process of a pair may hold, as NVML counts it by pid, for its wind-down to run
# outside the GPU phases under KGYM_EXIT_PHASE=auto (_wind_down_plan): a torch context alone is ~0.55 GiB on an H200.
_EXIT_UNPHASED_MAX = 2 << 30


def _wind_down_plan(device, census):
    """Whether the wind-down holds a shared GPU phase, and why: {"phased", "why", "runner_bytes", "judge_bytes",
    "bound_bytes"}; the two processes' device memory as NVML counts it, by the pids kgym gave in its census answer
    (the runner's and this judge's as kgym's supervisor sees them), is read in every case where it can be, for the
    result (``gpu_phases.wind_down``).  The wind-down tears down the runner's context with its process, and the
    judge's shared blocks, allocator cache and cuBLAS workspaces (_clean_for_next; its context too where it is not
    kept).

    By default it is phased.  Torn down outside any phase, honest wind-downs gained throughput on the GRPO mix in
    one session (H200, four pairs: x1.066, x1.051, x0.984, x1.060) and a teardown unmaps whatever device memory its
    process held, which for the runner the candidate decides: eight honest victims timed beside 24 runners that each
    ended holding 8 GiB in 64 blocks (tests/fixtures/gpu_overlap/hog_exit.py) kept their speedups within 0.5% with
    the wind-down phased; without it one came out 3.6% high and two were re-measured to six rounds (timed calls
    stalled ~1 ms; docs/PERFORMANCE.md, thirty-ninth session).  KGYM_EXIT_PHASE=auto leaves the phases only on a
    fact the candidate cannot forge: NVML's figures, each at most _EXIT_UNPHASED_MAX ("auto:MIB": another bound).
    It held against the attack (hog_exit.py's runners all phased; hog_exit_bound.py's, unphased at 1.8 GiB in ~563
    segments, moved no victim more than 0.46%) but gained nothing measurable (five GRPO pairs, median x1.008: 56 of
    64 wind-downs unphased), and a 0.04 ms kernel's timed calls met more stalls (up to 5 ms; two evaluations
    re-measured to six rounds against none in six phased runs): fortieth session.  So it is for measurements only,
    as is "0" (never phased).  Under auto the judge's own pid must be listed under kgym's pid for it, or the two do
    not count pids alike and the runner's figure could be another process's: phased; phased, too, where NVML cannot
    list the device's processes, where kgym gave no pids (no census: an unsandboxed runner), and where either figure
    is over the bound.  The runner cannot grow after the reading: it runs no candidate
    code between its last answer and its exit (the candidate language has no threads, finalizers or exit hooks).
    Also phased under auto: a figure NVML cannot give, a judge figure below this process's own allocator
    reservation (the figures are not these processes'), and a census that counted processes besides the runner, or
    could not count (they may hold device memory under pids of their own).  Not covered, one more reason auto is not
    the default: host memory the candidate pins (``pin_memory=True`` is in the language) is mapped for the device
    and unpinned at teardown, and NVML's figure does not count it (red team 40, from the source; on an H200, 24
    runners unpinning 4 GiB each outside any phase moved no neighbour past 0.34%: forty-first session)."""
    setting = os.environ.get("KGYM_EXIT_PHASE", "1")
    plan = {"phased": True, "why": None, "runner_bytes": None, "judge_bytes": None, "bound_bytes": None}
    bound = -1
    if setting == "auto":
        bound = _EXIT_UNPHASED_MAX
    elif setting.startswith("auto:"):
        try:
            bound = int(float(setting[5:]) * (1 << 20))
        except (ValueError, OverflowError):  # "auto:x", "auto:inf"
            pass
    if bound >= 0:
        plan["bound_bytes"] = bound
    state = _gpu_state(device)
    used = state.processes() if state is not None else None
    judge, runner = census.get("judge_pid"), census.get("runner_pid")
    if used is None:
        why = "NVML cannot list the device's processes"
    elif type(judge) is not int or type(runner) is not int:
        why = "kgym gave no pids (no census)"
    elif judge not in used:
        why = "NVML does not list this judge under kgym's pid for it"
    elif runner not in used:
        why = "NVML does not list the runner under kgym's pid for it"
    elif not all(type(used[pid]) is int and 0 <= used[pid] < 1 << 63 for pid in (runner, judge)):
        # (GpuState.processes gives None for NVML's "not available"; nothing past 2**63 - 1 may reach the
        # line to kgym, whose JSON parser refuses it and would end the evaluation as a protocol violation)
        why = "NVML gives no figure for the runner or the judge"
    else:
        why = None
        plan.update(runner_bytes=used[runner], judge_bytes=used[judge])
        # What this process holds by its own count must be in its NVML figure, or the figures are not these
        # processes' (another pid namespace's pids matching kgym's by chance).
        import torch

        if torch.cuda.memory_reserved(device) > used[judge]:
            why = "NVML counts this judge below its own allocator's reservation"
        elif census.get("processes") != 0 or census.get("counted") is not True:
            # Processes the candidate left running may hold device memory under pids of their own.
            why = "kgym's census did not count the runner's uid to nothing"
    if setting == "0":
        return dict(plan, phased=False, why="KGYM_EXIT_PHASE=0")
    if bound < 0:
        return dict(plan, why="phased by default" if setting == "1" else f"KGYM_EXIT_PHASE={setting[:40]}")
    if why is not None:
        return dict(plan, why=why)
    over = [name for name in ("runner", "judge") if plan[name + "_bytes"] > bound]
    if over:
        return dict(plan, why=f"the {' and the '.join(over)} hold{'s' if len(over) == 1 else ''} more device memory "
                              f"than {bound >> 20} MiB")
    return dict(plan, phased=False, why=f"both hold at most {bound >> 20} MiB of device memory")


def _runner_connections(device):
    """Whether the runner keeps the zygote's CUDA_DEVICE_MAX_CONNECTIONS (kgym's 1: zygote.c) through its clean
    environment, so that its context too has one hardware work queue: the default on a GPU;
    KGYM_RUNNER_CONNECTIONS=0 turns it off, for a paired measurement.  A runner's context is made for every
    evaluation (a judge's for a third of them: kept judges), under the driver's machine-wide lock, and a context with
    one queue takes it half as long (bench/driver_probe.py).  The candidate language has no streams, so a
    candidate's work is one stream either way, as the reference's in the judge.  Two pairs of
    `sh bench/grpo.sh 6 --baseline build/kgym --head-env KGYM_RUNNER_CONNECTIONS=1 --repeat 2` on an H200
    (twenty-first session): x1.122 and x1.105, set-up's shared phases 31.5 -> 15.0 s, every speedup within 1.36% of
    the first base run's (base#2's own: 1.54%); the fleet on two H200s x1.445 -> x1.662."""
    return (device.startswith("cuda") and os.environ.get("KGYM_RUNNER_CONNECTIONS") != "0"
            and bool(os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")))


def _start_runner(sock, job, device, findings, phase=None):
    """Hands the runner its part of the job; returns (link, the runner's sandbox report).  ``phase``: None where
    the caller holds the set-up's GPU phase; else a context manager for it, taken here once the driver is up in
    both processes (_setup_split)."""
    from ..shared import cudashare

    link = RunnerLink(sock, device, findings)
    _prepare_workdir(job)
    sub = {k: job[k] for k in _RUNNER_JOB_KEYS if k in job}
    if sub.get("policy") is False:
        sub["policy"] = {"runtime": {"launch_required": False, "check_aten": False}}
    if phase is not None:
        sub["context_later"] = True
    if _runner_connections(device):
        sub["sandbox"] = dict(sub.get("sandbox") or {},
                              env_keep=[*(sub.get("sandbox") or {}).get("env_keep", ()), "CUDA_DEVICE_MAX_CONNECTIONS"])
    # Both processes start a CUDA context (0.3 s each on an H100 host): the judge starts its own while the
    # runner locks itself down and starts its, instead of one after the other.
    start = cudashare.blocking_sync if phase is not None else cudashare.start_context
    reply, _ = link.ask({"cmd": kinds.CMD_SETUP, "job": sub},
                        meanwhile=(lambda: start(device)) if device.startswith("cuda") else None)
    if reply.get("type") != kinds.REPLY_OK:
        raise RunnerLost(f"the runner failed to set up: {reply}"[:500])
    if phase is None:
        _share_probe(link, reply, device)
        return link, reply
    with phase():
        reply_ctx, _ = link.ask({"cmd": kinds.CMD_CONTEXT}, meanwhile=lambda: cudashare.start_context(device))
        if reply_ctx.get("type") != kinds.REPLY_OK:
            raise RunnerLost(f"the runner failed to make its CUDA context: {reply_ctx}"[:500])
        _share_probe(link, reply, device)
    return link, reply


def _share_probe(link, reply, device):
    """On a GPU: whether tensors cross in device memory, said in the sandbox report (in the set-up's phase)."""
    if device.startswith("cuda"):
        why = link.share_probe()
        sb = reply.setdefault("sandbox", {})
        if why is None:
            sb.setdefault("active", []).append("tensors cross in device memory (CUDA VMM blocks the judge makes)")
        else:
            sb.setdefault("warnings", []).append(f"tensors cross through host memory (slower): {why}"[:400])


def _sandbox_report(setup, judge_active, judge_warnings):
    """The "sandbox" message: the runner's report of its set-up (made before the candidate's first byte was
    read) and the judge's own lockdown.  ``protections`` holds the codes kgym checks against its required list
    (src/eval/result.c); only strings pass."""
    sb = setup.get("sandbox") if isinstance(setup.get("sandbox"), dict) else {}
    # The judge's own protection is the judge's word alone.
    codes = [c for c in (sb.get("protections") or []) if isinstance(c, str) and c != "judge_not_dumpable"]
    return dict(sb, type=kinds.MSG_SANDBOX, runner_pid=setup.get("pid"), runner_uid=setup.get("uid"),
                active=[a for a in (sb.get("active") or []) if isinstance(a, str)] + list(judge_active),
                warnings=[w for w in (sb.get("warnings") or []) if isinstance(w, str)] + list(judge_warnings),
                protections=codes + [c for c in judge_active.codes if c not in codes])


def _no_dumping():
    """The judge cannot be ptraced or have its memory read through /proc, even by its own uid.  Returns
    (active, warnings) for the sandbox report: where the kernel refuses, kgym's required protections miss
    ``judge_not_dumpable`` (never a silent pass)."""
    from ..runner import sandbox  # the lockdown code lives with the runner's; this runs in the judge

    active, warnings = sandbox.Granted(), []
    try:
        sandbox.judge_lockdown(active, warnings)
    except Exception as exc:  # noqa: BLE001 — said in the report, and the protection's code is missing
        warnings.append(f"judge stays dumpable: {type(exc).__name__}: {exc}"[:300])
    return active, warnings


def _enable_fused_compare():
    """compare's fused kernel on this GPU, compiled once per machine into kgym's own cache directory
    ($XDG_CACHE_HOME or ~/.cache, then kgym/judge-triton); the chunked pass where that directory is not safe."""
    from . import compare

    base = os.environ.get("XDG_CACHE_HOME") or (os.path.join(os.environ["HOME"], ".cache")
                                                 if os.environ.get("HOME") else None)
    why = compare.enable_fused(os.path.join(base, "kgym", "judge-triton")) if base else "no HOME"
    if why:
        print(f"kgym judge: outputs compared chunk by chunk, not fused ({why})", file=sys.stderr)


def _learn_launchers(link):
    """After the stages: the signatures Triton made launchers for in the runner (its ``launchers`` answer, the
    runner's word: data, validated word by word) are built into the machine's trusted modules directory, so later
    runners load them instead of running gcc (tritoncache.learn).  Whatever happens here (a runner gone, a
    malformed answer, no compiler) is printed to stderr and ignored: it decides nothing about this evaluation."""
    from ..shared import tritoncache

    findings = len(link.findings)
    try:
        reply, _ = link.ask({"cmd": kinds.CMD_LAUNCHERS})
        if reply.get("type") != kinds.REPLY_OK:
            raise ValueError(f"the runner answered {str(reply)[:200]}")
        facts = tritoncache.learn(reply.get("signatures"))
        if facts["refused"] or facts["failed"]:
            print(f"kgym judge: Triton launchers for later runners: {json.dumps(facts)[:1000]}", file=sys.stderr)
    except (Exception, RunnerLost) as exc:  # noqa: BLE001
        print(f"kgym judge: Triton launchers not learned: {type(exc).__name__}: {exc}"[:500], file=sys.stderr)
    finally:
        # Findings are reported per stage, and the stages are over: whatever this answer carried is dropped, so
        # that it could not count even if something reported findings later.
        del link.findings[findings:]


def _profiled(fn, job=1):
    """``fn()``, under cProfile where kgym's caller set KGYM_JUDGE_PROFILE to a folder: the judge's own stages
    (docs/PERFORMANCE.md, "Profiling the judge"), written there as judge-<pid>-<job>.prof (``job``: the how-manieth
    of this process) once ``fn`` returns or raises.
    A diagnostic for whoever runs kgym, never read by kgym itself; a profile that cannot be written is said on
    stderr.  Time the judge spends waiting for the runner shows as ``recvmsg``."""
    folder = os.environ.get("KGYM_JUDGE_PROFILE")
    if not folder:
        return fn()
    import cProfile
    import json

    global _OPS
    prof = cProfile.Profile()
    before = _driver_counts()
    _OPS = _OpCounter()
    mode = _OPS.mode()
    mode.__enter__()
    try:
        return prof.runcall(fn)
    finally:
        mode.__exit__(None, None, None)
        ops, _OPS = _OPS, None
        after = _driver_counts()
        # Beside the profile, the driver's memory calls the stages made (judge-<pid>-<job>.json): device blocks
        # made (cudashare) and the allocator's segments (cudaMalloc / cudaFree), which wait behind every other
        # process's context starts and ends (docs/PERFORMANCE.md, thirteenth session).
        counts = {k: (after[k] - before[k] if after[k] is not None and before[k] is not None else after[k])
                  for k in after}
        ops.lap("outside")
        counts["aten_ops"] = dict(ops.by_step)
        counts["host_reads"] = dict(ops.reads)
        name = os.path.join(folder, f"judge-{os.getpid()}-{job}")
        try:
            prof.dump_stats(name + ".prof")
            with open(name + ".json", "w") as f:
                json.dump(counts, f)
        except OSError as exc:
            print(f"kgym judge: no profile written to {folder}: {exc}", file=sys.stderr)


_OPS = None  # the _OpCounter of a profiled evaluation (KGYM_JUDGE_PROFILE), else None


class _OpCounter:
    """Under KGYM_JUDGE_PROFILE: the ATen operators the judge ran that are not views (on a GPU, about one kernel
    each), and its host reads of tensor values (_local_scalar_dense: .item(), bool()), by a variant's step
    (run_variant's lap; "outside" for the rest).  On a shared GPU each burst of kernels separated by host work
    can cost a turn between contexts (docs/PERFORMANCE.md, twelfth and thirty-seventh sessions)."""

    def __init__(self):
        import collections

        self.by_step = collections.Counter()
        self.reads = collections.Counter()
        self.ops = self.nreads = 0

    def lap(self, step):
        self.by_step[step] += self.ops
        self.reads[step] += self.nreads
        self.ops = self.nreads = 0

    def mode(self):
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if func is torch.ops.aten._local_scalar_dense.default:
                    counter.nreads += 1
                elif not getattr(func, "is_view", False):
                    counter.ops += 1
                return func(*args, **(kwargs or {}))

        return Mode()


def _driver_counts():
    """What _profiled reports of this process's driver calls so far: device blocks made and mapped (cudashare),
    allocator segments allocated and freed and allocation retries (None where CUDA is not in use here)."""
    from ..shared import cudashare

    out = {"device_blocks_made": cudashare.COUNTS["made"], "device_blocks_opened": cudashare.COUNTS["opened"],
           "segments_allocated": None, "segments_freed": None, "alloc_retries": None}
    try:
        import torch

        if torch.cuda.is_initialized():
            stats = torch.cuda.memory_stats()
            out["segments_allocated"] = int(stats.get("segment.all.allocated", 0))
            out["segments_freed"] = int(stats.get("segment.all.freed", 0))
            out["alloc_retries"] = int(stats.get("num_alloc_retries", 0))
    except Exception:  # noqa: BLE001 — a diagnostic: a poisoned context leaves these None
        pass
    return out


def _process_state():
    """What a new judge process starts with and a job may change: the random generators' states (torch's CPU
    generator as the zygote left it, Python's, numpy's; torch's CUDA generators are made at a process's first CUDA
    use with torch's default seed).  A kept judge (``_serve``'s ``stays``) puts them back before its next job, so
    that a job sees what a new process would."""
    import random

    import numpy
    import torch

    return {"torch_cpu": torch.get_rng_state(), "seed": torch.initial_seed(), "random": random.getstate(),
            "numpy": numpy.random.get_state()}


# Modules whose functions a task could replace for every later job of a kept judge (`torch.relu = ...` at import):
# the identity of every attribute they have when a job starts is compared when it ends.
_WATCHED_MODULES = ("torch", "torch.nn", "torch.nn.functional", "torch.linalg", "torch.fft", "torch.special",
                    "math", "builtins", "numpy", "random")


def _flag(read):
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 — an unreadable flag is compared as its error
        return f"unreadable: {type(exc).__name__}"


def _process_fingerprint():
    """What of this process a job (its task's import, the reference, the judge's own work) could leave changed
    for the next job of a kept judge, as far as it can be seen: torch's process-wide modes and defaults, the
    environment, signal handlers, live threads, and which object each name of
    _WATCHED_MODULES (and torch.Tensor) is bound to.  ``_clean_for_next`` compares the fingerprint taken before a
    job's task is loaded with one taken after the job: any difference and the judge is not kept (a new process
    judges the next job).  The random generators are put back instead (_restore_process_state); the precision
    flags and thread count are set again by every job.  Not registries that torch itself grows on first use
    (operators and library impls: the first torch.profiler session adds some, so every judge that timed would
    look changed)."""
    import signal
    import threading

    import torch

    b = torch.backends
    flags = {
        "default_dtype": _flag(lambda: str(torch.get_default_dtype())),
        "default_device": _flag(lambda: str(torch.get_default_device())),
        "grad": _flag(torch.is_grad_enabled),
        "inference_mode": _flag(torch.is_inference_mode_enabled),
        "anomaly": _flag(torch.is_anomaly_enabled),
        "deterministic": _flag(torch.are_deterministic_algorithms_enabled),
        "deterministic_warn_only": _flag(torch.is_deterministic_algorithms_warn_only_enabled),
        "autocast": _flag(torch.is_autocast_enabled),
        "interop_threads": _flag(torch.get_num_interop_threads),
        "cudnn": _flag(lambda: (b.cudnn.enabled, b.cudnn.benchmark, b.cudnn.deterministic)),
        "mkldnn": _flag(lambda: b.mkldnn.enabled),
        "reduced_precision": _flag(lambda: (b.cuda.matmul.allow_fp16_reduced_precision_reduction,
                                            b.cuda.matmul.allow_bf16_reduced_precision_reduction)),
        "sdp": _flag(lambda: (b.cuda.flash_sdp_enabled(), b.cuda.mem_efficient_sdp_enabled(),
                              b.cuda.math_sdp_enabled())),
        "environ": tuple(sorted(os.environ.items())),
        "signals": tuple(_flag(lambda s=s: str(signal.getsignal(s)))
                         for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGXCPU, signal.SIGUSR1)),
        "itimer": _flag(lambda: signal.getitimer(signal.ITIMER_REAL)),
        "threads": threading.active_count(),
        "sys_path": tuple(sys.path),
        "recursion_limit": sys.getrecursionlimit(),
    }
    names = {}
    for mod_name in _WATCHED_MODULES:
        mod = sys.modules.get(mod_name)
        if mod is not None:
            names[mod_name] = {k: id(v) for k, v in list(vars(mod).items())}
    names["torch.Tensor"] = {k: id(v) for k, v in list(vars(torch.Tensor).items())}
    return flags, names


def _fingerprint_changes(before, after):
    """What differs between two _process_fingerprint()s: flags that changed, names rebound or removed (new names
    are not counted: a module's lazy imports add them), more threads; a list of short descriptions."""
    changes = [k for k, v in before[0].items() if k != "threads" and after[0].get(k) != v]
    if after[0]["threads"] > before[0]["threads"]:
        changes.append(f"threads {before[0]['threads']} -> {after[0]['threads']}")
    for mod_name, ids in before[1].items():
        now = after[1].get(mod_name, {})
        changed = [k for k, i in ids.items() if now.get(k) != i]
        if changed:
            changes.append(f"{mod_name}: {', '.join(sorted(changed)[:5])}")
    return changes


def _restore_process_state(state):
    import random

    import numpy
    import torch

    torch.set_rng_state(state["torch_cpu"])
    if torch.cuda.is_initialized():
        # As a new process makes them: the default seed (the CPU generator's before anyone seeded it), offset 0.
        torch.cuda.manual_seed_all(state["seed"])
    random.setstate(state["random"])
    numpy.random.set_state(state["numpy"])


# Device memory a kept judge may still hold between jobs (torch's allocator, after cuBLAS's workspaces are let go
# of): what libraries keep for themselves (measured on an H200: none once the workspaces go; 32-33 MiB with them).
# More means something of a job stayed alive: such a judge exits.
_KEPT_ALLOCATED_MAX = 64 << 20


def _clean_for_next(device, before=None):
    """After a job whose runner is gone: whether this process can serve another one as a new judge would.  Its
    streams are flushed (kgym reads what they hold once "done" comes), garbage is collected, and on a GPU its
    context must still work and hold nothing of the job: no shared block left (the runner mapped those), and no
    more than _KEPT_ALLOCATED_MAX of torch's allocations (libraries' own)."""
    import gc

    gc.collect()
    if before is None:
        print("kgym judge: not kept for another job: its process was not fingerprinted before the task loaded",
              file=sys.stderr)
        return False
    changes = _fingerprint_changes(before, _process_fingerprint())
    if changes:
        print(f"kgym judge: not kept for another job: the job changed {'; '.join(changes)}"[:1000], file=sys.stderr)
        return False
    if not device.startswith("cuda"):
        return True
    try:
        import torch

        from ..shared import cudashare

        torch.cuda.synchronize()  # raises where the context is broken (a sticky error): such a judge exits
        clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
        if clear is not None:
            clear()  # the next matmul allocates them again from the driver (the handles, the costly part, stay)
        torch.cuda.empty_cache()
        cudashare.take_peak()
        torch.cuda.reset_peak_memory_stats()
        left = (torch.cuda.memory_allocated(), cudashare.live_bytes())
    except Exception as exc:  # noqa: BLE001 — a judge that cannot tell is not kept
        print(f"kgym judge: not kept for another job: {type(exc).__name__}: {exc}"[:500], file=sys.stderr)
        return False
    stays = left[0] <= _KEPT_ALLOCATED_MAX and left[1] == 0
    if not stays:
        print(f"kgym judge: not kept for another job: {left[0]} bytes still allocated, {left[1]} in shared blocks",
              file=sys.stderr)
    return stays


def _serve(chan, device, peer_fd, lockdown, state):
    """One job, from its first line (a ``prelude`` or the job) to ``done``.  ``peer_fd``: the runner's socket the
    zygote gave a new judge; a kept judge gets its next runner's with the job's first line (SCM_RIGHTS).  Returns
    whether this process stays for another job (kgym asked, with ``stay``, and ``_clean_for_next``)."""
    judge_active, judge_warnings = lockdown
    chan.idle = state["jobs"] > 0
    job = chan.recv()
    chan.idle = False
    if peer_fd is None:
        peer_fd = chan.take_fd()
    early = None
    if job.get("type") == kinds.MSG_PRELUDE:
        # A warm pair (kgym's pair.c): the runner's part of the next job comes first, and the runner enters
        # its sandbox and both processes make their CUDA contexts before that job exists.
        prelude = job
        early = _warm_start(peer_fd, prelude, device)
        chan.send({"type": kinds.MSG_WARM})  # kgym's warmer gives back the GPU phase it held for this set-up
        job = chan.recv()
        if _runner_part(job) != _runner_part(prelude):
            raise RuntimeError("the job does not match the prelude its warm runner was started with")
    chan.seal(job.get("nonce"))
    if state["jobs"]:
        _restore_process_state(state["fresh"])
    state["jobs"] += 1
    os.chdir(job["workdir"])
    import torch

    torch.set_num_threads(int(job.get("threads", 1)))
    if device.startswith("cuda") and early is None:
        _enable_fused_compare()
    chan.send({"type": kinds.MSG_HELLO, "pid": os.getpid(), "device": device})
    if job.get("echo_request") is not None:
        # A self-test of the request/answer path (kgym's unit tests use it): ask, then report the answer.
        answer = chan.request({"type": kinds.MSG_ECHO, "payload": job["echo_request"]})
        chan.send({"type": kinds.MSG_ECHO_ANSWER, "answer": answer})
    ev = Evaluation(chan, job)
    if peer_fd is None:
        raise RuntimeError("no runner: the zygote forked the judge without a runner socket")
    _fault_channel(state["jobs"])
    import socket as _socket

    # The runner locks itself down before the candidate's file is even read, and says what the kernel
    # granted.
    if early is None and _setup_split(device):
        ev.runner, setup = _start_runner(_socket.socket(fileno=peer_fd), job, device, ev.guards.findings,
                                         phase=lambda: ev.gpu_if_device("shared", "setup"))
    elif early is None:
        # In a shared GPU phase: making a CUDA context (two here) and mapping device memory disturb the
        # kernels of another evaluation's exclusive timing window.
        with ev.gpu_if_device("shared", "setup"):
            ev.runner, setup = _start_runner(_socket.socket(fileno=peer_fd), job, device, ev.guards.findings)
    else:
        ev.runner, setup = early.result()
        ev.guards.findings.extend(ev.runner.findings)
        ev.runner.findings = ev.guards.findings
    ev.runner.on_compile = ev.compile_handback
    if _kernel_service is not None:
        _kernel_service.begin(None, None, None)  # until the static stage makes this candidate's skeleton
        ev.runner.kernel_cache = _kernel_service
    chan.send(_sandbox_report(setup, judge_active, judge_warnings))
    try:
        _profiled(ev.run, state["jobs"])
        if device.startswith("cuda"):
            # Outside any GPU phase (hold_until_exit asks for one next), while the runner still answers.
            _learn_launchers(ev.runner)
    finally:
        census = {}
        if job.get("runner_uid"):
            # kgym counts, from outside, what the candidate left running before the runner exits (its
            # PID namespace then takes everything with it, so afterwards nothing would show).
            try:
                census = chan.request({"type": kinds.MSG_CENSUS})
            except Exception:  # noqa: BLE001 — kgym gone: nothing to report to
                pass
        # The wind-down, in a shared GPU phase kgym ends only once the runner is gone (and this process, unless
        # it stays), unless NVML says both hold little: a heavy teardown must not fall into another
        # evaluation's exclusive timing window (_wind_down_plan).
        ev.wind_down(census if isinstance(census, dict) else {})
        try:
            ev.runner.ask({"cmd": kinds.CMD_EXIT})
        except RunnerLost:
            pass
    fingerprint, task_sha256 = ev.fingerprint, ev.task_sha256
    ev.runner.close()
    del ev
    stays = job.get("stay") is True and bool(job.get("nonce")) and _clean_for_next(device, fingerprint)
    try:
        sys.stdout.flush()  # kgym reads what the streams hold once "done" comes
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        stays = False
    chan.send(dict({"type": kinds.MSG_DONE, "stays": stays}, **({"task_sha256": task_sha256} if stays else {})))
    chan.seal(None)
    return stays


# This judge's compile cache service (kernelcache.py), or None (CPU, turned off, or its helper did not start).
_kernel_service = None


def _start_kernel_service(device):
    """The compile helper is forked now, before any job or CUDA context reaches this process (kernelcache.start
    says why); KGYM_KERNEL_CACHE=off in kgym's environment (one of the KGYM_ variables the supervisor passes to the
    zygote, src/supervisor/zygote.c) leaves every compile to the runners."""
    global _kernel_service
    if not str(device).startswith("cuda") or os.environ.get("KGYM_KERNEL_CACHE", "on") == "off":
        return
    from . import kernelcache

    helper = kernelcache.start()
    if helper is not None:
        _kernel_service = kernelcache.Service(helper)


def _say_channel_lost(exc):
    """One line on stderr (kgym keeps it in the result's ``process.stderr``) before the judge exits with status 3:
    which socket error it met and where, so that a judge lost this way says more than its exit status."""
    import traceback

    try:
        where = "; ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}"
                          for f in traceback.extract_tb(exc.__traceback__)[-3:])
        sys.stderr.write(f"kgym judge: {type(exc).__name__}: {str(exc)[:200]} at {where}; exiting with status 3\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 — the exit status still says it
        pass


def _fault_channel(job_number):
    """Fault injection for kgym's tests (SQLite-style): with KGYM_FAULT_JUDGE_CHANNEL=PATH in kgym's environment
    (src/supervisor/zygote.c passes it to the zygote), the first judge at its Nth job (N: PATH's text, 1 when
    empty; 2 is a kept judge's next job) to remove PATH takes kgym's channel as broken before its runner's set-up,
    as a judge whose channel breaks there does (the exit with status 3 that kgym re-runs in a new pair:
    src/eval/eval.c).  One removal, one fault: a second judge finds no file."""
    path = os.environ.get("KGYM_FAULT_JUDGE_CHANNEL")
    if not path:
        return
    try:
        with open(path) as f:
            want = int(f.read().strip() or 1)
        if want != job_number:
            return
        os.unlink(path)
    except (OSError, ValueError):
        return
    raise BrokenPipeError("fault injected (KGYM_FAULT_JUDGE_CHANNEL): kgym's channel taken as broken")


def run(proto_fd, out_fd, err_fd, device, peer_fd=None):
    """Entry point in the freshly forked judge (called by the zygote).  It serves one job, or, where kgym asks it
    to stay (``stay`` in the job) and it can (``_clean_for_next``), one job after another, each with a runner of
    its own (docs/protocol.md, "A judge kept between evaluations")."""
    os.setsid()  # our own process group: the supervisor kills it whole
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.close(out_fd)
    os.close(err_fd)
    lockdown = _no_dumping()
    proto_fd = _hide_fd(proto_fd)
    _start_kernel_service(device)
    chan = Channel(proto_fd)
    state = {"jobs": 0, "fresh": _process_state()}
    try:
        while _serve(chan, device, peer_fd, lockdown, state):
            peer_fd = None
    except RunnerLost as exc:
        # The candidate ended its own process (or broke the socket): kgym reads how from the runner's exit
        # status; this process says where it happened and leaves without "done".
        try:
            chan.send({"type": kinds.MSG_RUNNER_LOST, "why": exc.why, "message": str(exc)[:500]})
        except Exception:  # noqa: BLE001
            pass
        os._exit(5)
    except EOFError as exc:
        # kgym closed the socket: between jobs (a kept judge it no longer needs) that is the end, else a failure.
        if not chan.idle:
            _say_channel_lost(exc)
        os._exit(0 if chan.idle else 3)
    except (BrokenPipeError, ConnectionResetError) as exc:
        _say_channel_lost(exc)
        os._exit(3)
    except BaseException as exc:  # noqa: BLE001 — a harness bug: report it and exit non-zero
        try:
            chan.send({"type": kinds.MSG_HARNESS_ERROR, "error": describe_exception(exc)})
        except Exception:
            pass
        sys.stdout.flush()
        os._exit(4)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    os._exit(0)
