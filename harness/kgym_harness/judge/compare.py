"""Comparing a candidate's output with the reference's: raw facts only (the C supervisor decides pass/fail).

An element matches when |c - r| <= atol + rtol * |r|, or when both are NaN, or both are the same infinity;
anything else involving NaN/Inf is a mismatch.  Arithmetic is float64 on the outputs' own device, chunk by
chunk, so multi-GB GPU outputs are neither copied to the CPU nor doubled in size at once.  Every number in
the result is JSON-safe: max errors are taken over pairs where both values are finite (non-finite pairs show
up in "mismatches" and the *_nonfinite counts), and a non-finite value in first_mismatch_values is written as
the string "nan", "inf" or "-inf".

Which atol and rtol a variant uses is ``variant_tolerance``'s rule (docs/evaluation-protocol.md, "Tolerances"):
atol is relative to the reference output's own magnitude on every variant, never below a floor, and where the
output is below that floor the comparison also counts the elements that miss by more than rtol
(``relative_mismatches``), so that it is never vacuous.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import triton
import triton.language as tl

from ..shared.report import is_out_of_memory
from ..shared.transport import read_all

# Elements per chunk: 16M float64 temporaries are 128 MiB each.
CHUNK = 1 << 24

# Named tolerance profiles (docs/evaluation-protocol.md, "Tolerance profiles"): ``strict`` (the default) holds
# float32 outputs to 1e-4 of their own magnitude; ``kernelbench`` is KernelBench's own check (allclose with
# atol = rtol = 1e-2 for every floating dtype, as its eval_kernel_against_ref did in v0/v0.1 and KernelGYM
# does), which admits TF32 and fp16 arithmetic.
PROFILES = ("strict", "kernelbench")
DEFAULT_PROFILE = "strict"


# The reference's own float32 precision under each profile (the judge sets it before the reference runs and
# reports it; C records it in every result).  strict: TF32 off in cuBLAS and cuDNN, so the reference is a full
# float32 result and the tolerance relative to it means what it says (PyTorch's default lets cuDNN convolutions
# round their inputs to TF32: a reference off by 1e-3).  kernelbench: PyTorch's defaults, as KernelBench's
# eval runs its reference (it sets no precision flags).  The float64 adjudication is unaffected: it runs in float64.
REFERENCE_PRECISION = {
    "strict": {"matmul_tf32": False, "cudnn_tf32": False, "float32_matmul_precision": "highest"},
    "kernelbench": {"matmul_tf32": False, "cudnn_tf32": True, "float32_matmul_precision": "highest"},
}


def apply_reference_precision(profile: str) -> dict:
    """Sets this process's matmul and convolution precision to ``profile``'s (REFERENCE_PRECISION) and returns
    what the settings read back: the judge's own process only (the candidate runs elsewhere, and its kernels'
    precision is its own)."""
    want = REFERENCE_PRECISION[profile]
    torch.set_float32_matmul_precision(want["float32_matmul_precision"])
    torch.backends.cuda.matmul.allow_tf32 = want["matmul_tf32"]
    torch.backends.cudnn.allow_tf32 = want["cudnn_tf32"]
    return {"matmul_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn_tf32": bool(torch.backends.cudnn.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision()}


def tolerances(dtype, profile: str = DEFAULT_PROFILE) -> tuple:
    """Default (atol, rtol) for an output dtype (torch.dtype or its name) under a profile.  strict: fp32/fp64
    1e-4, fp16/bf16 1e-2; kernelbench: 1e-2 for every floating dtype; anything else (integers, bool) exact."""
    if profile not in PROFILES:
        raise ValueError(f"unknown tolerance profile {profile!r} (known: {', '.join(PROFILES)})")
    name = str(dtype).replace("torch.", "")
    if name in ("float32", "float", "float64", "double", "fp32", "fp64"):
        return (1e-2, 1e-2) if profile == "kernelbench" else (1e-4, 1e-4)
    if name in ("float16", "half", "bfloat16", "fp16", "bf16"):
        return 1e-2, 1e-2
    return 0.0, 0.0


# The least output scale atol is multiplied by: the absolute tolerance is never below 1% of the dtype's
# default (1e-6 for float32 under strict).  An output whose scale is below it is "below the floor".
MIN_SCALE = 1e-2
# The share of elements that may miss by more than rtol of their own value when the output is below the floor
# (the judge's default; kgym sends its own in the job, and C decides with that number).
BELOW_FLOOR_SHARE = 0.01

# The small-elements check (docs/evaluation-protocol.md, "Small elements"; threat model row 27).  atol is a
# fraction of the output's RMS, so where a float32 output spans many decades (a cumprod, exp-like tails) its small
# elements are checked by nothing: zero passes wherever |r| < atol.  Where more than TAIL_SHARE of the reference's
# nonzero finite elements lie there (tiny_elements), the judge announces the check (Tolerance.tail) and C requires
# its facts (child._tail_facts): every such tiny element that is at least TAIL_LEAST and that neither the float32
# reference nor any of TAIL_DRAWS re-runs on inputs and weights moved by one ulp (random signs) puts further than
# TAIL_CONDITIONED of itself from the float64 reference must lie within TAIL_BOUND of the float64 value.  The numbers
# and the evidence for them are in the protocol document.  The share is 10%, not lower: the samples miss a result
# quantised by a cancellation against a constant (a GELU tail as 1 + tanh(u)), and at 1% examples/05's honest kernel
# came within 1.2x of the bound on a GEMM's GELU tail (3.6% tiny).
TAIL_SHARE = 0.1
TAIL_BOUND = 2.0 ** -6
TAIL_CONDITIONED = 2.0 ** -12
TAIL_LEAST = 2.0 ** -110
TAIL_DRAWS = 3
TAIL_SEED = 27  # the draws' own generator: the process's RNG state (which kgym's guards watch) is left alone


def output_scale(out) -> float:
    """The root mean square of the finite floating values of an output (tensor, scalar or sequence of them):
    the reference's own magnitude.  0.0 when there are none or all are zero."""
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    total, count = 0.0, 0
    with torch.no_grad():
        # Every chunk's norm first, read back once a device (each read waits for the GPU: on a shared one, a turn
        # between contexts), then added up in the order the chunks come, as before.
        norms = read_all([torch.linalg.vector_norm(x.detach().reshape(-1)[start:start + CHUNK], dtype=torch.float64)
                           for x in items if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel()
                           for start in range(0, x.numel(), CHUNK)])
        next_norm = iter(norms)
        for x in items:
            if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel():
                flat = x.detach().reshape(-1)
                for start in range(0, flat.numel(), CHUNK):
                    c = flat[start:start + CHUNK]
                    # One reduction when every value is finite (the usual case: variants whose reference
                    # holds NaN/Inf are skipped before anything is compared); else the finite ones alone.
                    sq = float(next(next_norm)) ** 2
                    if math.isfinite(sq):
                        total += sq
                        count += c.numel()
                        continue
                    c = c.double()
                    c = c[torch.isfinite(c)]
                    total += float((c * c).sum().item())
                    count += c.numel()
            elif isinstance(x, float) and math.isfinite(x):
                total += x * x
                count += 1
    return math.sqrt(total / count) if count else 0.0


def range_tolerance(atol: float, scale: float) -> float:
    """The absolute tolerance of a variant whose reference output has RMS ``scale``: ``atol`` scaled by it,
    never by less than MIN_SCALE (variant_tolerance uses it on every variant).

    Why scaled: an absolute 1e-4 means nothing at other magnitudes.  Outputs of 1e6 (a GEMM of inputs ×100)
    carry rounding errors of 1e-2 in their small elements, as honest as the reference's own; outputs of 4e-5
    (a Frobenius normalisation of millions of elements) pass as all zeros.  Why the floor: below it the
    differences are the rounding of intermediates near 1, not bugs (tanh as (1 − e^(−2x)) / (1 + e^(−2x)) is off
    by 1e-7 for any tiny x, 100% of tanh(1e-25)); what tiny inputs must not do is blow up (inf, NaN, or values
    far from the reference).  rtol (per element) is unchanged."""
    return atol * max(scale, MIN_SCALE)


@dataclasses.dataclass
class Tolerance:
    """What one comparison holds a candidate's output to (variant_tolerance), and the facts about it that the
    result reports."""
    atol: float                   # every element: |c - r| <= atol + rtol * |r|
    rtol: float
    profile: str = DEFAULT_PROFILE
    base_atol: float | None = None  # the profile's (or the job's) atol before scaling
    scale: float | None = None     # RMS of the reference output's floating values (None: none)
    below_floor: bool = False      # atol is the floor (an absolute number), not relative to the output
    floor: float | None = None     # the absolute tolerance below which the output lies when below_floor
    # Below the floor on the task's own magnitudes: the absolute term of the relative check (base_atol *
    # scale), counted as relative_mismatches; None where that check does not apply.
    relative_atol: float | None = None
    share: float = BELOW_FLOOR_SHARE  # relative_mismatches above share * elements fail (C decides)
    # The small-elements check, where announced (tail_tolerance): its numbers and the counts that announced it.
    # C requires the comparison's "tail" facts wherever this is an object.
    tail: dict | None = None

    def facts(self) -> dict:
        return {"profile": self.profile, "base_atol": self.base_atol, "scale": self.scale,
                "below_floor": self.below_floor, "floor": self.floor, "relative_atol": self.relative_atol,
                "share": self.share if self.relative_atol is not None else None, "tail": self.tail}


def variant_tolerance(ref_out, atol: float, rtol: float, value_range: bool = False, profile: str = DEFAULT_PROFILE,
                      share: float = BELOW_FLOOR_SHARE) -> Tolerance:
    """The tolerance for one comparison against ``ref_out``: ``atol``/``rtol`` are the profile's numbers for the
    output's dtype (tolerances) or the job's own.

    atol is scaled by the reference output's RMS s, never by less than MIN_SCALE (range_tolerance), on every
    variant: an absolute 1e-4 judges outputs of 2.5e-6 (level1/23's softmax over 393,216 columns) by nothing,
    and a one-pass softmax whose denominator was estimated from 4,096 samples passed there.  Where s is below
    MIN_SCALE the floor decides atol, and an element may still miss by a large part of its own value; there the
    comparison also counts the elements that miss by more than ``relative_atol + rtol * |r|`` with
    relative_atol = atol * s (never zero while s is not: an all-zero reference has nothing to be relative to),
    and C fails a candidate that misses so on more than ``share`` of them unless the float64 adjudication finds
    it as close to the exact result as the float32 reference (an output that is the rounding noise of a
    cancellation, level2/94 at CPU sizes, holds no relative accuracy for anyone).  The value-range variants
    (inputs moved to magnitudes the task never uses: ×1e-3, ×1e-25, ...) keep the floor alone: there the
    rounding of intermediates near 1 is honest (range_tolerance), and what they test is that nothing blows up.
    Outputs without floating values keep the exact tolerance.

    Under the ``kernelbench`` profile the task's own magnitudes are compared as KernelBench does, by
    allclose(atol, rtol) with atol = 1e-2 as it is, for outputs up to unit scale, and relative to the output
    above it (atol * s: KernelBench's own inputs are rand, and a signed GEMM's outputs of RMS 16 carry TF32
    errors of 0.05 near zero, which an absolute 1e-2 would fail on the signed variants KernelBench does not
    have); never stricter than KernelBench's check.  Below unit scale the output is below that floor, and the
    same relative check (at rtol = 1e-2) keeps the comparison from being vacuous there; the value ranges scale
    as under strict."""
    floats = [x for x in (ref_out if isinstance(ref_out, (tuple, list)) else [ref_out])
              if (isinstance(x, torch.Tensor) and x.is_floating_point()) or isinstance(x, float)]
    if not floats or atol == 0.0:
        return Tolerance(atol=atol, rtol=rtol, profile=profile, base_atol=atol)
    scale = output_scale(floats)
    if profile == "kernelbench" and not value_range:
        applied, floor = atol * max(scale, 1.0), atol  # KernelBench's allclose up to unit scale
        below = scale < 1.0
    else:
        applied, floor = range_tolerance(atol, scale), atol * MIN_SCALE
        below = scale < MIN_SCALE
    relative = atol * scale if below and scale > 0 and not value_range else None
    return Tolerance(atol=applied, rtol=rtol, profile=profile, base_atol=atol, scale=scale, below_floor=below,
                     floor=floor, relative_atol=relative, share=share)


def tiny_elements(ref_out, atol: float) -> tuple:
    """(tiny, nonzero): of the float32 tensors in ``ref_out`` (a tensor or a sequence), how many finite elements are
    nonzero, and how many of those lie below ``atol`` (the applied absolute tolerance: an unwritten zero passes
    there).  Counted over the nonzero ones because an output that underflows to exact zero (a full-size cumprod:
    all but ~100 elements of each 32,768-long row) has nothing to check where it is zero."""
    items = list(ref_out) if isinstance(ref_out, (tuple, list)) else [ref_out]
    counts = None  # (nonzero, tiny), summed on the outputs' device and fetched once: every variant's tolerance
    with torch.no_grad():  # asks, and each fetch on a GPU waits for a turn between contexts
        for x in items:
            if not (isinstance(x, torch.Tensor) and x.dtype == torch.float32):
                continue
            flat = x.detach().reshape(-1)
            for start in range(0, flat.numel(), CHUNK):
                a = flat[start:start + CHUNK].abs()
                live = (a > 0) & (a < math.inf)  # NaN compares false
                part = torch.stack([live.sum(), (live & (a < atol)).sum()])
                counts = part if counts is None else counts + part.to(counts.device)
    if counts is None:
        return 0, 0
    nonzero, tiny = (int(v) for v in counts.tolist())
    return tiny, nonzero


def tail_tolerance(ref_out, tol: Tolerance, value_range: bool = False, announced: bool = False):
    """Announces the small-elements check on ``tol`` (sets tol.tail) where it applies: the strict profile, the
    task's own magnitudes (the value ranges test that nothing blows up, and keep the floor alone), and more than
    TAIL_SHARE of the float32 reference's nonzero finite elements below the applied atol.  Decided from the
    reference output alone, so a candidate cannot move it.  Why strict only: ``kernelbench`` is KernelBench's own
    allclose, which admits fp16/bf16 arithmetic, and no half-precision cumprod keeps 2^-6 of its small elements
    (fp16's range ends at 6e-5).  ``announced``: the task already announced it for outputs like this one (the timed
    calls: decided once from the base inputs' reference output, child.Evaluation.timing), so it holds wherever this
    output has a tiny element, whatever its own share (a timed call's fresh inputs may fall below TAIL_SHARE where
    the base's did not, and the timed sample holds the tiny elements by the base's decision)."""
    if tol.profile != "strict" or value_range or not tol.atol:
        return tol
    tiny, nonzero = tiny_elements(ref_out, tol.atol)
    if nonzero and (tiny > TAIL_SHARE * nonzero or (announced and tiny)):
        tol.tail = {"bound": TAIL_BOUND, "conditioned": TAIL_CONDITIONED, "least": TAIL_LEAST, "draws": TAIL_DRAWS,
                    "tiny": tiny, "nonzero": nonzero, "share": TAIL_SHARE}
    return tol


def _type_name(x) -> str:
    t = type(x)
    return "torch.Tensor" if t is torch.Tensor else (t.__name__ if t.__module__ == "builtins"
                                                     else f"{t.__module__}.{t.__qualname__}")


def _num(x: float):
    """A float for JSON: non-finite values as strings."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _is_scalar(x) -> bool:
    return isinstance(x, (bool, int, float))


def _dtype_name(x) -> str:
    return str(x.dtype).replace("torch.", "") if isinstance(x, torch.Tensor) else type(x).__name__


def reference_ok(out) -> tuple:
    """(False, reason) when the reference output holds NaN/Inf: that variant is skipped, not held against
    the candidate."""
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    bad, counts = 0, []
    with torch.no_grad():
        for x in items:
            if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
                flat = x.detach().reshape(-1)
                for start in range(0, flat.numel(), CHUNK):  # no whole-output mask (memory: see _compare_tensors)
                    counts.append((~torch.isfinite(flat[start:start + CHUNK])).sum())
            elif isinstance(x, float) and not math.isfinite(x):
                bad += 1
        bad += sum(int(v) for v in read_all(counts))  # read once a device (output_scale says why)
    if bad:
        return False, f"the reference output holds {bad} NaN/Inf value{'s' if bad != 1 else ''}"
    return True, ""


# The fused pass (one kernel instead of about twenty per chunk, no host sync per chunk): on a GPU, for two
# contiguous floating tensors of at least FUSED_MIN elements.  The same arithmetic as the chunked pass, in
# float64, with floating-point contraction off (an fma would round atol + rtol * |r| differently), so the facts
# are the same.  Why: the chunked pass made ~50 passes over a multi-GB output's bytes and was half of a
# large task's correctness stage (level1/19: 0.95 of 1.96 s), time during which the evaluation holds its
# memory reservation and other evaluations wait for it.
FUSED_MIN = 1 << 20
_FUSED_BLOCK = 1024
_FUSED_ITERS = 16
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@triton.jit
def _facts_kernel(r_ptr, c_ptr, n, params_ptr, counts_ptr, maxes_ptr, first_ptr,
                  BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    atol = tl.load(params_ptr)
    rtol = tl.load(params_ptr + 1)
    tiny = tl.load(params_ptr + 2)
    rel_atol = tl.load(params_ptr + 3)
    bad = tl.zeros([BLOCK], dtype=tl.int64)
    rel_bad = tl.zeros([BLOCK], dtype=tl.int64)
    r_nonfinite = tl.zeros([BLOCK], dtype=tl.int64)
    c_nonfinite = tl.zeros([BLOCK], dtype=tl.int64)
    max_abs = tl.zeros([BLOCK], dtype=tl.float64)
    max_rel = tl.zeros([BLOCK], dtype=tl.float64)
    first = tl.full([BLOCK], n, dtype=tl.int64)
    for it in range(ITERS):
        offs = (pid * ITERS + it) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
        inside = offs < n
        r = tl.load(r_ptr + offs, mask=inside, other=0.0).to(tl.float64)
        c = tl.load(c_ptr + offs, mask=inside, other=0.0).to(tl.float64)
        r_fin = tl.abs(r) < float("inf")  # false for inf and NaN
        c_fin = tl.abs(c) < float("inf")
        both = r_fin & c_fin
        diff = tl.abs(c - r)
        same = (r == c) | ((r != r) & (c != c))
        ok = (both & (diff <= atol + rtol * tl.abs(r))) | same
        wrong = inside & (ok == 0)
        bad += wrong.to(tl.int64)
        rel_bad += (inside & (((both & (diff <= rel_atol + rtol * tl.abs(r))) | same) == 0)).to(tl.int64)
        r_nonfinite += (inside & (r_fin == 0)).to(tl.int64)
        c_nonfinite += (inside & (c_fin == 0)).to(tl.int64)
        diff = tl.where(both & inside, diff, 0.0)
        rel = tl.where(both & inside, diff / tl.maximum(tl.abs(r), tiny), 0.0)
        max_abs = tl.maximum(max_abs, diff)
        max_rel = tl.maximum(max_rel, rel)
        first = tl.minimum(first, tl.where(wrong, offs, n))
    tl.store(counts_ptr + pid * 4, tl.sum(bad, axis=0))
    tl.store(counts_ptr + pid * 4 + 1, tl.sum(r_nonfinite, axis=0))
    tl.store(counts_ptr + pid * 4 + 2, tl.sum(c_nonfinite, axis=0))
    tl.store(counts_ptr + pid * 4 + 3, tl.sum(rel_bad, axis=0))
    tl.store(maxes_ptr + pid * 2, tl.max(max_abs, axis=0))
    tl.store(maxes_ptr + pid * 2 + 1, tl.max(max_rel, axis=0))
    tl.store(first_ptr + pid, tl.min(first, axis=0))


# Set by enable_fused: the judge compiles the kernel once per machine, into a cache directory the runner cannot
# write (a compiled comparison planted there would decide every later verdict): off until then.
_fused_on = False


def enable_fused(cache_dir: str):
    """Lets compare use the fused kernel on GPU outputs, its compiled code kept in ``cache_dir`` (made, mode
    0700, when missing).  Refused, and compare stays on the chunked pass, unless that directory is one only
    this uid (or root) can write, through every directory above it (a sticky one like /tmp aside:
    tritoncache.safe_dir, the check the runners' shared Triton modules pass too): the runner runs as another
    uid and under Landlock, so it cannot plant code there.  Returns None, or why not."""
    global _fused_on
    import os

    from ..shared.tritoncache import safe_dir

    leaf, why = safe_dir(cache_dir, 0o700)
    if leaf is None:
        return why
    os.environ["TRITON_CACHE_DIR"] = leaf
    _fused_on = True
    return None


def _fused_failed(exc):
    global _fused_on
    import sys

    _fused_on = False
    print(f"kgym judge: fused comparison failed, chunked from now on: {type(exc).__name__}: {exc}"[:500],
          file=sys.stderr)


def _fusable(r: torch.Tensor, c: torch.Tensor) -> bool:
    """Whether r and c (on one device: _compare_tensors moved c) go through the fused pass."""
    return (_fused_on and r.is_cuda and r.numel() >= FUSED_MIN and r.dtype in _FLOATS
            and c.dtype in _FLOATS and r.is_contiguous() and c.is_contiguous() and type(r) is torch.Tensor
            and type(c) is torch.Tensor)


def _element_facts(elements: int, relative: bool) -> dict:
    """The element facts of two same-shape tensors, none counted yet (both passes fill in the same record);
    ``relative``: whether relative_mismatches are counted."""
    facts = {"elements": elements, "mismatches": 0, "max_abs_error": 0.0, "max_rel_error": 0.0,
             "first_mismatch": None, "first_mismatch_values": None,
             "reference_nonfinite": 0, "candidate_nonfinite": 0}
    if relative:
        facts["relative_mismatches"] = 0
    return facts


def _fused_facts(r: torch.Tensor, c: torch.Tensor, atol: float, rtol: float, relative_atol=None) -> dict:
    """_compare_tensors' facts from one kernel over contiguous r and c (same shape, floating, one device)."""
    n = r.numel()
    per_program = _FUSED_BLOCK * _FUSED_ITERS
    programs = (n + per_program - 1) // per_program
    dev = r.device
    params = torch.tensor([atol, rtol, torch.finfo(torch.float32).tiny,
                           atol if relative_atol is None else relative_atol], dtype=torch.float64, device=dev)
    counts = torch.empty((programs, 4), dtype=torch.int64, device=dev)
    maxes = torch.empty((programs, 2), dtype=torch.float64, device=dev)
    first = torch.empty(programs, dtype=torch.int64, device=dev)
    _facts_kernel[(programs,)](r, c, n, params, counts, maxes, first, BLOCK=_FUSED_BLOCK, ITERS=_FUSED_ITERS,
                               enable_fp_fusion=False)
    # One fetch for every figure (each fetch waits for the GPU: a turn between contexts when others share it,
    # docs/PERFORMANCE.md, twelfth session).  The counts and the first mismatch's index (n where none) are below
    # 2**53: exact in float64.
    got = torch.cat([counts.sum(0).double(), first.min().reshape(1).double(), maxes.max(0).values]).tolist()
    bad, r_nonfinite, c_nonfinite, rel_bad, at = (int(x) for x in got[:5])
    max_abs, max_rel = got[5], got[6]
    facts = _element_facts(n, relative_atol is not None)
    facts.update(mismatches=bad, max_abs_error=_num(max_abs), max_rel_error=_num(max_rel),
                 reference_nonfinite=r_nonfinite, candidate_nonfinite=c_nonfinite)
    if relative_atol is not None:
        facts["relative_mismatches"] = rel_bad
    if bad:
        facts["first_mismatch"] = [int(k) for k in torch.unravel_index(torch.tensor(at), r.shape)] \
            if r.dim() else []
        rflat, cflat = r.reshape(-1), c.reshape(-1)
        facts["first_mismatch_values"] = [_num(rflat[at].double().item()), _num(cflat[at].double().item())]
    return facts


def _compare_tensors(r: torch.Tensor, c: torch.Tensor, atol: float, rtol: float, relative_atol=None) -> dict:
    """Element facts for two tensors of the same shape (r on its device; c is moved there if needed).
    ``relative_atol``: also count the elements that miss |c - r| <= relative_atol + rtol * |r|
    (relative_mismatches)."""
    r, c = r.detach(), c.detach()
    if c.device != r.device:
        c = c.to(r.device)
    if _fusable(r, c):
        try:
            return _fused_facts(r, c, atol, rtol, relative_atol)
        except Exception as exc:  # noqa: BLE001 — the judge's own kernel failed (no compiler, say): not the
            if is_out_of_memory(exc):  # candidate's doing, so the chunked pass decides, from now on
                raise
            _fused_failed(exc)
    rflat, cflat = r.reshape(-1), c.reshape(-1)  # views when contiguous
    tiny = torch.finfo(torch.float32).tiny
    facts = _element_facts(r.numel(), relative_atol is not None)
    for start in range(0, r.numel(), CHUNK):
        rc = rflat[start:start + CHUNK].double()
        cc = cflat[start:start + CHUNK].double()
        rfin, cfin = torch.isfinite(rc), torch.isfinite(cc)
        diff = (cc - rc).abs()
        both = rfin & cfin
        # close (finite pairs only: with r = inf the tolerance itself is inf), or equal (same infinity), or
        # both NaN
        same = (rc == cc) | (torch.isnan(rc) & torch.isnan(cc))
        ok = (both & (diff <= atol + rtol * rc.abs())) | same
        figures = [(~ok).sum(), (~rfin).sum(), (~cfin).sum()]
        if relative_atol is not None:
            figures.append((~((both & (diff <= relative_atol + rtol * rc.abs())) | same)).sum())
        diff = torch.where(both, diff, 0.0)
        rel = torch.where(both, diff / rc.abs().clamp_min(tiny), 0.0)  # NaN in r would poison the max
        at = torch.argmax((~ok).to(torch.uint8))  # the first mismatching element (0 where none)
        figures += [diff.max(), rel.max(), at, rc[at], cc[at]]
        # One read of the chunk's figures (each read waits for the GPU: on a shared one, a turn between contexts;
        # docs/PERFORMANCE.md, thirty-sixth session).  The counts and the index are below 2**53: exact in float64.
        got = torch.stack([x.double() for x in figures]).tolist()
        bad, r_nonfinite, c_nonfinite = (int(x) for x in got[:3])
        if relative_atol is not None:
            facts["relative_mismatches"] += int(got[3])
        max_abs, max_rel, i, r_at, c_at = got[-5:]
        facts["reference_nonfinite"] += r_nonfinite
        facts["candidate_nonfinite"] += c_nonfinite
        facts["max_abs_error"] = max(facts["max_abs_error"], max_abs)
        facts["max_rel_error"] = max(facts["max_rel_error"], max_rel)
        if bad and facts["first_mismatch"] is None:
            flat = start + int(i)
            facts["first_mismatch"] = [int(k) for k in torch.unravel_index(torch.tensor(flat), r.shape)] \
                if r.dim() else []
            facts["first_mismatch_values"] = [_num(r_at), _num(c_at)]
        facts["mismatches"] += bad
    facts["max_abs_error"] = _num(facts["max_abs_error"])
    facts["max_rel_error"] = _num(facts["max_rel_error"])
    return facts


def _compare_one(r, c, atol, rtol, relative_atol=None) -> dict:
    """Facts for one output item (tensor or Python scalar)."""
    res = {"shape_ok": False, "reference_shape": None, "candidate_shape": None,
           "dtype_ok": False, "reference_dtype": _dtype_name(r), "candidate_dtype": _dtype_name(c),
           "elements": 0, "mismatches": None, "max_abs_error": None, "max_rel_error": None,
           "first_mismatch": None, "first_mismatch_values": None,
           "reference_nonfinite": 0, "candidate_nonfinite": 0, "error": None}
    if _is_scalar(r):
        r = torch.tensor(float(r), dtype=torch.float64)
    if _is_scalar(c):
        c = torch.tensor(float(c), dtype=torch.float64)
    if not isinstance(r, torch.Tensor):
        res["error"] = f"the reference returned a {_type_name(r)}, which cannot be compared"
        return res
    res["reference_shape"] = list(r.shape)
    if not isinstance(c, torch.Tensor):
        res["error"] = f"the candidate returned a {_type_name(c)} where the reference returned a tensor"
        return res
    res["candidate_shape"] = list(c.shape)
    res["dtype_ok"] = res["reference_dtype"] == res["candidate_dtype"]
    res["elements"] = r.numel()
    if tuple(r.shape) != tuple(c.shape):
        res["error"] = f"shape mismatch: reference {list(r.shape)}, candidate {list(c.shape)}"
        return res
    res["shape_ok"] = True
    try:
        res.update(_compare_tensors(r, c, atol, rtol, relative_atol))
    except Exception as e:  # e.g. a candidate tensor on the meta device or of an odd subclass
        if is_out_of_memory(e):
            raise  # kgym could not check, the outputs are not wrong: the caller retries with the GPU alone
        res["error"] = f"cannot compare the outputs: {type(e).__name__}: {e}"
    return res


def sample_agrees(reference_out, candidate_out, atol: float, rtol: float, samples: int = 1 << 16, seed: int = 0,
                  relative_atol=None, share: float = BELOW_FLOOR_SHARE):
    """Whether ``candidate_out`` is within tolerance of ``reference_out`` at ``samples`` random positions of
    each output tensor (every position of a smaller one): True or False, or None when no sample can be taken
    (not tensors, shapes, dtypes or devices differ, not contiguous), and the caller compares in full.
    With ``relative_atol`` (an output below the floor: variant_tolerance) more than ``share`` of a tensor's
    sampled positions missing relative_atol + rtol * |r| is a disagreement too.

    The check of timed outputs: an output that was not computed for these inputs (skipped, cached, reused)
    is wrong almost everywhere, and a sample finds it at a cost of a few kernels instead of a full
    double-precision pass over gigabytes.  The positions come from a generator of their own (``seed``), so
    the process's RNG state, which kgym's guards watch, is left alone."""
    refs = list(reference_out) if isinstance(reference_out, (tuple, list)) else [reference_out]
    cands = list(candidate_out) if isinstance(candidate_out, (tuple, list)) else [candidate_out]
    if len(refs) != len(cands):
        return None
    with torch.no_grad():
        for r, c in zip(refs, cands):
            if not (isinstance(r, torch.Tensor) and isinstance(c, torch.Tensor)) or type(c) is not torch.Tensor:
                return None
            if r.shape != c.shape or r.dtype != c.dtype or r.device != c.device:
                return None
            if not (r.is_contiguous() and c.is_contiguous()):
                return None
            if r.numel() == 0:
                continue
            rf, cf = r.detach().reshape(-1), c.detach().reshape(-1)
            if r.numel() > samples:
                gen = torch.Generator(device=r.device)
                gen.manual_seed(seed)
                idx = torch.randint(r.numel(), (samples,), device=r.device, generator=gen)
                rf, cf = rf[idx], cf[idx]
            rf, cf = rf.double(), cf.double()
            diff, same = (cf - rf).abs(), (rf == cf) | (torch.isnan(rf) & torch.isnan(cf))
            if not bool(((diff <= atol + rtol * rf.abs()) | same).all()):
                return False
            if relative_atol is not None:
                missed = int((~((diff <= relative_atol + rtol * rf.abs()) | same)).sum().item())
                if missed > share * rf.numel():
                    return False
    return True


# The timed calls' sample under the small-elements check (child._sample_agrees): a sampled tiny element r
# (TAIL_LEAST <= |r| < atol, float32) whose candidate value is further than this share of |r| from r, or not
# finite, sends the call to the full rule.  Where the full rule checks an element (|r - e| <= TAIL_CONDITIONED |e|)
# and passes it (|c - e| <= TAIL_BOUND |e|), |c - r| <= (TAIL_BOUND + TAIL_CONDITIONED) |e| and |e| <=
# |r| / (1 - TAIL_CONDITIONED), which stays below TAIL_SAMPLE_BOUND |r|: no element the full rule checks and passes
# trips the sample.  Elements the full rule leaves out (ill-conditioned: the float32 reference itself further than
# TAIL_CONDITIONED from e; |e| below TAIL_LEAST) may trip it, which costs a full check, never a verdict.
TAIL_SAMPLE_BOUND = TAIL_BOUND + 2.0 ** -11


def sample_tail_agrees(reference_sample, candidate_sample, atol: float) -> bool:
    """Whether every sampled tiny element of the float32 tensors in ``reference_sample`` (equal-length sequences of
    1-D samples, as child._sample_agrees picks them) has its candidate value within TAIL_SAMPLE_BOUND of itself
    (finite).  A tiny element: TAIL_LEAST <= |r| < atol.  False sends the call to the full rule, which holds the
    small-elements check itself; elements at or above atol are sample_agrees's."""
    with torch.no_grad():
        for r, c in zip(reference_sample, candidate_sample):
            if r.dtype != torch.float32 or r.numel() == 0:
                continue
            rd, cd = r.double(), c.double()
            a = rd.abs()
            tiny = (a >= TAIL_LEAST) & (a < atol)
            bad = tiny & ~(torch.isfinite(cd) & ((cd - rd).abs() <= TAIL_SAMPLE_BOUND * a))
            if bool(bad.any()):
                return False
    return True


def compare(reference_out, candidate_out, atol: float, rtol: float, relative_atol=None) -> dict:
    """Raw facts about how candidate_out matches reference_out (tensor, tuple/list of tensors, or scalar).
    With ``relative_atol`` (a Tolerance's, where the output is below the floor) the facts also count
    ``relative_mismatches``: elements beyond relative_atol + rtol * |r| (never fewer than mismatches when
    relative_atol <= atol)."""
    with torch.no_grad():
        if isinstance(reference_out, (tuple, list)):
            return _compare_sequence(reference_out, candidate_out, atol, rtol, relative_atol)
        res = _compare_one(reference_out, candidate_out, atol, rtol, relative_atol)
        res["kind"] = "scalar" if _is_scalar(reference_out) else "tensor"
        res["candidate_type"] = _type_name(candidate_out)
        if isinstance(candidate_out, (tuple, list)) and res["error"] is not None:
            res["error"] = (f"the candidate returned a {_type_name(candidate_out)} of {len(candidate_out)}, "
                            f"the reference a {'tensor' if res['kind'] == 'tensor' else 'scalar'}")
        return res


def _compare_sequence(ref, cand, atol, rtol, relative_atol=None) -> dict:
    """Item-by-item facts folded into one record; first_mismatch is prefixed with the item's index."""
    res = {"kind": "sequence", "shape_ok": False, "dtype_ok": False,
           "reference_shape": [list(x.shape) if isinstance(x, torch.Tensor) else [] for x in ref],
           "candidate_shape": None, "reference_dtype": [_dtype_name(x) for x in ref], "candidate_dtype": None,
           "elements": 0, "mismatches": None, "max_abs_error": None, "max_rel_error": None,
           "first_mismatch": None, "first_mismatch_values": None, "reference_nonfinite": 0,
           "candidate_nonfinite": 0, "candidate_type": _type_name(cand), "error": None}
    if not isinstance(cand, (tuple, list)):
        what = "tensor" if isinstance(cand, torch.Tensor) else _type_name(cand)
        res["error"] = f"the candidate returned a {what}, the reference a {_type_name(ref)} of {len(ref)}"
        return res
    res["candidate_shape"] = [list(x.shape) if isinstance(x, torch.Tensor) else [] for x in cand]
    res["candidate_dtype"] = [_dtype_name(x) for x in cand]
    if len(cand) != len(ref):
        res["error"] = f"the candidate returned {len(cand)} outputs, the reference {len(ref)}"
        return res
    items = [_compare_one(r, c, atol, rtol, relative_atol) for r, c in zip(ref, cand)]
    res["shape_ok"] = all(x["shape_ok"] for x in items)
    res["dtype_ok"] = all(x["dtype_ok"] for x in items)
    res["elements"] = sum(x["elements"] for x in items)
    for key in ("reference_nonfinite", "candidate_nonfinite"):
        res[key] = sum(x[key] for x in items)
    measured = [x for x in items if x["mismatches"] is not None]
    if measured:
        res["mismatches"] = sum(x["mismatches"] for x in measured)
        if relative_atol is not None:
            res["relative_mismatches"] = sum(x.get("relative_mismatches", x["mismatches"]) for x in measured)
        res["max_abs_error"] = max((x["max_abs_error"] for x in measured), key=_order)
        res["max_rel_error"] = max((x["max_rel_error"] for x in measured), key=_order)
    for k, x in enumerate(items):
        if x["first_mismatch"] is not None:
            res["first_mismatch"] = [k] + x["first_mismatch"]
            res["first_mismatch_values"] = x["first_mismatch_values"]
            break
    errors = [f"output {k}: {x['error']}" for k, x in enumerate(items) if x["error"]]
    res["error"] = "; ".join(errors) or None
    return res


def _order(v) -> float:
    """Sort key for a JSON-safe number (strings are the non-finite values)."""
    return float(v) if not isinstance(v, str) else math.inf
