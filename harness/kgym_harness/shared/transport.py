"""Messages between the judge and the runner: one JSON object a line, tensors in shared memory.

The judge (trusted) and the runner (the candidate's process) share nothing but one Unix socket.  A message is
a JSON object; the tensors it carries travel in a single memfd passed with SCM_RIGHTS, laid out one after the
other (each 64-byte aligned) and described in the message's ``"_tensors"`` list (dtype, shape, offset).
Nothing that can run code crosses (no pickle): a value tree is JSON with tensors replaced by
``{"$t": index}``, tuples by ``{"$tuple": [...]}``.  Anything else the candidate returns (an object of its own
class) arrives as ``{"$other": type name}``: a fact for the comparison, never an object.

Receiving copies every tensor out of the mapping at once (``clone``): the sender may keep writing into its
memfd afterwards, and what the judge compares must not change under it.

On a GPU, tensors stay in device memory when both ends can (cudashare.py: an allocation exported as a file
descriptor, which crosses the PID namespace that legacy CUDA IPC cannot).  The judge's commands then carry a
device block it made (``"_block": size`` and its fd); the runner reads those tensors in place.  The judge's
spare for the answer is a device block too (``"_spare": {"device": size}``); the runner writes its outputs
there and says so (``"_in_spare": true``, no fd), and the judge clones them out before anything else.  The
judge never maps a descriptor the runner sent (``Reader(accept_blocks=False)``).

The answer spare of a forward is kept for the runner's later answers (``AnswerSpare``, the judge's; ``"keep": k``
in ``"_spare"``): sent once with its fd, then named by ``k`` alone, and made again only when an answer outgrows
it; when the judge lets it go (the end of a stage, a re-run alone) its next command says so (``"_forget": k``)
and the runner lets go of its mapping too, so the memory is freed.  Each spare made and handed over costs the
judge a cuMemCreate, export and release and the runner an import, map and unmap, driver calls that wait behind
every other process's CUDA context being made or torn down (tens of milliseconds each: docs/PERFORMANCE.md).  Keeping it changes nothing the judge relies on: a spare only ever holds
what the runner wrote there, which the judge clones out at once, so a runner that keeps writing to it (it could
write to a fresh one just as well until the judge cloned) reaches only its own answers.  The judge never keeps a
spare across runners (a new link, a new spare) and never writes into one.

A forward's inputs are handed over in place (``InPlace``): the judge makes them in a device block of its own,
runs the reference on them, and sends that very block, so a multi-GB input exists once on the device, not
twice (the judge's and the runner's copy).  The runner can write into it; so the judge checks it after the
answer against a keyed fingerprint taken before the send (the key never leaves the judge, so no change
keeps the fingerprint), and never reads those inputs again for anything it decides: whatever the block
holds after the check is not used (a later use builds the inputs again).  The runner skips its own
snapshot of inputs that came this way (``Reader.last_in_place``): the judge's check replaces it.

On the CPU a forward's inputs are handed over in place too, in a memfd the judge made and maps shared
(``HostBlock``): the runner maps it shared as well and the candidate's kernels read and write those very
pages, which the judge checks after the answer as it checks a device block.

Every block handed over in place has **canaries**: each tensor lies at least ``GUARD`` bytes after the previous
one's end (or the block's start), at the alignment PyTorch's allocator would give it (``_placement``), and every
byte that belongs to no tensor — the guards, the alignment padding, the tail up to the block's size (the allocation
granularity: 2 MiB on a GPU, a page on the host) — holds random bytes the judge drew. After the answer the judge
reads them back (``InPlace.overwritten``): a candidate whose kernel wrote outside its tensors changed some, and the
first changed byte's offset from the nearest tensor is the evidence (``out_of_bounds_write``). The runner can read
the canaries too, so a candidate that writes out of bounds on purpose can restore them; what it wrote there the
judge never reads.

Where device sharing is refused (no driver support, the runner could not map the block: ``"_share_error"``),
the same messages go through host memory, each side copying device ↔ host.

Bounds (a hostile sender): a line is at most 1 MiB of JSON, a message carries at most 64 tensors and one fd,
every (offset, size) must lie inside the memfd, dtypes come from a fixed list, and the memfd must be sealed
against shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW): a sender that truncated it while the receiver reads
the mapping would crash the receiver with SIGBUS.
"""

import fcntl
import json
import mmap
import os
import socket
import stat

import torch

from . import cudashare

MAX_LINE = 1 << 20
MAX_TENSORS = 64
_ALIGN = 64
# Canary bytes before every tensor of a block handed over in place (and at least as many after the last):
# a page, more than an unmasked store of a 1024-wide fp32 block writes past a tensor's end.
GUARD = 4096
_DTYPES = {str(d).replace("torch.", ""): d for d in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
    torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128)}


def source_file_name(name):
    """The name of a candidate's source file in the evaluation's source folder (``source_path``; the ``load``
    command): the base name of ``name``, or ``candidate.py`` where that is empty, ``.`` or ``..``.  The judge
    names its tracebacks by the same rule."""
    base = os.path.basename(str(name or ""))
    return base if base not in ("", ".", "..") else "candidate.py"


# The evaluation's folder (the job's "workdir", which kgym makes) as the judge and the runner lay it out
# (docs/threat-model.md, "Checked bytes = executed bytes"):
#   <workdir>/src/<name>  the candidate's source: the judge writes the bytes it checked there before ``load``; the
#                         runner can read it and nothing else (Landlock read-only, another uid's 0440 file in a
#                         0550 folder, a read-only bind mount: each alone keeps it unchanged).  Tracebacks and
#                         Triton (which reads kernel source back by the code's file name) see these bytes.
#   <workdir>/run/        the runner's own folder: its current directory, HOME, TMPDIR and Triton cache; a
#                         size-limited tmpfs in its mount namespace.  The only place under the workdir it writes.
# The workdir itself belongs to kgym (0711): the runner can neither rename src/ nor put another one in its place.
# kgym names the candidate's frames by the same path (src/eval/eval.c).
SOURCE_DIR = "src"
RUN_DIR = "run"


def source_path(workdir, name):
    """Where the candidate's source lies in the evaluation's folder (see above)."""
    return os.path.join(workdir, SOURCE_DIR, source_file_name(name))


def run_dir(workdir):
    """The runner's own folder inside the evaluation's folder (see above)."""
    return os.path.join(workdir, RUN_DIR)


class ProtocolError(Exception):
    """The peer sent something that is not this protocol (or went away)."""


class ReceiveError(Exception):
    """A well-formed message whose tensors could not be taken in (out of device memory, say): ``msg`` is the
    message (its ``seq`` included), so the receiver can answer it with the error instead of dying.  The text
    keeps the cause's type and message (report.is_out_of_memory reads it)."""

    def __init__(self, msg, error):
        super().__init__(f"{type(error).__name__}: {error}")
        self.msg, self.error = msg, error


def _flatten(value, tensors):
    if torch.is_tensor(value):
        tensors.append(value)
        return {"$t": len(tensors) - 1}
    if isinstance(value, tuple):
        return {"$tuple": [_flatten(v, tensors) for v in value]}
    if isinstance(value, list):
        return [_flatten(v, tensors) for v in value]
    if isinstance(value, dict):
        return {"$dict": [[str(k), _flatten(v, tensors)] for k, v in value.items()]}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else {"$float": str(value)}
    if isinstance(value, torch.dtype):
        return {"$dtype": str(value).replace("torch.", "")}
    return {"$other": type(value).__name__}


def _unflatten(value, tensors):
    if isinstance(value, list):
        return [_unflatten(v, tensors) for v in value]
    if isinstance(value, dict):
        if "$t" in value:
            i = value["$t"]
            if not isinstance(i, int) or not 0 <= i < len(tensors):
                raise ProtocolError(f"tensor index {i!r} out of range")
            return tensors[i]
        if "$tuple" in value:
            return tuple(_unflatten(v, tensors) for v in value["$tuple"])
        if "$dict" in value:
            return {str(k): _unflatten(v, tensors) for k, v in value["$dict"]}
        if "$float" in value:
            return float(value["$float"])
        if "$dtype" in value:
            d = _DTYPES.get(value["$dtype"])
            if d is None:
                raise ProtocolError(f"unknown dtype {value['$dtype']!r}")
            return d
        if "$other" in value:
            return Other(str(value["$other"])[:200])
        raise ProtocolError("unknown value tag")
    return value


class Other:
    """A value the peer could not send as data (an object of the candidate's own type)."""

    def __init__(self, type_name):
        self.type_name = type_name

    def __repr__(self):
        return f"<{self.type_name} object>"


def pack(obj, values, into=None):
    """(message dict, memfd or None, whether the memfd is a new one): ``values`` (any tree of tensors and plain
    data) goes into ``obj["values"]``, the tensors into one memfd: ``into`` (a memfd the peer supplied) when
    they fit, else a new one.  The runner writes its outputs into the judge's memfd because its own file size
    limit (RLIMIT_FSIZE) would stop it from growing one to gigabytes."""
    tensors = []
    return _pack_host(dict(obj, values=_flatten(values, tensors)), tensors, into)


def _pack_host(obj, tensors, into):
    """pack's work once ``obj["values"]`` holds the flattened values and ``tensors`` their tensors."""
    if not tensors:
        return obj, None, False
    layout, offset = _layout(tensors)
    new = into is None or os.fstat(into).st_size < offset
    fd = _memfd() if new else into
    try:
        if new:
            # Sealed whatever its size: the reader refuses an unsealed memfd (it could shrink under the mapping),
            # and a message of empty tensors only (a zero-size output, with no spare for it) is one too.
            if offset:
                os.ftruncate(fd, offset)
            _seal(fd)
        if offset:
            with mmap.mmap(fd, offset) as m:
                for t, spec in zip(tensors, layout):
                    n = t.numel()
                    if not n:
                        continue
                    dst = torch.frombuffer(m, dtype=t.dtype, count=n, offset=spec["offset"])
                    # Device to host straight into the shared pages; a non-contiguous tensor is copied as it
                    # would be read (row-major), as .contiguous() would.
                    dst.copy_(t.detach().reshape(-1))
                    del dst
    except BaseException:
        if new:
            os.close(fd)
        raise
    obj["_tensors"] = layout
    obj["_bytes"] = offset
    return obj, fd, new


# Where a tensor handed over in place starts (InPlace): where PyTorch's caching allocator would put a tensor of its
# size, a 2 MiB boundary above 1 MiB (the allocator's small pool takes up to 1 MiB, kSmallSize, at 512 bytes) and
# 512 bytes up to it.  Exact from 10 MiB (kMinLargeAlloc: a segment of its own, 2 MiB-aligned); between 1 and 10 MiB
# the allocator packs tensors at 512 bytes in shared 20 MiB segments, so only the first of a run lies on a 2 MiB
# boundary there, and kgym's every one does (red team 34: a fidelity gap, not a hole).  The judge
# times the reference on its own tensors, which the allocator placed; the candidate's inputs must lie alike.  Where
# they started at GUARD bytes, level1/19's ReLU (6.4 GB in, 6.4 GB out) ran 2.5-2.7% faster than on an allocator's
# tensor on an H200 (3.058-3.068 against 3.143 ms, input at +256 or +4096 bytes against +0 of a cuMemCreate block:
# .gpu/ipcprobe.py, thirty-fourth session), so kgym's speedup was 2.7% above do_bench's on the same kernel.
_PLACE_LARGE = 1 << 20
_PLACE_LARGE_ALIGN = 2 << 20
_PLACE_SMALL_ALIGN = 512


def _placement(nbytes):
    """The alignment of a tensor of ``nbytes`` handed over in place (see _PLACE_LARGE)."""
    return _PLACE_LARGE_ALIGN if nbytes > _PLACE_LARGE else _PLACE_SMALL_ALIGN


def _layout(tensors, guard=0):
    """(descriptions, total bytes): the tensors one after the other, each 64-byte aligned; with ``guard``
    (a multiple of 64), at least that many bytes before each tensor and after the last one (canaries: InPlace),
    and each tensor placed as the allocator would place it (_placement)."""
    if len(tensors) > MAX_TENSORS:
        raise ValueError(f"more than {MAX_TENSORS} tensors in one message")
    layout, offset = [], 0
    for t in tensors:
        if str(t.dtype).replace("torch.", "") not in _DTYPES:
            raise ValueError(f"tensors of dtype {t.dtype} cannot be sent")
        n = t.numel() * t.element_size()
        offset += guard
        if guard:
            align = _placement(n)
            offset = (offset + align - 1) // align * align
        layout.append({"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "offset": offset,
                       "device": t.device.type})
        offset += (n + _ALIGN - 1) // _ALIGN * _ALIGN
    return layout, offset + (guard if tensors else 0)


def _sync(base):
    """Waits for the copies into or out of a block: on a GPU the peer reads it as soon as the message arrives
    (and a block is let go of after them); host copies are done on return."""
    if base.is_cuda:
        torch.cuda.synchronize()


def _fill_block(block, tensors, layout):
    """Copies the tensors into a block (device or host) at their offsets and waits for the copies."""
    base = block.bytes()
    for t, spec in zip(tensors, layout):
        n = t.numel() * t.element_size()
        if n:
            base[spec["offset"]:spec["offset"] + n].view(t.dtype).copy_(t.detach().reshape(-1))
    _sync(base)
    del base


class DeviceSpare:
    """The judge's device block for an answer, as the runner holds it: an fd, mapped only when an answer is
    written into it (``open``)."""

    def __init__(self, fd, size):
        self.fd, self.size, self.block = fd, size, None

    def open(self):
        if self.block is None:
            fd, self.fd = self.fd, None
            try:
                self.block = cudashare.Block.open(fd, self.size)
            finally:
                os.close(fd)
        return self.block

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.block is not None:
            self.block.close()
            self.block = None


def release(spare):
    """Lets go of a spare (a memfd, a DeviceSpare or a cudashare.Block) or of a block ``send`` returned; None is
    fine."""
    if spare is None:
        return
    if isinstance(spare, int):
        os.close(spare)
    else:
        spare.close()


class AnswerSpare:
    """The judge's spare for a runner's answers, kept between commands (module docstring): ``get(nbytes,
    device)`` is the spare (with ``device``, a cudashare.Block when one can be had, else a memfd) for an answer of
    ``nbytes``: the kept one when it is large enough and of that kind, else a new one (the old one let go).
    ``sent`` says whether the runner has it already (the fd then stays home); ``key`` names it in messages.
    ``close()`` lets it go."""

    def __init__(self):
        self.spare, self.size, self.key, self.sent = None, 0, 0, False
        self.forget = None  # the key of a spare the runner holds and this side let go (``"_forget"`` says so)

    def get(self, nbytes, device=False):
        need = int(nbytes) + _ALIGN * MAX_TENSORS
        # A kept spare of the other kind (a memfd from before the runner showed it maps device blocks) is made anew.
        if self.spare is None or self.size < need or isinstance(self.spare, cudashare.Block) != bool(device):
            self.close()
            self.spare = spare_for(nbytes, device=device)
            self.size = self.spare.size if isinstance(self.spare, cudashare.Block) else os.fstat(self.spare).st_size
            self.key += 1
            self.sent = False
        return self.spare

    def close(self):
        if self.spare is not None and self.sent:
            self.forget = self.key
        spare, self.spare, self.size, self.sent = self.spare, None, 0, False
        release(spare)


def _pack_device(obj, tensors, spare, share):
    """(message, fd to send or None, block the sender keeps until answered or None) when the tensors go in device
    memory (``obj["values"]`` already flattened, ``tensors`` its tensors); None when this message goes through
    host memory (no CUDA tensor, sharing off, the answer does not fit the spare).  Raises cudashare.ShareError
    when device memory was wanted and could not be had."""
    if not tensors or not any(t.is_cuda for t in tensors) or (spare is None and not share):
        return None
    layout, total = _layout(tensors)
    if spare is not None:  # the runner's answer, into the judge's block
        block = spare.open()
        if block.size < total:
            return None
        _fill_block(block, tensors, layout)
        return dict(obj, _tensors=layout, _in_spare=True), None, None
    block = cudashare.Block.create(total)
    try:
        _fill_block(block, tensors, layout)
        fd = block.export()
    except BaseException:
        release(block)
        raise
    return dict(obj, _tensors=layout, _block=block.size), fd, block


def _memfd():
    return os.memfd_create("kgym-tensors", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)


_SIZE_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW


def _seal(fd):
    """The size is fixed from now on, for whoever holds the memfd (the peer included)."""
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SIZE_SEALS | fcntl.F_SEAL_SEAL)


def spare_for(nbytes, device=False):
    """A memfd of ``nbytes`` (rounded up) for the peer to write its answer's tensors into (``send(spare=)``);
    with ``device``, a device block (cudashare.Block) when one can be had.  ``release`` it after the answer."""
    if device:
        try:
            return cudashare.Block.create(int(nbytes) + _ALIGN * MAX_TENSORS)
        except cudashare.ShareError:
            pass  # out of device memory, say: the answer comes through host memory
    fd = _memfd()
    try:
        os.ftruncate(fd, max(_ALIGN, int(nbytes) + _ALIGN * MAX_TENSORS))
        _seal(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def send(sock, obj, values=None, spare=None, into=None, share=False, in_place=None, keep=None):
    """Sends one message.  ``spare``: a memfd or device block (see spare_for) passed along for the answer, or an
    AnswerSpare as ``keep`` (then ``spare`` is None): its spare, with its fd only the first time;
    ``into``: the spare the peer passed us (a memfd or a DeviceSpare), used for this message's tensors when they
    fit; ``share``: CUDA tensors go in a new device block (the judge's commands, once the runner showed it can
    map one); ``in_place``: an InPlace whose views are exactly this message's tensors: its block goes, no copy
    (``"_in_place": true``).  Returns the new block, or None: the caller releases it once the peer has
    answered."""
    msg = fd = block = None
    new = False
    tensors = []
    obj = dict(obj, values=_flatten(values, tensors))
    if in_place is not None and in_place.matches(tensors) and (share or not in_place.device):
        msg = dict(obj, _tensors=in_place.layout, _in_place=True)
        if in_place.device:
            msg["_block"] = in_place.block.size
        fd, new = in_place.export(), True
    elif isinstance(into, DeviceSpare) or share:
        try:
            packed = _pack_device(obj, tensors, into if isinstance(into, DeviceSpare) else None, share)
        except cudashare.ShareError as exc:
            packed = None
            obj["_share_error"] = str(exc)[:300]
        if packed is not None:
            msg, fd, block = packed
            new = fd is not None
    if msg is None:
        msg, fd, new = _pack_host(obj, tensors, into if isinstance(into, int) else None)
    spare_fd, export = spare, False
    if keep is not None and keep.sent:
        spare = spare_fd = None  # the runner has it: named, not sent again
        msg["_spare"] = {"keep": keep.key}
    elif keep is not None:
        spare = spare_fd = keep.spare
    if isinstance(spare, cudashare.Block):
        try:
            spare_fd, export = spare.export(), True
            msg["_spare"] = {"device": spare.size}
        except cudashare.ShareError:
            spare_fd = None  # no spare: the peer answers in a memfd of its own
    elif spare is not None:
        msg["_spare"] = True
    if keep is not None and spare_fd is not None:
        msg["_spare"] = dict(msg["_spare"] if isinstance(msg["_spare"], dict) else {"host": True}, keep=keep.key)
    fds = [f for f in (fd, spare_fd) if f is not None]
    try:
        data = (json.dumps(msg, allow_nan=False) + "\n").encode()
        if not fds:
            sock.sendall(data)
        else:
            sent = socket.send_fds(sock, [data[:1]], fds)
            if sent < 1:
                raise ProtocolError("the peer closed the socket")
            sock.sendall(data[1:])
    except BaseException:
        release(block)
        raise
    finally:
        if fd is not None and new:
            os.close(fd)
        if export:
            os.close(spare_fd)  # the peer has its own copy of the descriptor now
    if keep is not None and spare_fd is not None:
        keep.sent = True
    return block


FP_CHUNK = 1 << 24  # int32 words a fingerprint step reads (its int64 temporaries: 256 MiB)


def multipliers(n, seed, device):
    """``n`` secret odd int64 multipliers, one per position in a chunk."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    r = torch.randint(-(1 << 62), 1 << 62, (n,), generator=gen, device=device, dtype=torch.int64)
    return r.mul_(2).add_(1)


def fingerprint(t, key) -> int:
    """A keyed 64-bit fingerprint of a tensor's bytes: sum over its int32 words (the tail bytes as words of
    their own) of word x a secret odd multiplier per position in a chunk, each chunk's sum times a secret
    odd multiplier of its own, modulo 2^64.  Whoever does not know ``key`` cannot change the bytes and keep
    the value (a change keeps it with probability about 2^-32 at worst); computed a chunk at a time on the
    tensor's device, so a 6 GiB input costs tens of milliseconds and a few hundred MiB of temporaries."""
    return fingerprints([(t, key)])[0]


def fingerprints(pairs) -> list:
    """fingerprint(t, key) for every (t, key) of ``pairs``, read back from each device once for all of them: each
    read is a wait for the GPU, and on a shared GPU a turn between contexts (docs/PERFORMANCE.md, thirty-sixth
    session: the judge waited ~10 times a variant, twice per input for these)."""
    return [_u64(v) for v in read_all([fingerprint_sum(t, key) for t, key in pairs])]


def _u64(v) -> int:
    """A fingerprint's value from its signed int64 sum (fingerprint_sum) as read back."""
    return int(v) & ((1 << 64) - 1)


# Captured at import (in the zygote, before any candidate exists): the runner's state check reads its result back
# through read_all (runner/guards.py StateWatch), and a candidate's code could otherwise wrap what it calls by name
# (red team 41: a torch.stack that answered "no change" hid every change of a model's state).  Tensor.tolist is
# held by identity instead (guards._functions_to_guard: a replaced one is harness_tampering, a hack).
_stack = torch.stack


def read_all(values) -> list:
    """The Python numbers of 0-dim tensors ``values``, in order, read back with one transfer a device and dtype
    (each read waits for the GPU: on a shared one, a turn between contexts; docs/PERFORMANCE.md, thirty-sixth
    session).  Values keep their dtype's exact value (no conversion is made)."""
    out = [None] * len(values)
    groups = {}
    for i, v in enumerate(values):
        groups.setdefault((v.device, v.dtype), []).append(i)
    for idx in groups.values():
        for i, x in zip(idx, _stack([values[i] for i in idx]).tolist()):
            out[i] = x
    return out


def fingerprint_sum(t, key, table=None):
    """fingerprint's sum as a 0-dim int64 tensor on ``t``'s device (signed: the value modulo 2^64), not read: for
    callers that read many at once (read_all), as fingerprints and runner/guards.StateWatch do.  ``table``: the
    position multipliers to use instead of those the key draws (odd int64s on ``t``'s device, from multipliers(),
    as long as a step reads or longer), for a caller that fingerprints many chunks under one secret and keeps one
    table for all; each chunk's own multiplier still comes from ``key``."""
    import random

    rng = random.Random(repr(key))
    flat = t.detach().reshape(-1)
    if not flat.is_contiguous():
        flat = flat.contiguous()
    raw = flat.view(torch.uint8) if flat.numel() else flat.new_empty(0, dtype=torch.uint8)
    words_n = raw.numel() // 4
    parts = [raw[:words_n * 4].view(torch.int32), raw[words_n * 4:].to(torch.int32)]
    seed = rng.getrandbits(63)
    if table is None:
        table = multipliers(min(FP_CHUNK, max(1, words_n)), seed, t.device)
    acc = torch.zeros((), dtype=torch.int64, device=t.device)
    buf = None
    for part in parts:
        for start in range(0, part.numel(), FP_CHUNK):
            chunk = part[start:start + FP_CHUNK]
            n = chunk.numel()
            if buf is None or buf.numel() < n:
                buf = torch.empty(n, dtype=torch.int64, device=t.device)
            out = buf[:n]
            torch.mul(chunk, table[:n] if n <= table.numel() else multipliers(n, rng.getrandbits(63), t.device),
                      out=out)
            m = rng.getrandbits(64) | 1
            acc.add_(out.sum().mul_(m - (1 << 64) if m >= (1 << 63) else m))  # as a signed int64
    return acc


class HostBlock:
    """A memfd mapped shared, sealed against shrinking and growing: the host twin of cudashare.Block for inputs
    handed over in place on the CPU.  The judge ``create``s it (and keeps it mapped), the runner ``open``s the
    descriptor it was sent.  ``bytes()`` is the whole mapping as a uint8 tensor; it and every view of it keep the
    mapping alive (close)."""

    def __init__(self, fd, size):
        self.fd, self.size = fd, size
        self.map = mmap.mmap(fd, size)  # MAP_SHARED, read and write
        self._base = torch.frombuffer(self.map, dtype=torch.uint8)
        self.ptr = self._base.data_ptr()

    @classmethod
    def create(cls, nbytes):
        size = max(mmap.PAGESIZE, (int(nbytes) + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE)
        fd = _memfd()
        try:
            os.ftruncate(fd, size)
            _seal(fd)
            return cls(fd, size)
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def open(cls, fd):
        """Maps the memfd behind ``fd`` (a duplicate is kept; the caller still closes ``fd``), after checking it
        is one whose size cannot change under the mapping."""
        st = os.fstat(fd)
        try:
            seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        except OSError:
            seals = 0
        if not stat.S_ISREG(st.st_mode) or (seals & _SIZE_SEALS) != _SIZE_SEALS or st.st_size <= 0:
            raise ProtocolError("inputs in place must come in a memfd sealed against shrinking and growing")
        own = os.dup(fd)
        try:
            return cls(own, st.st_size)
        except BaseException:
            os.close(own)
            raise

    def bytes(self):
        return self._base

    def export(self):
        return os.dup(self.fd)

    def close(self):
        """Closes the descriptor and drops this object's hold on the mapping.  Never ``mmap.close()``: torch's
        views keep a reference to the mmap object but no buffer export, so closing it would unmap pages a view
        still reads; the mapping goes when its last holder does."""
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        os.close(fd)
        self._base = self.map = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 — interpreter shutdown
            pass


class _Canaries:
    """Random bytes in every byte of a block that belongs to none of its tensors (module docstring), and the
    check that they are still there."""

    def __init__(self, block, layout):
        spans = []
        for i, spec in enumerate(layout):
            dtype, _shape, offset, _n, nbytes = _check_spec(spec, block.size)
            spans.append((offset, offset + nbytes, i))
        spans.sort()
        self.spans = spans
        # (start, end, index of the tensor ending at start or None, index of the tensor starting at end or None)
        self.regions = []
        at, before = 0, None
        for start, end, i in spans:
            if start > at:
                self.regions.append((at, start, before, i))
            at, before = max(at, end), i
        if block.size > at:
            self.regions.append((at, block.size, before, None))
        total = sum(b - a for a, b, _x, _y in self.regions)
        base = block.bytes()
        # Drawn where the block lives: a device block is rounded up to the allocation granularity (2 MiB), so a
        # block's canaries are up to 2 MiB, and drawing those on the host cost the judge 11-15 ms a block on an
        # H200 (bench/variant_probe.py), inside its shared GPU phase, for every variant.  A generator of the
        # block's device, seeded from os.urandom, draws them in microseconds.
        gen = torch.Generator(device=base.device)
        gen.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        self.expected = torch.randint(0, 256, (total,), dtype=torch.uint8, generator=gen, device=base.device)
        k = 0
        for a, b, _x, _y in self.regions:
            base[a:b].copy_(self.expected[k:k + b - a])
            k += b - a
        _sync(base)
        self.block = block

    def check(self):
        """Where the canaries changed: one {"input", "offset", "bytes", "block_offset"} per changed region, the
        offset of its first changed byte from the nearest tensor's first byte (negative: before it), in bytes."""
        diff = self.differ()
        return self.where(diff) if diff is not None and bool(diff[1].item()) else []

    def differ(self):
        """(the canaries' byte-wise difference, whether any differs) as device tensors, not read back (InPlace.
        check reads the second with the inputs' fingerprints); None where the block has no canaries."""
        if not self.regions:
            return None
        base = self.block.bytes()
        got = torch.cat([base[a:b] for a, b, _x, _y in self.regions])
        diff = got != self.expected
        return diff, diff.any().to(torch.int64)

    def where(self, diff):
        """check()'s answer from differ()'s, once some canary is known to differ."""
        diff = diff[0].cpu()
        starts = {i: a for a, _b, i in self.spans}
        ends = {i: b for _a, b, i in self.spans}
        hits, k = [], 0
        for a, b, before, after in self.regions:
            part = diff[k:k + b - a]
            k += b - a
            changed = int(part.sum())
            if not changed:
                continue
            p = a + int(torch.argmax(part.to(torch.uint8)))
            # the nearer neighbour: past the end of the one before, or before the start of the one after
            if before is not None and (after is None or p - ends[before] < starts[after] - p):
                j = before
            else:
                j = after if after is not None else before
            hits.append({"input": j, "offset": p - starts[j] if j is not None else p, "bytes": changed,
                         "block_offset": p})
        return hits


class InPlace:
    """Inputs the judge keeps in a block of its own and hands the runner in place (module docstring): a device
    block on a GPU, a shared memfd (HostBlock) on the CPU.  ``tensors``: the judge's inputs, views into the
    block (the originals can go); ``seal()`` takes the fingerprints (after the reference ran on them, right
    before the send); ``changed()`` says, after the answer, which inputs no longer match, and ``overwritten()``
    which canaries around them changed; ``load(values)`` copies new values into the views (the timing's call
    block, refilled for every call); ``release()`` drops this object's hold on the block, which is unmapped
    with its last view (not before: a view still held somewhere never reads unmapped memory)."""

    def __init__(self, tensors, device=True):
        self.layout, total = _layout(tensors, guard=GUARD)
        self.device = device
        self.block = cudashare.Block.create(total) if device else HostBlock.create(total)
        try:
            _fill_block(self.block, tensors, self.layout)
            self.canaries = _Canaries(self.block, self.layout)
            self.tensors = _block_tensors(self.block, self.layout, clone=False)
        except BaseException:
            self.block.close()
            raise
        self.key = int.from_bytes(os.urandom(16), "little")
        self.sums = None

    @classmethod
    def make(cls, values, share=True):
        """An InPlace for the tensors of ``values`` (a list: the forward's arguments) with the non-tensors
        kept, and the new argument list: CUDA tensors in a device block when ``share`` (the runner maps them),
        CPU tensors in a shared memfd.  (None, values) when the tensors are neither, or no block is to be had
        (the arguments then go as copies, as before)."""
        tensors = [v for v in values if torch.is_tensor(v)]
        if not tensors or len(tensors) > MAX_TENSORS:
            return None, values
        if all(t.is_cuda for t in tensors) and share:
            device = True
        elif all(t.device.type == "cpu" for t in tensors):
            device = False
        else:
            return None, values
        try:
            shared = cls(tensors, device)
        except (cudashare.ShareError, ValueError, OSError):
            return None, values
        shared.others = [v for v in values if not torch.is_tensor(v)]
        it = iter(shared.tensors)
        return shared, [next(it) if torch.is_tensor(v) else v for v in values]

    def _keyed(self):
        """(input, its fingerprint key) for every input: the seal's and the checks' one keying."""
        return [(t, (self.key, i)) for i, t in enumerate(self.tensors)]

    def seal(self):
        self.sums = fingerprints(self._keyed())

    def changed(self):
        """Indices of the inputs whose bytes differ from when they were sealed."""
        return self.check()[0]

    def overwritten(self):
        """The canaries that changed since the block was made (_Canaries.check): writes outside every tensor."""
        return self.canaries.check()

    def check(self):
        """(changed(), overwritten()) with one read of the device for both: the inputs' fingerprints and whether
        any canary differs come back in one transfer (each read is a wait for the GPU, on a shared one a turn
        between contexts: docs/PERFORMANCE.md, thirty-sixth session); where a canary did, a second read says
        where."""
        n = len(self.tensors)
        diff = self.canaries.differ()
        got = read_all([fingerprint_sum(t, key) for t, key in self._keyed()] + ([diff[1]] if diff is not None else []))
        changed = [i for i, (v, sealed) in enumerate(zip(got[:n], self.sums)) if _u64(v) != sealed]
        hit = diff is not None and bool(got[n])
        return changed, (self.canaries.where(diff) if hit else [])

    def load(self, values):
        """Copies the tensors of ``values`` (an argument list like the one ``make`` was given) into this block's
        views (and waits for the copies); False, with nothing copied, when they do not have the views' shapes and
        dtypes, or the other arguments differ from ``make``'s (the peer holds those as they were sent)."""
        tensors = [v for v in values if torch.is_tensor(v)]
        if len(tensors) != len(self.tensors) or any(
                a.shape != b.shape or a.dtype != b.dtype for a, b in zip(tensors, self.tensors)):
            return False
        if [v for v in values if not torch.is_tensor(v)] != getattr(self, "others", []):
            return False
        for src, dst in zip(tensors, self.tensors):
            dst.copy_(src)
        if self.device:
            torch.cuda.synchronize()
        return True

    def holds(self, t):
        """Whether tensor ``t`` lies in this block (a view of the inputs, say), so the runner can write it."""
        if self.block is None or not torch.is_tensor(t):
            return False
        ptr = t.untyped_storage().data_ptr()
        return self.block.ptr <= ptr < self.block.ptr + self.block.size

    def matches(self, tensors):
        """Whether ``tensors`` (a message's flattened tensors) are exactly this block's views, in order."""
        return len(tensors) == len(self.tensors) and all(a is b for a, b in zip(tensors, self.tensors))

    def export(self):
        return self.block.export()

    def release(self):
        self.tensors, self.block, self.canaries = [], None, None


class LineReader:
    """Lines from a socket, the one line splitting of the harness: the judge reads kgym's protocol lines with it
    (judge/child.py ``Channel``), and each side of the judge/runner socket the other's messages (``Reader``).
    What a read brings beyond a line stays for the next one.  ``max_line``: a longer line, whole or not, is a
    ProtocolError (None: no limit, for kgym's own lines).  ``fds``: descriptors that come with the bytes
    (SCM_RIGHTS) are collected in ``self.fds``, in order, for the caller to take; without it none are received.
    The end of the stream before a whole line is EOFError.  ``exact``: read no byte past the line's end (a peek
    for it first), so that descriptors sent with a later message stay in the socket for that message: the kernel
    attaches a message's descriptors to its first byte and hands them over with the read that reaches it, and
    ``Reader.recv`` closes what came with a message beyond what it announced.  The runner's reader is exact, so
    that no message of the judge's can lose its descriptors to the one before it, whatever the order they were
    sent in (the judge sends one command at a time: child.RunnerLink.ask)."""

    def __init__(self, sock, max_line=MAX_LINE, fds=False, exact=False):
        self.sock = sock
        self.max_line = max_line
        self.with_fds = fds
        self.exact = exact
        self.buf = bytearray()
        self.fds = []

    def _fill(self):
        if self.with_fds:
            size = 1 << 16
            if self.exact:
                ahead = self.sock.recv(size, socket.MSG_PEEK)
                end = ahead.find(b"\n")
                size = end + 1 if end >= 0 else max(len(ahead), 1)
            data, fds, _flags, _addr = socket.recv_fds(self.sock, size, 4)
            self.fds.extend(fds)
        else:
            data = self.sock.recv(1 << 16)
        if not data:
            raise EOFError("the peer closed the socket")
        self.buf += data

    def readline(self):
        """The next line, without its newline (bytes)."""
        seen = 0  # bytes already searched: each read's bytes are searched once
        while (end := self.buf.find(b"\n", seen)) < 0:
            if self.max_line is not None and len(self.buf) > self.max_line:
                raise ProtocolError(f"a message line longer than {_size_text(self.max_line)}")
            seen = len(self.buf)
            self._fill()
        if self.max_line is not None and end > self.max_line:
            raise ProtocolError(f"a message line longer than {_size_text(self.max_line)}")
        line = bytes(self.buf[:end])
        del self.buf[:end + 1]
        return line


def _size_text(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n} bytes"


class Reader:
    """Reads messages (and their memfds or device blocks) from a socket, one line at a time (``LineReader``).
    ``accept_blocks``: whether the peer may send device blocks to map (the runner's reader: the judge made
    them); the judge's reader refuses them, mapping only the spares it made itself."""

    def __init__(self, sock, device="cpu", accept_blocks=False):
        self.sock = sock
        self.device = device
        self.accept_blocks = accept_blocks
        self.lines = LineReader(sock, MAX_LINE, fds=True, exact=accept_blocks)
        self.fds = self.lines.fds  # the descriptors that came with the messages, in order (one list, shared)
        self.spare = None  # the memfd or DeviceSpare the peer sent for our answer (take_spare)
        self.kept = None  # (key, spare): the judge's AnswerSpare as this side holds it (done_with keeps it)
        self.share_error = None  # the reason the last message's tensors did not come in device memory
        self.last_in_spare = False  # whether the last message's tensors were in our own device spare
        self.last_in_place = False  # whether they were the judge's own inputs, handed over in place (InPlace)

    def recv(self, device=None, own_spare=None, max_bytes=None):
        """(message dict, values): tensors copied onto ``device`` (default: the reader's).  ``own_spare``: the
        device block this side passed for the answer (an answer ``_in_spare`` is read from there).  ``max_bytes``:
        the most its tensors may hold in all; more is AnswerTooLarge, raised before anything is mapped or copied
        (the judge bounds a forward's answer by its reference output: RunnerLink.ask)."""
        try:
            line = self.lines.readline()
        except EOFError:
            raise ProtocolError("the peer closed the socket") from None
        try:
            msg = json.loads(line)
        except ValueError as exc:
            raise ProtocolError(f"not JSON: {exc}") from None
        if not isinstance(msg, dict):
            raise ProtocolError("a message must be a JSON object")
        layout = msg.pop("_tensors", None)
        in_spare = msg.pop("_in_spare", False)
        block_size = msg.pop("_block", None)
        in_place = msg.pop("_in_place", False)
        forget = msg.pop("_forget", None)
        if forget is not None and self.accept_blocks and self.kept is not None and self.kept[0] == forget:
            # The judge let this kept spare go (AnswerSpare.close): so does this side, now, so its memory is freed
            # before whatever the command is for (a re-run alone, the next stage).
            if self._is_kept(self.spare):
                self.spare = None
            kept, self.kept = self.kept[1], None
            release(kept)
        err = msg.pop("_share_error", None)
        self.share_error = str(err)[:300] if err is not None else None
        self.last_in_spare = bool(in_spare and layout is not None)
        self.last_in_place = bool(in_place is True and layout is not None)
        tensors = []
        try:
            if max_bytes is not None and layout is not None:
                nbytes = layout_bytes(layout)
                if nbytes > max_bytes:
                    raise AnswerTooLarge(msg, nbytes, max_bytes)
            tensors = self._take(msg, layout, in_spare, block_size, device, own_spare, in_place is True)
        except (ProtocolError, ReceiveError):
            raise
        except Exception as exc:  # noqa: BLE001 — e.g. no device memory for the copy
            raise ReceiveError(msg, exc) from exc
        finally:
            for extra in self.fds:  # more fds than messages asked for: not ours to keep
                os.close(extra)
            self.fds.clear()
        return msg, _unflatten(msg.get("values"), tensors)

    def _take(self, msg, layout, in_spare, block_size, device, own_spare, in_place=False):
        """The message's tensors (and its spare, kept for take_spare); the fds it used are closed."""
        tensors = []
        if layout is not None and in_place and block_size is None:
            # The judge's CPU inputs, handed over in place in a shared memfd: read and written where they are.
            if not self.accept_blocks:
                raise ProtocolError("inputs in place are only accepted from the judge")
            if (device or self.device) != "cpu":
                raise ProtocolError("inputs in place in host memory are for a CPU runner")
            if not self.fds:
                raise ProtocolError("inputs in place announced but no memfd came with them")
            fd = self.fds.pop(0)
            try:
                block = HostBlock.open(fd)
            except (OSError, ValueError) as exc:
                raise ProtocolError(f"the inputs' memfd could not be mapped: {exc}") from None
            finally:
                os.close(fd)
            tensors = _block_tensors(block, layout, clone=False)
        elif layout is not None and in_spare:
            if not isinstance(own_spare, cudashare.Block):
                raise ProtocolError("an answer in a device block, but none was given for it")
            # Cloned at once, as from a memfd: the peer still has the block mapped and may write on.
            tensors = _block_tensors(own_spare, layout, clone=True)
        elif layout is not None and block_size is not None:
            if not self.accept_blocks:
                raise ProtocolError("device memory is only accepted from the judge")
            if not self.fds:
                raise ProtocolError("a device block announced but no fd came with it")
            fd = self.fds.pop(0)
            try:
                block = cudashare.Block.open(fd, block_size)
            except (cudashare.ShareError, TypeError, ValueError) as exc:
                raise ProtocolError(f"the device block could not be mapped: {exc}") from None
            finally:
                os.close(fd)
            # Read in place: a block the judge made for this message (a copy of its inputs), or its own inputs
            # handed over in place (InPlace), which it checks itself after the answer.
            tensors = _block_tensors(block, layout, clone=False)
        elif layout is not None:
            if not self.fds:
                raise ProtocolError("tensors announced but no memfd came with them")
            fd = self.fds.pop(0)
            try:
                tensors = _read_tensors(fd, layout, device or self.device)
            finally:
                os.close(fd)
        spare = msg.pop("_spare", False)
        if spare and not self.accept_blocks:
            # The runner never passes the judge a spare (its answers go into the judge's own): a descriptor it
            # sends is closed (recv) and never held, so nothing of a runner outlives it in a judge kept for
            # another job (a red-team review planted 256 MiB memfds that way).
            raise ProtocolError("a spare is only accepted from the judge")
        if not spare:
            return tensors
        self.done_with(self.spare)  # an earlier one its answer never used
        self.spare = None
        key = spare.get("keep") if isinstance(spare, dict) else None
        if key is not None and not isinstance(key, int):
            raise ProtocolError("a kept spare is named by a number")
        if not self.fds:
            if key is None:
                return tensors  # announced without its fd: the answer goes in a memfd of our own
            if self.kept is None or self.kept[0] != key:
                raise ProtocolError(f"kept spare {key} was never sent")
            self.spare = self.kept[1]
            return tensors
        fd = self.fds.pop(0)
        size = spare.get("device") if isinstance(spare, dict) else None
        if size is None:
            self.spare = fd
        elif self.accept_blocks and isinstance(size, int) and size > 0:
            self.spare = DeviceSpare(fd, size)
        else:
            os.close(fd)
            raise ProtocolError("a device spare is only accepted from the judge")
        if key is not None:  # the judge's new AnswerSpare: kept in place of the one before
            old, self.kept = self.kept, (key, self.spare)
            if old is not None:
                release(old[1])
        return tensors

    def _is_kept(self, spare):
        """Whether ``spare`` (a memfd number or a DeviceSpare) is the judge's kept one as this side holds it."""
        return spare is not None and self.kept is not None and spare == self.kept[1]

    def done_with(self, spare):
        """Lets go of a spare take_spare gave (release), unless it is the kept one."""
        if spare is not None and not self._is_kept(spare):
            release(spare)

    def take_spare(self):
        """The spare the last message brought (a memfd or a DeviceSpare; the caller releases it), or None."""
        fd, self.spare = self.spare, None
        return fd


def _check_spec(spec, size):
    """(dtype, shape, offset, element count, bytes) of one tensor description, checked to lie inside ``size``
    bytes."""
    try:
        dtype = _DTYPES[spec["dtype"]]
        shape = [int(s) for s in spec["shape"]]
        offset = int(spec["offset"])
    except (KeyError, TypeError, ValueError):
        raise ProtocolError("bad tensor description") from None
    if any(s < 0 for s in shape) or offset < 0 or offset % _ALIGN:
        raise ProtocolError("bad tensor shape or offset")
    n = 1
    for s in shape:
        n *= s
    nbytes = n * torch.empty((), dtype=dtype).element_size()
    if offset + nbytes > size:
        raise ProtocolError("a tensor lies outside the shared memory it came in")
    return dtype, shape, offset, n, nbytes


def _check_layout(layout, size):
    """Every tensor description checked (_check_spec) and no byte in two tensors: a sender lays its tensors one
    after the other (_layout), so an overlap is a forged layout, which would have the receiver copy the same bytes
    many times (red team 42: six views of one sparse 192 MiB memfd cost the judge 6.2 GiB of host memory, charged
    to none of the runner's)."""
    if not isinstance(layout, list) or len(layout) > MAX_TENSORS:
        raise ProtocolError("bad tensor layout")
    specs = [_check_spec(spec, size) for spec in layout]
    end = 0
    for offset, nbytes in sorted((sp[2], sp[4]) for sp in specs if sp[4]):
        if offset < end:
            raise ProtocolError("two tensors overlap in the shared memory they came in")
        end = offset + nbytes
    return specs


def layout_bytes(layout):
    """The bytes a message's tensors hold in all, from its descriptions alone (before any is mapped or copied)."""
    return sum(sp[4] for sp in _check_layout(layout, 1 << 62))


class AnswerTooLarge(ReceiveError):
    """An answer whose tensors hold more than the receiver bounded it to (Reader.recv's ``max_bytes``): refused
    before any is copied, its descriptors closed, the conversation still in step."""

    def __init__(self, msg, nbytes, bound):
        super().__init__(msg, ValueError(f"the answer's tensors hold {nbytes} bytes, more than the {bound} this "
                                         "command's answer may"))
        self.nbytes, self.bound = nbytes, bound


def _block_tensors(block, layout, clone):
    specs = _check_layout(layout, block.size)
    base = block.bytes()
    out = []
    for dtype, shape, offset, n, nbytes in specs:
        if n == 0:
            out.append(torch.empty(shape, dtype=dtype, device=base.device))
            continue
        t = base[offset:offset + nbytes].view(dtype).reshape(shape)
        out.append(t.clone() if clone else t)
    if clone:
        _sync(base)  # the copies are done before the block can be let go
    return out


def _read_tensors(fd, layout, device):
    st = os.fstat(fd)
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        seals = 0
    if not stat.S_ISREG(st.st_mode) or (seals & _SIZE_SEALS) != _SIZE_SEALS:
        raise ProtocolError("tensors must come in a memfd sealed against shrinking and growing")
    size = st.st_size
    specs = _check_layout(layout, size)
    out = []
    # A private (copy-on-write) mapping: nothing we do shows in the sender's memory, and torch gets the
    # writable buffer it wants; the clone below is what we keep anyway.
    with mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE) if size else _Empty() as m:
        for dtype, shape, offset, n, _nbytes in specs:
            if n == 0:
                out.append(torch.empty(shape, dtype=dtype, device=device))
                continue
            view = torch.frombuffer(m, dtype=dtype, count=n, offset=offset)
            out.append(view.reshape(shape).to(device=device, copy=True))
            del view
    return out


class _Empty:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
