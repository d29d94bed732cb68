"""The zygote's warm-up: what every judge and runner would otherwise pay after the fork."""

import sys

import torch


def test_preload_pays_tritons_first_launch_costs_before_the_fork():
    """Triton's first launch in a process hashes Triton's own files (triton_key) and imports the Gluon modules its
    argument specialiser checks against: 0.5 s an H100 host spent in every runner's first kernel, until the zygote
    did both once (neither needs CUDA)."""
    from triton.runtime.cache import triton_key

    from kgym_harness import zygote

    threads = torch.get_num_threads()
    triton_key.cache_clear()
    try:
        info = zygote._preload()
    finally:
        torch.set_num_threads(threads)
    assert triton_key.cache_info().currsize == 1
    assert "triton.experimental.gluon.nvidia.hopper" in sys.modules
    assert info["triton"] and info["torch"]


def test_a_second_gpu_is_cuda_0_inside_its_zygote():
    """kgym starts the zygote of cuda:N with CUDA_VISIBLE_DEVICES=N alone, so its judges and runners must name the
    GPU cuda:0: on two H200s every evaluation of the cuda:1 worker failed with "invalid device ordinal" while its
    children were handed "cuda:1"."""
    from kgym_harness import zygote

    assert zygote.local_device("cuda:1") == "cuda:0"
    assert zygote.local_device("cuda:0") == "cuda:0"
    assert zygote.local_device("cuda") == "cuda:0"
    assert zygote.local_device("cpu") == "cpu"
