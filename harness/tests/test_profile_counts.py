"""The judge's re-judged profile (kgym_harness.judge.child._own_kernels): the candidate's kernel count is counted
by the judge from the rows it trusts, never taken from the runner."""

from kgym_harness.judge import child


def test_candidate_kernel_count_is_the_judges():
    prof = {"calls": 3, "kernel_count": 3, "candidate_kernel_count": 3, "total_device_us": 10.0,
            "kernels": [{"name": "mine", "device_us": 4.0, "candidate": True},
                        {"name": "claimed", "device_us": 3.0, "candidate": True},
                        {"name": "aten_add", "device_us": 3.0, "candidate": False}]}
    out = child._own_kernels(prof, {"mine"})  # "claimed" is not a @triton.jit name of the candidate
    assert out["candidate_kernel_count"] == 1
    assert out["kernel_count"] == 3
    assert out["candidate_device_us"] == 4.0


def test_kernel_count_is_never_below_the_rows_sent():
    """A runner that under-reports how many distinct kernels ran would raise kernel_coverage."""
    prof = {"calls": 1, "kernel_count": 1, "total_device_us": 6.0,
            "kernels": [{"name": "mine", "device_us": 2.0, "candidate": True},
                        {"name": "cublas_gemm", "device_us": 2.0, "candidate": False},
                        {"name": "aten_add", "device_us": 2.0, "candidate": False}]}
    out = child._own_kernels(prof, {"mine"})
    assert out["kernel_count"] == 3 and out["candidate_kernel_count"] == 1


FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
        "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")


def test_constant_fills_count_on_neither_side():
    """torch.zeros_like's memset (the H200 profile of fixture h36 on add_one: 2.82 us of fill, 2.69 us of the
    candidate's kernel) is allocation: out of the total, so coverage is the kernel's share of computing time."""
    prof = {"calls": 3, "kernel_count": 2, "total_device_us": 5.504,
            "kernels": [{"name": FILL, "device_us": 2.816, "candidate": False},
                        {"name": "affine_kernel", "device_us": 2.688, "candidate": True}]}
    out = child._own_kernels(prof, {"affine_kernel"})
    assert abs(out["fill_device_us"] - 2.816) < 1e-9 and abs(out["total_device_us"] - 2.688) < 1e-9
    assert abs(out["candidate_device_us"] - out["total_device_us"]) < 1e-9  # coverage 1.0, not 0.49


COPY = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
        "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()()"
        " const::{lambda(float)#1}>(at::TensorIteratorBase&, ...)::{lambda(int)#1}>(int, ...)")


def test_library_compute_still_counts_against_coverage():
    """Only ATen's constant fills and same-dtype copies are set aside: an add or a GEMM of PyTorch's stays library
    compute, and a candidate that claims a fill's or a copy's name for its own kernel gains nothing (its kernel is
    the candidate's)."""
    add = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
    prof = {"calls": 1, "kernel_count": 3, "total_device_us": 9.0,
            "kernels": [{"name": add, "device_us": 4.0, "candidate": False},
                        {"name": "ampere_sgemm_128x64_nn", "device_us": 4.0, "candidate": False},
                        {"name": "mine", "device_us": 1.0, "candidate": True}]}
    out = child._own_kernels(prof, {"mine"})
    assert out["fill_device_us"] == 0 and out["copy_device_us"] == 0
    assert out["total_device_us"] == 9.0 and out["candidate_device_us"] == 1.0
    claimed = {"calls": 1, "kernel_count": 1, "total_device_us": 2.0,
               "kernels": [{"name": COPY, "device_us": 2.0, "candidate": True}]}
    out = child._own_kernels(claimed, {COPY})
    assert out["copy_device_us"] == 0 and out["candidate_device_us"] == 2.0


def test_same_dtype_copies_count_on_neither_side():
    """The honest probe's c12 on an H200 (level1/49, the reduced dimension made last with .contiguous()): 15,220 us
    of strided copy, 1,897 us of its own reduction, coverage 0.11 with the copy counted; layout, so set aside."""
    prof = {"calls": 1, "kernel_count": 2, "total_device_us": 17116.905,
            "kernels": [{"name": COPY, "device_us": 15220.054, "candidate": False, "count": 4},
                        {"name": "row_max_kernel", "device_us": 1896.851, "candidate": True, "count": 1}]}
    out = child._own_kernels(prof, {"row_max_kernel"})
    assert abs(out["copy_device_us"] - 15220.054) < 1e-6
    assert abs(out["total_device_us"] - 1896.851) < 1e-6 and abs(out["candidate_device_us"] - 1896.851) < 1e-6
    assert [k["copy"] for k in out["kernels"]] == [True, False]


def test_side_stream_time_passes_only_as_a_number():
    """The runner's device time on other streams goes on to kgym (which then times on the device-wide clock) as a
    finite number >= 0; anything else is unknown (None), never 0, so a runner cannot turn it into a clean profile."""
    base = {"calls": 1, "kernel_count": 1, "total_device_us": 2.0,
            "kernels": [{"name": "mine", "device_us": 2.0, "candidate": True}]}
    for sent, kept in [(1.5, 1.5), (0, 0.0), (None, None), ("1.5", None), (True, None), (float("nan"), None),
                       (float("inf"), None), (-1.0, None)]:
        out = child._own_kernels(dict(base, side_stream_device_us=sent), {"mine"})
        assert out["side_stream_device_us"] == kept and (kept is None) == (out["side_stream_device_us"] is None)
    assert child._own_kernels(dict(base), {"mine"})["side_stream_device_us"] is None


def test_a_withheld_side_stream_figure_is_missing_where_the_judge_s_driver_names_streams():
    """Red team 33: a runner whose stream_id was replaced sent no figure, and kgym let the gap decide alone.  Where the
    judge's own driver gives stream ids (the runner's is the same driver), anything but a number is side_stream_missing,
    which kgym reads as side-stream time (timing.c side_stream_seen); where it does not, the gap decides as before."""
    base = {"calls": 1, "kernel_count": 1, "total_device_us": 2.0,
            "kernels": [{"name": "mine", "device_us": 2.0, "candidate": True}]}
    for sent, ids, missing in [(None, True, True), ("x", True, True), (-1.0, True, True), (0.0, True, False),
                               (2.5, True, False), (None, False, False), ("x", False, False)]:
        prof = dict(base) if sent is None else dict(base, side_stream_device_us=sent)
        assert child._own_kernels(prof, {"mine"}, ids)["side_stream_missing"] is missing, (sent, ids)
    assert child._own_kernels(dict(base), {"mine"})["side_stream_missing"] is False  # the default: no driver ids
    assert child._judge_has_stream_ids() is False  # this CPU machine: no driver
