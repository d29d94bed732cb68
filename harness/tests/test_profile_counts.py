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
