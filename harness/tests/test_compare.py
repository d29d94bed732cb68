"""Tests of kgym_harness.judge.compare on hand-made outputs."""

import json
import math
import os

import pytest
import torch

from kgym_harness.judge import compare as cmp
from kgym_harness.shared import report


def check(ref, cand, atol=1e-4, rtol=1e-4):
    res = cmp.compare(ref, cand, atol, rtol)
    json.dumps(res, allow_nan=False)  # every fact must be plain JSON
    return res


def test_exact():
    x = torch.rand(4, 5)
    res = check(x, x.clone())
    assert res["kind"] == "tensor" and res["shape_ok"] and res["dtype_ok"]
    assert res["elements"] == 20 and res["mismatches"] == 0
    assert res["max_abs_error"] == 0.0 and res["max_rel_error"] == 0.0
    assert res["first_mismatch"] is None and res["first_mismatch_values"] is None
    assert res["reference_shape"] == [4, 5] and res["reference_dtype"] == "float32"
    assert res["candidate_type"] == "torch.Tensor" and res["error"] is None


def test_within_tolerance():
    x = torch.rand(100, dtype=torch.float64) + 1
    res = check(x, x + 5e-5)
    assert res["mismatches"] == 0
    assert res["max_abs_error"] == pytest.approx(5e-5)
    assert 0 < res["max_rel_error"] <= 5e-5


def test_one_mismatch_at_known_index():
    x = torch.zeros(3, 4, 5)
    y = x.clone()
    y[1, 2, 3] = 0.5
    res = check(x, y)
    assert res["mismatches"] == 1 and res["first_mismatch"] == [1, 2, 3]
    assert res["first_mismatch_values"] == [0.0, 0.5]
    assert res["max_abs_error"] == pytest.approx(0.5)


def test_first_mismatch_across_chunks(monkeypatch):
    monkeypatch.setattr(cmp, "CHUNK", 7)  # force many chunks
    x = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    y = x.clone()
    y[4, 1] += 1
    y[5, 9] += 3
    res = check(x, y)
    assert res["mismatches"] == 2 and res["first_mismatch"] == [4, 1]
    assert res["max_abs_error"] == pytest.approx(3.0)


def test_nan_and_inf():
    ref = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0, 2.0, float("inf")])
    cand = torch.tensor([float("nan"), float("inf"), -float("inf"), float("nan"), 2.0, 5.0])
    res = check(ref, cand)
    # both NaN and equal infinities match; NaN for 1.0 and 5.0 for inf are mismatches
    assert res["mismatches"] == 2 and res["first_mismatch"] == [3]
    assert res["first_mismatch_values"] == [1.0, "nan"]
    assert res["reference_nonfinite"] == 4 and res["candidate_nonfinite"] == 4
    assert res["max_abs_error"] == 0.0 and res["max_rel_error"] == 0.0  # taken over finite pairs only


def test_inf_against_finite_is_mismatch():
    res = check(torch.tensor([float("inf")]), torch.tensor([1e30], dtype=torch.float64))
    assert res["mismatches"] == 1 and res["first_mismatch_values"] == ["inf", 1e30]


def test_shape_mismatch():
    res = check(torch.zeros(4, 5), torch.zeros(5, 4))
    assert not res["shape_ok"] and res["mismatches"] is None
    assert res["reference_shape"] == [4, 5] and res["candidate_shape"] == [5, 4]
    assert "shape mismatch" in res["error"]


def test_dtype_mismatch_still_measured():
    x = torch.rand(8)
    res = check(x, x.double())
    assert res["shape_ok"] and not res["dtype_ok"] and res["candidate_dtype"] == "float64"
    assert res["mismatches"] == 0


def test_tuple_outputs():
    a, b = torch.rand(3), torch.rand(2, 2)
    b2 = b.clone()
    b2[1, 0] += 1
    res = check((a, b), (a.clone(), b2))
    assert res["kind"] == "sequence" and res["shape_ok"] and res["elements"] == 7
    assert res["mismatches"] == 1 and res["first_mismatch"] == [1, 1, 0]
    assert res["reference_shape"] == [[3], [2, 2]] and res["candidate_type"] == "tuple"


def test_sequence_kind_errors():
    x = torch.rand(3)
    assert "a tuple of 2" in check(x, (x, x))["error"]
    assert "tensor" in check((x, x), x)["error"]
    res = check((x, x), (x,))
    assert res["error"] == "the candidate returned 1 outputs, the reference 2"
    res = check((x, torch.zeros(2)), (x, torch.zeros(3)))
    assert not res["shape_ok"] and res["error"].startswith("output 1: shape mismatch")


def test_integer_outputs_exact():
    ref = torch.tensor([[1, 2], [3, 4]])
    assert cmp.tolerances(ref.dtype) == (0.0, 0.0)
    assert check(ref, ref.clone(), 0, 0)["mismatches"] == 0
    res = check(ref, torch.tensor([[1, 2], [3, 5]]), 0, 0)
    assert res["mismatches"] == 1 and res["first_mismatch"] == [1, 1] and res["reference_dtype"] == "int64"


def test_scalar_outputs():
    res = check(2.5, 2.5)
    assert res["kind"] == "scalar" and res["mismatches"] == 0 and res["reference_dtype"] == "float"
    res = check(2.5, torch.tensor(2.6))  # a 0-d tensor for a Python float: compared, dtype differs
    assert res["mismatches"] == 1 and res["candidate_type"] == "torch.Tensor" and not res["dtype_ok"]
    assert "tensor" in check(torch.rand(2), "oops")["error"]


def test_zero_dim_tensor():
    res = check(torch.tensor(1.0), torch.tensor(1.5))
    assert res["mismatches"] == 1 and res["first_mismatch"] == [] and res["reference_shape"] == []


def test_empty_tensor():
    res = check(torch.zeros(0, 3), torch.zeros(0, 3))
    assert res["elements"] == 0 and res["mismatches"] == 0


def test_reference_ok():
    assert cmp.reference_ok(torch.rand(4)) == (True, "")
    ok, why = cmp.reference_ok((torch.rand(2), torch.tensor([1.0, float("nan"), float("inf")])))
    assert not ok and "2 NaN/Inf" in why
    assert cmp.reference_ok(torch.tensor([1, 2]))[0] and not cmp.reference_ok(math.inf)[0]


def test_tolerances():
    assert cmp.tolerances(torch.float32) == (1e-4, 1e-4)
    assert cmp.tolerances("float16") == cmp.tolerances(torch.bfloat16) == (1e-2, 1e-2)
    assert cmp.tolerances(torch.bool) == (0.0, 0.0)


def test_out_of_memory_is_not_a_mismatch(monkeypatch):
    # On a shared GPU the comparison itself may find no memory: that must reach the caller (which re-runs
    # the variant with the GPU alone), never read as "the outputs differ".
    def no_memory(*_args):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 256.00 MiB")

    monkeypatch.setattr(cmp, "_compare_tensors", no_memory)
    x = torch.rand(8)
    with pytest.raises(torch.OutOfMemoryError):
        cmp.compare(x, x.clone(), 1e-4, 1e-4)
    assert report.is_out_of_memory(RuntimeError("CUDA error: out of memory"))
    assert not report.is_out_of_memory(RuntimeError("shape mismatch"))


def test_other_comparison_failures_are_reported(monkeypatch):
    def broken(*_args):
        raise TypeError("odd tensor subclass")

    monkeypatch.setattr(cmp, "_compare_tensors", broken)
    x = torch.rand(8)
    res = cmp.compare(x, x.clone(), 1e-4, 1e-4)
    assert "cannot compare the outputs: TypeError" in res["error"]


def test_sample_agrees_catches_wrong_outputs():
    torch.manual_seed(0)
    ref = torch.randn(1 << 18)
    state = torch.get_rng_state()
    assert cmp.sample_agrees(ref, ref + 1e-6, 1e-4, 1e-4, samples=4096, seed=3) is True
    assert torch.equal(torch.get_rng_state(), state)  # the process's RNG is not touched
    stale = torch.randn(1 << 18)  # another call's output: wrong nearly everywhere
    assert cmp.sample_agrees(ref, stale, 1e-4, 1e-4, samples=4096, seed=3) is False
    half = ref.clone()
    half[::2] = 0  # half the work skipped
    assert cmp.sample_agrees(ref, half, 1e-4, 1e-4, samples=4096, seed=5) is False
    # a small output is checked at every position: one wrong element is found
    small = torch.randn(1000)
    one = small.clone()
    one[777] += 1
    assert cmp.sample_agrees(small, one, 1e-4, 1e-4, samples=4096) is False
    # tuples item by item; NaN where the reference has NaN is agreement
    nan = torch.tensor([float("nan"), 1.0])
    assert cmp.sample_agrees((small, nan), (small.clone(), nan.clone()), 1e-4, 1e-4) is True


def test_sample_agrees_defers_to_the_full_comparison():
    x = torch.randn(8, 8)
    assert cmp.sample_agrees(x, x.t(), 1e-4, 1e-4) is None  # not contiguous
    assert cmp.sample_agrees(x, x.double(), 1e-4, 1e-4) is None  # dtype differs
    assert cmp.sample_agrees(x, x.reshape(64), 1e-4, 1e-4) is None  # shape differs
    assert cmp.sample_agrees((x,), (x, x), 1e-4, 1e-4) is None  # count differs
    assert cmp.sample_agrees(x, 3.0, 1e-4, 1e-4) is None  # not a tensor


def test_output_scale_is_the_rms_of_finite_values():
    assert cmp.output_scale(torch.tensor([3.0, -4.0])) == pytest.approx(math.sqrt(12.5))
    # non-finite values are left out; tuples and Python floats count; integers and empty outputs do not
    assert cmp.output_scale((torch.tensor([float("inf"), 2.0]), 2.0, torch.tensor([7]))) == pytest.approx(2.0)
    assert cmp.output_scale(torch.zeros(5)) == 0.0 and cmp.output_scale(torch.empty(0)) == 0.0


def test_range_tolerance_follows_the_output_scale_with_a_floor():
    assert cmp.range_tolerance(1e-4, 1e6) == pytest.approx(100.0)   # a GEMM of inputs x100
    assert cmp.range_tolerance(1e-4, 0.5) == pytest.approx(5e-5)
    assert cmp.range_tolerance(1e-4, 1e-25) == pytest.approx(1e-4 * cmp.MIN_SCALE)  # tiny outputs: the floor
    # An all-zero answer to outputs of 4e-5 passes the plain 1e-4, not the scaled tolerance.
    ref = torch.full((1000,), 4e-5)
    atol = cmp.range_tolerance(1e-4, cmp.output_scale(ref))
    assert cmp.compare(ref, torch.zeros(1000), 1e-4, 1e-4)["mismatches"] == 0
    assert cmp.compare(ref, torch.zeros(1000), atol, 1e-4)["mismatches"] == 1000


# -- the fused pass (one Triton kernel; used on the GPU): the same facts as the chunked pass ----------------

def _awkward_pair(n, dtype=torch.float32):
    g = torch.Generator().manual_seed(7)
    r = torch.randn(n, generator=g, dtype=torch.float64)
    c = r + torch.randn(n, generator=g, dtype=torch.float64) * 1.5e-4  # some within tolerance, some not
    nan, inf = float("nan"), float("inf")
    r[5], c[5] = nan, nan          # both NaN: a match
    r[7], c[7] = inf, inf          # the same infinity: a match
    r[9], c[9] = inf, 1.0          # infinite reference, finite candidate: a mismatch
    c[11] = nan                    # NaN candidate: a mismatch
    r[13], c[13] = -inf, inf
    r[n - 3], c[n - 3] = 0.0, 1e-30
    r[17] = c[17] = 0.0
    return r.to(dtype), c.to(dtype)


@pytest.mark.parametrize("case", ["float32", "2d", "half_vs_float", "bfloat16", "float64", "identical",
                                  "exact", "border"])
def test_fused_facts_equal_the_chunked_pass(case):
    n = 20000 + 17  # two programs of the kernel, the second one partly past the end
    atol = rtol = 1e-4
    if case == "border":  # candidates exactly at atol + rtol * |r|, and one ulp beyond
        r = torch.rand(n, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
        c = r + (atol + rtol * r.abs())
        c[::2] = torch.nextafter(c[::2], torch.full_like(c[::2], 10.0))
    else:
        r, c = _awkward_pair(n)
        if case == "2d":
            r, c = r[:167 * 119].reshape(167, 119), c[:167 * 119].reshape(167, 119)
        elif case == "half_vs_float":
            r = r.half()
        elif case in ("bfloat16", "float64"):
            r, c = r.to(getattr(torch, case)), c.to(getattr(torch, case))
        elif case == "identical":
            c = r.clone()
        elif case == "exact":
            atol = rtol = 0.0
    fused = cmp._fused_facts(r, c, atol, rtol)  # in Triton's interpreter (conftest), on the CPU
    chunked = cmp._compare_tensors(r, c, atol, rtol)  # on the CPU: the chunked pass
    assert fused == chunked and "relative_mismatches" not in fused
    # The relative count (outputs below the floor) agrees too, and never counts fewer than the mismatches.
    fused_rel = cmp._fused_facts(r, c, atol, rtol, atol * 1e-3)
    assert fused_rel == cmp._compare_tensors(r, c, atol, rtol, atol * 1e-3)
    assert fused_rel["relative_mismatches"] >= fused_rel["mismatches"]
    json.dumps(fused, allow_nan=False)
    if case not in ("identical",):
        assert fused["mismatches"] > 0 and fused["first_mismatch"] is not None


def test_fused_pass_is_off_until_enabled_and_never_on_the_cpu(tmp_path, monkeypatch):
    monkeypatch.setattr(cmp, "_fused_on", False)
    x = torch.rand(cmp.FUSED_MIN)
    assert not cmp._fusable(x, x.clone())
    monkeypatch.setenv("TRITON_CACHE_DIR", "unchanged")
    assert cmp.enable_fused(str(tmp_path / "cache")) is None
    assert cmp._fused_on and os.environ["TRITON_CACHE_DIR"] == str((tmp_path / "cache").resolve())
    assert (tmp_path / "cache").stat().st_mode & 0o777 == 0o700
    assert not cmp._fusable(x, x.clone())  # CPU tensors: the chunked pass


def test_fused_cache_refused_where_another_user_could_write(tmp_path, monkeypatch):
    monkeypatch.setattr(cmp, "_fused_on", False)
    monkeypatch.setenv("TRITON_CACHE_DIR", "unchanged")
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)  # without the sticky bit: anyone could swap what lies below
    why = cmp.enable_fused(str(open_dir / "cache"))
    assert why is not None and "writable by other users" in why and str(open_dir) in why
    leaf = tmp_path / "leaf"
    leaf.mkdir()
    leaf.chmod(0o775)
    assert "writable by other users" in cmp.enable_fused(str(leaf))
    afile = tmp_path / "file"
    afile.write_text("")
    assert "not a directory" in cmp.enable_fused(str(afile)) or "File exists" in cmp.enable_fused(str(afile))
    if os.getuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, 12345, 12345)
        assert "belongs to uid 12345" in cmp.enable_fused(str(theirs))
    assert not cmp._fused_on and os.environ["TRITON_CACHE_DIR"] == "unchanged"


def test_a_failing_fused_kernel_falls_back_to_the_chunked_pass(monkeypatch, capsys):
    """The judge's own kernel failing (no compiler on the machine, say) is not the candidate's doing: the
    comparison is made the chunked way, not reported as an error against the output."""
    r, c = _awkward_pair(300)
    monkeypatch.setattr(cmp, "_fused_on", True)
    monkeypatch.setattr(cmp, "_fusable", lambda a, b: cmp._fused_on)

    def broken(*_a):
        raise RuntimeError("ptxas not found")

    monkeypatch.setattr(cmp, "_fused_facts", broken)
    res = check(r, c)
    assert res["error"] is None and res["mismatches"] == cmp._compare_tensors(r, c, 1e-4, 1e-4)["mismatches"] > 0
    assert not cmp._fused_on and "ptxas not found" in capsys.readouterr().err


# -- tolerances relative to the output (docs/evaluation-protocol.md, "Tolerances") ---------------------------

def test_variant_tolerance_scales_atol_to_the_output_on_every_variant():
    big = torch.full((100,), 1000.0)
    tol = cmp.variant_tolerance(big, 1e-4, 1e-4)
    assert tol.atol == pytest.approx(0.1) and tol.scale == pytest.approx(1000.0) and not tol.below_floor
    assert tol.relative_atol is None and tol.facts()["below_floor"] is False
    # outputs near 2.5e-6 (level1/23's softmax at its task size): the floor decides atol, and the relative
    # check holds each element to 1e-4 of the output's own scale
    tiny = torch.full((1000,), 2.5e-6)
    tol = cmp.variant_tolerance(tiny, 1e-4, 1e-4)
    assert tol.atol == pytest.approx(1e-6) and tol.below_floor
    assert tol.relative_atol == pytest.approx(2.5e-10) and tol.share == cmp.BELOW_FLOOR_SHARE
    # the value-range variants keep the floor alone; an all-zero reference has nothing to be relative to
    assert cmp.variant_tolerance(tiny, 1e-4, 1e-4, value_range=True).relative_atol is None
    zero = cmp.variant_tolerance(torch.zeros(10), 1e-4, 1e-4)
    assert zero.atol == pytest.approx(1e-6) and zero.below_floor and zero.relative_atol is None
    # integer outputs stay exact
    assert cmp.variant_tolerance(torch.arange(5), 0.0, 0.0).atol == 0.0


def test_an_approximation_below_the_floor_is_counted_not_hidden():
    """A softmax whose denominator is off by 0.5% (sampled): within the absolute floor at outputs of 2.5e-6,
    beyond rtol of its own value on every element."""
    torch.manual_seed(0)
    x = torch.rand(4, 400000)
    ref = torch.softmax(x, dim=1)
    approx = ref * 1.005
    tol = cmp.variant_tolerance(ref, 1e-4, 1e-4)
    res = cmp.compare(ref, approx, tol.atol, tol.rtol, tol.relative_atol)
    assert res["mismatches"] == 0 and res["relative_mismatches"] == ref.numel()
    # the old absolute rule saw nothing
    assert cmp.compare(ref, approx, 1e-4, 1e-4)["mismatches"] == 0
    # an honest recomputation (float64, rounded) misses nowhere
    honest = torch.softmax(x.double(), dim=1).float()
    assert cmp.compare(ref, honest, tol.atol, tol.rtol, tol.relative_atol)["relative_mismatches"] == 0
    # the sampled check of timed outputs sees it as well
    assert cmp.sample_agrees(ref, approx, tol.atol, tol.rtol, samples=4096) is True  # the floor alone
    assert cmp.sample_agrees(ref, approx, tol.atol, tol.rtol, samples=4096, relative_atol=tol.relative_atol) is False
    assert cmp.sample_agrees(ref, honest, tol.atol, tol.rtol, samples=4096, relative_atol=tol.relative_atol) is True


def test_relative_mismatches_in_sequences():
    a, b = torch.full((10,), 1e-6), torch.full((10,), 2e-6)
    res = cmp.compare((a, b), (a * 1.01, b.clone()), 1e-6, 1e-4, 1e-10)
    assert res["mismatches"] == 0 and res["relative_mismatches"] == 10


# -- tolerance profiles and the reference's precision (issue 37) -------------------------------------------

def test_profiles():
    assert cmp.tolerances(torch.float32, "kernelbench") == (1e-2, 1e-2)
    assert cmp.tolerances(torch.float16, "kernelbench") == (1e-2, 1e-2)
    assert cmp.tolerances(torch.int64, "kernelbench") == (0.0, 0.0)
    with pytest.raises(ValueError, match="unknown tolerance profile"):
        cmp.tolerances(torch.float32, "loose")
    # kernelbench: KernelBench's allclose up to unit scale, relative above it; below unit scale the relative
    # check at 1e-2 keeps it from being vacuous
    big = cmp.variant_tolerance(torch.full((10,), 64.0), 1e-2, 1e-2, profile="kernelbench")
    assert big.atol == pytest.approx(0.64) and not big.below_floor and big.relative_atol is None
    unit = cmp.variant_tolerance(torch.full((10,), 0.5), 1e-2, 1e-2, profile="kernelbench")
    assert unit.atol == pytest.approx(1e-2) and unit.below_floor and unit.relative_atol == pytest.approx(5e-3)
    tiny = cmp.variant_tolerance(torch.full((10,), 2.5e-6), 1e-2, 1e-2, profile="kernelbench")
    assert tiny.atol == pytest.approx(1e-2) and tiny.relative_atol == pytest.approx(2.5e-8)
    assert tiny.facts()["profile"] == "kernelbench" and tiny.facts()["floor"] == pytest.approx(1e-2)
    ranged = cmp.variant_tolerance(torch.full((10,), 0.5), 1e-2, 1e-2, value_range=True, profile="kernelbench")
    assert ranged.atol == pytest.approx(5e-3) and ranged.relative_atol is None
    # A TF32-level error (1e-3 of the output) passes kernelbench and fails strict.
    ref = torch.randn(256, 256) * 16
    tf32 = ref * (1 + 1e-3 * torch.randn_like(ref).sign())
    kb = cmp.variant_tolerance(ref, *cmp.tolerances(ref.dtype, "kernelbench"), profile="kernelbench")
    st = cmp.variant_tolerance(ref, *cmp.tolerances(ref.dtype))
    assert cmp.compare(ref, tf32, kb.atol, kb.rtol, kb.relative_atol)["mismatches"] == 0
    assert cmp.compare(ref, tf32, st.atol, st.rtol, st.relative_atol)["mismatches"] > 0


def test_reference_precision_is_the_profiles():
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.get_float32_matmul_precision())
    try:
        torch.backends.cudnn.allow_tf32 = True
        torch.set_float32_matmul_precision("high")
        assert cmp.apply_reference_precision("strict") == {"matmul_tf32": False, "cudnn_tf32": False,
                                                           "float32_matmul_precision": "highest"}
        assert not torch.backends.cudnn.allow_tf32 and torch.get_float32_matmul_precision() == "highest"
        assert cmp.apply_reference_precision("kernelbench") == cmp.REFERENCE_PRECISION["kernelbench"]
        assert torch.backends.cudnn.allow_tf32  # PyTorch's default, as KernelBench runs its reference
        assert set(cmp.REFERENCE_PRECISION) == set(cmp.PROFILES)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])


def test_the_chunked_pass_reads_each_chunk_once(monkeypatch, request):
    r, c = _awkward_pair(1000)
    monkeypatch.setattr(cmp, "CHUNK", 300)  # four chunks
    want = cmp._compare_tensors(r, c, 1e-4, 1e-4, 1e-7)
    reads = request.getfixturevalue("host_reads")
    assert cmp._compare_tensors(r, c, 1e-4, 1e-4, 1e-7) == want
    # one read a chunk, plus the first mismatch's index turned into coordinates (a CPU tensor, once)
    assert reads["n"] <= 4 + 1, reads
    (i,) = want["first_mismatch"]
    assert want["mismatches"] > 0 and want["first_mismatch_values"] == [_num(r[i].item()), _num(c[i].item())]
    assert not torch.isclose(r[:i].double(), c[:i].double(), rtol=1e-4, atol=1e-4, equal_nan=True).logical_not().any()


def _num(x):
    return cmp._num(x)


def test_reference_facts_read_once(monkeypatch, request):
    monkeypatch.setattr(cmp, "CHUNK", 10)
    out = (torch.arange(35, dtype=torch.float32) - 17, 2.5, torch.tensor([float("inf"), 1.0]))
    scale = math.sqrt((sum(float(v) ** 2 for v in range(-17, 18)) + 2.5 ** 2 + 1.0) / (35 + 1 + 1))
    reads = request.getfixturevalue("host_reads")
    ok, reason = cmp.reference_ok(out)
    assert not ok and "1 NaN/Inf" in reason and reads["n"] == 1
    reads["n"] = 0
    # the infinite chunk is read again on its own (the finite values alone), every other chunk once for all
    assert cmp.output_scale(out) == pytest.approx(scale) and reads["n"] == 2
    reads["n"] = 0
    assert cmp.reference_ok(out[:2]) == (True, "") and reads["n"] == 1
