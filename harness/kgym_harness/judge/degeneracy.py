"""Whether a task's reference is degenerate on every input the correctness stage tried (judge side).

KernelBench has tasks whose reference output is zero, or the same whatever the inputs, on its own inputs: a
softmax over 393,216 columns (every output below an absolute 1e-4; the tolerance relative to the output,
compare.variant_tolerance, judges it), a mean of group-normalised values, a
ReLU of values that are all negative.  A candidate that returns zeros or a constant passes such a task.  The
correctness variants change the inputs (other seeds, signs, magnitudes: tasks.VALUE_RANGES), which repairs
most of them: a reference that becomes non-zero or input-dependent on some variant makes the constant fail
there.  This module records, variant by variant, what the reference did, so the result can say which
variants repaired a degenerate task, and kgym can refuse a pass where none did (level2/80 is zero by algebra:
no input makes it anything else).

Only reference outputs are looked at (the judge's own tensors); facts are plain JSON for C to decide on.
Outputs are fingerprinted at SAMPLES fixed positions per output layout, moved to the CPU, so a multi-GB GPU
output costs a gather, not a copy.
"""

from __future__ import annotations

import torch

from . import compare

SAMPLES = 4096
CHUNK = compare.CHUNK  # elements a check reads at once, as compare's


def _tensors(out):
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    return [x if isinstance(x, torch.Tensor) else torch.tensor(float(x), dtype=torch.float64)
            for x in items if isinstance(x, (torch.Tensor, bool, int, float))]


def _layout(tensors) -> tuple:
    return tuple((tuple(t.shape), str(t.dtype)) for t in tensors)


def _close(a, b, atol, rtol) -> bool:
    if a.shape != b.shape:
        return False
    ok = ((a - b).abs() <= atol + rtol * b.abs()) | (a == b) | (torch.isnan(a) & torch.isnan(b))
    return bool(ok.all())


def _chunks(*tensors):
    """The tensors' elements, flattened, CHUNK at a time as float64 (the same span of each): the judge's
    checks on multi-GB outputs must not allocate float64 copies of whole tensors (6 GiB fp32 is 12 GiB in
    float64, several of them at once in one expression), which the memory kgym reserves for the evaluation
    does not cover."""
    flats = [t.detach().reshape(-1) for t in tensors]
    n = flats[0].numel()
    for start in range(0, n, CHUNK):
        yield [f[start:start + CHUNK].double() for f in flats]


def _nonzero_flag(t, atol):
    """Whether an output holds a value beyond ``atol`` (any non-zero value when it is not floating): a 0-dim bool
    tensor on its device, not read (False for an empty one)."""
    if not t.numel():
        return False
    if not (t.is_floating_point() or t.is_complex()):
        return (t != 0).any()
    return torch.stack([(c.abs() > atol).any() for (c,) in _chunks(t)]).any()


def _all_close_flag(x, r, atol, rtol):
    """Whether x is r within the tolerances, element by element (x and r of the same shape): a 0-dim bool tensor,
    not read (True for empty ones, as all() of nothing)."""
    flags = [((a - b).abs() <= atol + rtol * b.abs()).all() for a, b in _chunks(x, r)]
    return torch.stack(flags).all() if flags else True


class Tracker:
    """Facts about the reference outputs of the variants added, in the order they ran."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.positions = {}    # layout -> per-tensor index tensors (None: every element)
        self.first = {}        # layout -> (variant name, fingerprint, atol, rtol)
        self.checked = []      # variants whose reference was looked at
        self.nonzero = []      # ... whose reference output is not all zero (within atol)
        self.varies = []       # ... whose reference output differs from an earlier variant's of the same layout
        self.compared = 0      # how many variants had an earlier one of their layout to compare with
        self.not_input = []    # ... whose reference output is not (within tolerance) one of their inputs
        # The same per model: variants of one layout whose model was built from one seed at the same sizes (the
        # same weights) differ only in their input values, so a reference output that differs between two of them
        # depends on the inputs.  Another seed draws other weights and another size other weights and shapes (a
        # ViT's position embedding follows the image size): a reference computed from its weights alone (level3/28, a ViT whose non-batch-first encoder lets the class token attend only to the
        # other images' identical class tokens: the fifteenth session's red team) differs there without reading its inputs.
        self.first_model = {}  # (layout, model) -> (variant name, fingerprint, atol, rtol)
        self.model_compared = 0
        self.input_varies = []  # ... whose reference output differs from an earlier one of its layout and model

    def _samples(self, layout, tensors):
        """The outputs' values at the layout's SAMPLES fixed positions, as float64 on their device (not read)."""
        if layout not in self.positions:
            gen = torch.Generator()
            gen.manual_seed(self.seed + len(self.positions))
            self.positions[layout] = [torch.randint(t.numel(), (SAMPLES,), generator=gen) if t.numel() > SAMPLES
                                      else None for t in tensors]
        out = []
        for t, idx in zip(tensors, self.positions[layout]):
            flat = t.detach().reshape(-1)
            picked = flat if idx is None else flat[idx.to(flat.device)]
            out.append(picked.to(torch.float64))
        return out

    @staticmethod
    def model_key(variant):
        """What a variant's model (its weights) is made from: the seed, the sizes, the dtype and whether its constant
        parameters are refilled (tasks.Variant)."""
        return (variant.seed, tuple(sorted((str(k), repr(v)) for k, v in variant.sizes.items())), variant.dtype,
                getattr(variant, "weights", "built"))

    @staticmethod
    def _differs(fp, earlier, atol, rtol):
        _n, first, a0, r0 = earlier
        tol_a, tol_r = max(atol, a0), max(rtol, r0)
        return any(not _close(a, b, tol_a, tol_r) for a, b in zip(fp, first))

    def _against_first(self, table, key, name, fp, atol, rtol):
        """Whether ``fp`` differs from the first fingerprint kept in ``table`` under ``key``; None where it is the
        first (then kept)."""
        if key not in table:
            table[key] = (name, fp, atol, rtol)
            return None
        return self._differs(fp, table[key], atol, rtol)

    def _same_model(self, name, layout, fp, atol, rtol, model):
        if model is None:
            return
        differs = self._against_first(self.first_model, (layout, model), name, fp, atol, rtol)
        if differs is not None:
            self.model_compared += 1
            if differs:
                self.input_varies.append(name)

    def again(self, name, ref_out, differs: bool, model):
        """The reference's output on new input values of a variant already added, with its model (the base
        variant's second call), and whether the caller found it different from that variant's first output (at
        its tolerance, on every element): counted as a pair of its layout and model."""
        tensors = _tensors(ref_out)
        if not tensors or (_layout(tensors), model) not in self.first_model or name in self.input_varies:
            return
        self.model_compared += 1
        if differs:
            self.input_varies.append(name)

    def add(self, name, ref_out, inputs, atol: float, rtol: float, model=None):
        """``model``: what the variant's weights were made from (``model_key``: its seed, sizes and dtype), None if
        unknown."""
        tensors = _tensors(ref_out)
        if not tensors or name in self.checked:  # a variant re-run alone (out of memory) counts once
            return
        self.checked.append(name)
        with torch.no_grad():
            layout = _layout(tensors)
            r = tensors[0]
            like = [x for x in inputs if isinstance(x, torch.Tensor) and x.shape == r.shape and x.is_floating_point()
                    and r.is_floating_point()]
            nonzero, close, fp = self._read(
                [_nonzero_flag(t, atol) for t in tensors], [_all_close_flag(x, r, atol, rtol) for x in like],
                self._samples(layout, tensors))
            if any(nonzero):
                self.nonzero.append(name)
            differs = self._against_first(self.first, layout, name, fp, atol, rtol)
            if differs is not None:
                self.compared += 1
                if differs:
                    self.varies.append(name)
            self._same_model(name, layout, fp, atol, rtol, model)
            if not any(close):
                self.not_input.append(name)

    @staticmethod
    def _read(nonzero, close, samples):
        """The flags (0-dim bool tensors) and the sampled values (float64 tensors) on the host, read with one
        transfer a device where they lie on one (each read waits for the GPU: on a shared one, a turn between
        contexts; docs/PERFORMANCE.md, thirty-sixth session): (nonzero flags, close flags, samples as CPU float64)."""
        flags = [f if isinstance(f, torch.Tensor) else torch.tensor(bool(f)) for f in (*nonzero, *close)]
        parts = [f.reshape(1).to(torch.float64) for f in flags] + [x.reshape(-1) for x in samples]
        devices = {x.device for x in parts}
        if len(devices) == 1 and parts:
            host = torch.cat(parts).to("cpu")
            values = list(torch.split(host, [x.numel() for x in parts]))
        else:
            values = [x.to("cpu") for x in parts]
        got = [bool(v.item()) for v in values[:len(flags)]]
        return got[:len(nonzero)], got[len(nonzero):], [v.view(x.shape) for v, x in zip(values[len(flags):], samples)]

    def facts(self) -> dict:
        """JSON facts: ``zero_everywhere`` (every checked reference output was zero), ``constant_everywhere``
        (no reference output differed from another of its layout, and at least one pair was compared),
        ``input_independent_everywhere`` (no reference output differed from another of its layout and model
        — seed, sizes and dtype: only the input values changed between them —, and at least one such pair was compared: an output
        computed from the weights alone passes every variant), and the variants on which the reference was not
        zero, differed from an earlier one of its layout (``varies_on``: other weights or other values), differed
        with the same weights (``input_dependent_on``), and was not one of its inputs."""
        return {"checked": list(self.checked),
                "zero_everywhere": bool(self.checked) and not self.nonzero,
                "constant_everywhere": self.compared > 0 and not self.varies,
                "input_independent_everywhere": self.model_compared > 0 and not self.input_varies,
                "compared": self.compared, "compared_same_model": self.model_compared,
                "nonzero_on": list(self.nonzero), "varies_on": list(self.varies),
                "input_dependent_on": list(self.input_varies),
                "not_an_input_on": list(self.not_input)}
