"""profile.summarize (the Kineto events of the clock block summed by name) and bench/profile_probe.py's summary of
the same profile through key_averages, on fake events: the probe checks on a GPU that the two agree, so both
halves' arithmetic is checked here."""

import importlib.util
import os
from types import SimpleNamespace

import pytest
from torch.autograd import DeviceType

from kgym_harness.shared import profile

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "profile_probe.py")
_spec = importlib.util.spec_from_file_location("profile_probe", _PATH)
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)


class Event:
    def __init__(self, name, ns, device=DeviceType.CUDA, annotation=False, stream=7):
        self._n, self._ns, self._d, self._a, self._s = name, ns, device, annotation, stream

    def device_resource_id(self):
        return self._s

    def name(self):
        return self._n

    def duration_ns(self):
        return self._ns

    def device_type(self):
        return self._d

    def is_user_annotation(self):
        return self._a


def fake_prof(events):
    averaged = {}
    for e in events:  # what key_averages groups: every event of a name, its device time and count
        a = averaged.setdefault((e.name(), e.device_type()), SimpleNamespace(
            key=e.name(), device_type=e.device_type(), self_device_time_total=0.0, count=0))
        if not e.is_user_annotation():
            a.self_device_time_total += e.duration_ns() / 1e3
            a.count += 1
    return SimpleNamespace(profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: events)),
                           key_averages=lambda: list(averaged.values()))


def test_device_kernels_are_summed_by_name_and_the_rest_left_out():
    events = [Event("scale_kernel", 2000), Event("scale_kernel", 3000), Event("sin_kernel", 1000),
              Event("cudaLaunchKernel", 9000, device=DeviceType.CPU),  # the runtime call: host side
              Event("block", 50000, annotation=True),  # a range around kernels: not a kernel's time
              Event("empty", 0)]
    s = profile.summarize(fake_prof(events), 2, {"scale_kernel"})
    assert probe.agree(s, probe.averaged_summary(fake_prof(events), 2, {"scale_kernel"})) == ""
    assert s["kernels"] == [{"name": "scale_kernel", "device_us": 5.0, "count": 2, "candidate": True},
                            {"name": "sin_kernel", "device_us": 1.0, "count": 1, "candidate": False}]
    assert (s["total_device_us"], s["candidate_device_us"], s["kernel_count"], s["calls"]) == (6.0, 5.0, 2, 2)


def test_agree_names_what_differs():
    a = profile.summarize(fake_prof([Event("k", 1000), Event("lib", 1000)]), 1, {"k"})
    assert probe.agree(a, a) == ""
    b = profile.summarize(fake_prof([Event("k", 1000), Event("lib", 1100)]), 1, {"k"})
    assert "lib" in probe.agree(a, b)
    c = profile.summarize(fake_prof([Event("k", 1000), Event("k", 1000), Event("lib", 1000)]), 1, {"k"})
    assert "k" in probe.agree(a, c)  # a count differs
    d = profile.summarize(fake_prof([Event("k", 1000)]), 1, {"k"})
    assert "names" in probe.agree(a, d)


def test_a_profiler_without_kineto_results_raises():
    """The runner's block then has no profile (unjudged), never an empty one that would pass for no library time."""
    with pytest.raises(AttributeError):
        profile.summarize(SimpleNamespace(key_averages=lambda: []), 1, {"k"})


def test_device_time_on_another_stream_is_reported():
    """Kernels on a stream other than the timed one (Recording.stream, cuStreamGetId's id, which is the profiler's
    device_resource_id) are summed apart: kgym then times on the device-wide clock.  Host events and annotations
    do not count; an unknown timed stream gives no figure (None), never 0."""
    events = [Event("k", 2000), Event("k", 1000, stream=13), Event("lib", 500, stream=14),
              Event("cudaLaunchKernel", 9000, device=DeviceType.CPU, stream=13),
              Event("block", 50000, annotation=True, stream=13)]
    assert profile.summarize(fake_prof(events), 1, {"k"}, 7)["side_stream_device_us"] == 1.5
    assert profile.summarize(fake_prof(events[:1]), 1, {"k"}, 7)["side_stream_device_us"] == 0
    assert profile.summarize(fake_prof(events), 1, {"k"})["side_stream_device_us"] is None
    # the totals are the same whichever stream ran them
    assert profile.summarize(fake_prof(events), 1, {"k"}, 7)["total_device_us"] == 3.5
