"""Messages between the judge and the runner: one JSON object a line, tensors in shared memory.

The judge (trusted) and the runner (the candidate's process) share nothing but one Unix socket.  A message is
a JSON object; the tensors it carries travel in a single memfd passed with SCM_RIGHTS, laid out one after the
other (each 64-byte aligned) and described in the message's ``"_tensors"`` list (dtype, shape, offset).
Nothing that can run code crosses (no pickle): a value tree is JSON with tensors replaced by
``{"$t": index}``, tuples by ``{"$tuple": [...]}``.  Anything else the candidate returns (an object of its own
class) arrives as ``{"$other": type name}``: a fact for the comparison, never an object.

Receiving copies every tensor out of the mapping at once (``clone``): the sender may keep writing into its
memfd afterwards, and what the judge compares must not change under it.  On a GPU the sender copies device
memory into the memfd (device to host) and the receiver copies it back to its own device: the two processes
have separate CUDA contexts (CUDA IPC does not work across PID namespaces, docs/architecture.md).

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

MAX_LINE = 1 << 20
MAX_TENSORS = 64
_ALIGN = 64
_DTYPES = {str(d).replace("torch.", ""): d for d in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
    torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128)}


class ProtocolError(Exception):
    """The peer sent something that is not this protocol (or went away)."""


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
    obj = dict(obj, values=_flatten(values, tensors))
    if not tensors:
        return obj, None, False
    if len(tensors) > MAX_TENSORS:
        raise ValueError(f"more than {MAX_TENSORS} tensors in one message")
    layout, offset = [], 0
    for t in tensors:
        if str(t.dtype).replace("torch.", "") not in _DTYPES:
            raise ValueError(f"tensors of dtype {t.dtype} cannot be sent")
        n = t.numel() * t.element_size()
        layout.append({"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "offset": offset,
                       "device": t.device.type})
        offset += (n + _ALIGN - 1) // _ALIGN * _ALIGN
    new = into is None or os.fstat(into).st_size < offset
    fd = _memfd() if new else into
    try:
        if offset:
            if new:
                os.ftruncate(fd, offset)
                _seal(fd)
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


def _memfd():
    return os.memfd_create("kgym-tensors", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)


_SIZE_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW


def _seal(fd):
    """The size is fixed from now on, for whoever holds the memfd (the peer included)."""
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SIZE_SEALS | fcntl.F_SEAL_SEAL)


def spare_for(nbytes):
    """A memfd of ``nbytes`` (rounded up) for the peer to write its answer's tensors into (``send(spare=)``)."""
    fd = _memfd()
    try:
        os.ftruncate(fd, max(_ALIGN, int(nbytes) + _ALIGN * MAX_TENSORS))
        _seal(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def send(sock, obj, values=None, spare=None, into=None):
    """Sends one message; ``spare``: a memfd (see spare_for) passed along for the answer; ``into``: the spare
    the peer passed us, used for this message's tensors when they fit."""
    msg, fd, new = pack(obj, values, into)
    fds = ([fd] if fd is not None else []) + ([spare] if spare is not None else [])
    if spare is not None:
        msg["_spare"] = True
    data = (json.dumps(msg, allow_nan=False) + "\n").encode()
    try:
        if not fds:
            sock.sendall(data)
        else:
            sent = socket.send_fds(sock, [data[:1]], fds)
            if sent < 1:
                raise ProtocolError("the peer closed the socket")
            sock.sendall(data[1:])
    finally:
        if fd is not None and new:
            os.close(fd)


class Reader:
    """Reads messages (and their memfds) from a socket, one line at a time."""

    def __init__(self, sock, device="cpu"):
        self.sock = sock
        self.device = device
        self.buf = b""
        self.fds = []
        self.spare = None  # the memfd the peer sent for our answer (take_spare)

    def _fill(self):
        data, fds, _flags, _addr = socket.recv_fds(self.sock, 1 << 16, 4)
        self.fds.extend(fds)
        if not data:
            raise ProtocolError("the peer closed the socket")
        self.buf += data

    def recv(self, device=None):
        """(message dict, values): tensors copied onto ``device`` (default: the reader's)."""
        while b"\n" not in self.buf:
            if len(self.buf) > MAX_LINE:
                raise ProtocolError("a message line longer than 1 MiB")
            self._fill()
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError as exc:
            raise ProtocolError(f"not JSON: {exc}") from None
        if not isinstance(msg, dict):
            raise ProtocolError("a message must be a JSON object")
        layout = msg.pop("_tensors", None)
        tensors = []
        if layout is not None:
            if not self.fds:
                raise ProtocolError("tensors announced but no memfd came with them")
            fd = self.fds.pop(0)
            try:
                tensors = _read_tensors(fd, layout, device or self.device)
            finally:
                os.close(fd)
        if msg.pop("_spare", False) and self.fds:
            if self.spare is not None:  # an earlier one its answer never used
                os.close(self.spare)
            self.spare = self.fds.pop(0)
        for extra in self.fds:  # more fds than messages asked for: not ours to keep
            os.close(extra)
        self.fds = []
        return msg, _unflatten(msg.get("values"), tensors)

    def take_spare(self):
        """The spare memfd the last message brought (the caller closes it), or None."""
        fd, self.spare = self.spare, None
        return fd


def _read_tensors(fd, layout, device):
    if not isinstance(layout, list) or len(layout) > MAX_TENSORS:
        raise ProtocolError("bad tensor layout")
    st = os.fstat(fd)
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        seals = 0
    if not stat.S_ISREG(st.st_mode) or (seals & _SIZE_SEALS) != _SIZE_SEALS:
        raise ProtocolError("tensors must come in a memfd sealed against shrinking and growing")
    size = st.st_size
    out = []
    # A private (copy-on-write) mapping: nothing we do shows in the sender's memory, and torch gets the
    # writable buffer it wants; the clone below is what we keep anyway.
    with mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE) if size else _Empty() as m:
        for spec in layout:
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
