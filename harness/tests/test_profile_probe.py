"""bench/profile_probe.py's direct summary of a profile (the Kineto events summed by name), on fake events: the
probe decides on a GPU whether profile.summarize may sum the events itself, so its own arithmetic is checked here."""

import importlib.util
import os
from types import SimpleNamespace

from torch.autograd import DeviceType

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "profile_probe.py")
_spec = importlib.util.spec_from_file_location("profile_probe", _PATH)
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)


class Event:
    def __init__(self, name, ns, device=DeviceType.CUDA, annotation=False):
        self._n, self._ns, self._d, self._a = name, ns, device, annotation

    def name(self):
        return self._n

    def duration_ns(self):
        return self._ns

    def device_type(self):
        return self._d

    def is_user_annotation(self):
        return self._a


def fake_prof(events):
    return SimpleNamespace(profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: events)))


def test_device_kernels_are_summed_by_name_and_the_rest_left_out():
    events = [Event("scale_kernel", 2000), Event("scale_kernel", 3000), Event("sin_kernel", 1000),
              Event("cudaLaunchKernel", 9000, device=DeviceType.CPU),  # the runtime call: host side
              Event("block", 50000, annotation=True),  # a range around kernels: not a kernel's time
              Event("empty", 0)]
    s = probe.direct_summary(fake_prof(events), 2, {"scale_kernel"})
    assert s["kernels"] == [{"name": "scale_kernel", "device_us": 5.0, "count": 2, "candidate": True},
                            {"name": "sin_kernel", "device_us": 1.0, "count": 1, "candidate": False}]
    assert (s["total_device_us"], s["candidate_device_us"], s["kernel_count"], s["calls"]) == (6.0, 5.0, 2, 2)


def test_agree_names_what_differs():
    a = probe.direct_summary(fake_prof([Event("k", 1000), Event("lib", 1000)]), 1, {"k"})
    assert probe.agree(a, a) == ""
    b = probe.direct_summary(fake_prof([Event("k", 1000), Event("lib", 1100)]), 1, {"k"})
    assert "lib" in probe.agree(a, b)
    c = probe.direct_summary(fake_prof([Event("k", 1000), Event("k", 1000), Event("lib", 1000)]), 1, {"k"})
    assert "k" in probe.agree(a, c)  # a count differs
    d = probe.direct_summary(fake_prof([Event("k", 1000)]), 1, {"k"})
    assert "names" in probe.agree(a, d)
