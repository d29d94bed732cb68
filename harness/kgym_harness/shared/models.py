"""How a model is built, the same way on both sides: the reference in the judge (judge/child.py) and the
candidate's ``ModelNew`` in the runner (runner/runner.py) get identical weights when they create their
parameters in the same order.

The parameters variant (judge/tasks.py PARAMETERS) also needs both models' *constant* parameters set to other
values, the same on both sides: every parameter a model is built with at one value everywhere (a norm's affine
weight of ones and bias of zeros, a scale of ones) is otherwise never anything else, and a kernel that ignores it
passes every variant (the wrong probe's w02).  Which tensors those are is decided on the judge's side, from the
reference alone (``constant_keys``); each side then refills every floating tensor its own model holds with one
of those (size, value) pairs (``spread``), with values that follow from the pair alone: the order in which a model
creates its tensors, and whether it holds a norm module, its own ``nn.Parameter(torch.ones(C))``, a buffer or a
plain tensor attribute, do not matter.
"""

from __future__ import annotations

import copy

import torch


def construct(module_cls, init_inputs, seed: int, device: str, dtype: str | None = None, spread_keys=None):
    """``module_cls(*init_inputs)`` with parameters created on ``device`` right after torch.manual_seed(seed),
    so the reference and a candidate that creates its parameters in the same order get identical weights.
    ``spread_keys`` (constant_keys' pairs): those tensors refilled by ``spread`` before any cast.
    ``dtype`` (e.g. "float16") casts the model afterwards.  init_inputs is copied: a model that mutates a
    list it is given must not change what the other model receives."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = module_cls(*copy.deepcopy(list(init_inputs)))
    if spread_keys:
        spread(model, spread_keys)
    if dtype is not None:
        model = model.to(getattr(torch, dtype))
    return model


def _constant(t) -> float | None:
    """The one value every element of floating tensor ``t`` holds (finite), or None."""
    if not (torch.is_tensor(t) and t.is_floating_point()) or t.numel() < 2:
        return None
    with torch.no_grad():
        flat = t.detach().reshape(-1)
        first = flat[0]
        if not bool(torch.isfinite(first)) or not bool((flat == first).all()):
            return None
        return float(first)


def constant_keys(model) -> list:
    """The (number of elements, value) of every parameter of ``model`` that holds one finite value everywhere
    and has at least 2 elements, sorted: what ``spread`` refills.  A one-element parameter is left out: it is a
    scalar the task itself set (a learnable constant, ``nn.Parameter(torch.tensor(c))``), which a model may
    honestly have read as a number when it was built."""
    keys = set()
    for p in model.parameters():
        c = _constant(p)
        if c is not None:
            keys.add((int(p.numel()), c))
    return sorted(keys)


def spread_values(numel: int, value: float):
    """The values ``spread`` writes for the pair (numel, value), in float64 on the CPU: from value/2 to 3·value/2
    for a value that is not 0, from −1/2 to 1/2 for 0 (never 0 or a sign change for a nonzero value: a divisor
    stays one).  They follow from the pair alone (a generator seeded with it), so both processes write the same."""
    g = torch.Generator().manual_seed((int(numel) * 1_000_003 + (0 if value == 0 else 1)) % (2**63 - 1))
    u = torch.rand(int(numel), generator=g, dtype=torch.float64)
    return u - 0.5 if value == 0 else value * (0.5 + u)


def _held_tensors(model):
    """Every tensor ``model`` holds, parameters first, then buffers, then plain tensor attributes of its modules."""
    for p in model.parameters():
        yield p
    for b in model.buffers():
        yield b
    for m in model.modules():
        for v in vars(m).values():
            if torch.is_tensor(v) and not isinstance(v, torch.nn.Parameter):
                yield v


def spread(model, keys) -> int:
    """Refills, in place, every floating tensor ``model`` holds (parameters, buffers, plain tensor attributes)
    whose element count and one value are a pair of ``keys`` with spread_values' values, in logical (row-major)
    order; a tensor whose memory overlaps one refilled before (a view of it) is left alone, as it already sees the
    new values.  Two disjoint parts of one storage (a packed ``(2, C)`` weight-and-bias and its rows ``[0]`` and
    ``[1]``) are two tensors, each refilled.  Returns how many tensors were refilled."""
    wanted = {(int(n), float(c)) for n, c in keys}
    done, count = [], 0
    with torch.no_grad():
        for t in _held_tensors(model):
            try:
                span = _byte_span(t)
            except Exception:  # noqa: BLE001 — a tensor without storage (meta, a subclass): nothing to refill
                continue
            if any(span[0] < hi and lo < span[1] for lo, hi in done):
                continue
            c = _constant(t)
            if c is None or (int(t.numel()), c) not in wanted:
                continue
            try:
                t.copy_(spread_values(t.numel(), c).reshape(t.shape))
            except RuntimeError:  # an expanded view (one element, many positions): left as built
                continue
            done.append(span)
            count += 1
    return count


def _byte_span(t):
    """The bytes [start, end) that tensor ``t``'s elements lie in (its storage must exist)."""
    t.untyped_storage()
    start = t.data_ptr()
    last = sum((n - 1) * abs(st) for n, st in zip(t.shape, t.stride())) if t.numel() else -1
    return start, start + (last + 1) * t.element_size()
