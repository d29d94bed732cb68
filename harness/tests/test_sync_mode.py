"""How judge and runner wait for the GPU (kgym_harness.shared.cudashare blocking_sync and spinning): blocking waits
set on the primary context before it exists, spin-waits inside an exclusive window and the earlier flags back after
it, nothing changed where the driver lacks the calls.  The driver is a fake here (no GPU on the test machine): it
records the flags it is given; the GPU run of bench/sync_probe.py shows what a real context does with them."""

import ctypes

import pytest

from kgym_harness.runner import runner
from kgym_harness.shared import cudashare, kinds


class Fn:
    """A fake driver function: callable, and takes argtypes/restype as a ctypes function does."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)


class FakeDriver:
    """The few libcuda calls these functions make, recording what they were given."""

    def __init__(self, flags=0x0C, with_ctx_flags=True):
        self.flags, self.sets, self.primary = flags, [], []
        self.ordinals = []
        if with_ctx_flags:
            self.cuCtxGetFlags = Fn(self._get)
            self.cuCtxSetFlags = Fn(self._set)

    def _get(self, ref):
        ref._obj.value = self.flags
        return 0

    def _set(self, flags):
        self.sets.append(flags)
        self.flags = flags
        return 0

    def cuInit(self, _flags):
        return 0

    def cuDeviceGet(self, ref, ordinal):
        self.ordinals.append(ordinal)
        ref._obj.value = 7
        return 0

    def cuDevicePrimaryCtxSetFlags(self, dev, flags):
        self.primary.append((dev, flags))
        return 0


@pytest.fixture
def driver(monkeypatch):
    state = {}
    monkeypatch.setattr(cudashare, "_state", state)

    def use(fake):
        state.clear()
        state["lib"] = fake
        monkeypatch.setattr(cudashare, "_driver", lambda: fake)
        return fake
    return use


def test_blocking_sync_sets_the_primary_context_flags(driver):
    fake = driver(FakeDriver())
    assert cudashare.blocking_sync("cuda:0") is None
    assert fake.ordinals == [0] and fake.primary == [(7, 0x04)]


def test_blocking_sync_says_why_not(driver):
    fake = driver(FakeDriver())
    fake.cuDevicePrimaryCtxSetFlags = lambda dev, flags: 708  # CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE
    assert "708" in cudashare.blocking_sync("cuda:0")


def test_spinning_inside_and_the_flags_back_after(driver):
    fake = driver(FakeDriver(flags=0x0C))  # map-host + blocking, as a context made after blocking_sync
    with cudashare.spinning():
        assert fake.flags == 0x09  # the scheduling bits say spin; the others are kept
    assert fake.sets == [0x09, 0x0C] and fake.flags == 0x0C


def test_spinning_restores_after_an_exception(driver):
    fake = driver(FakeDriver(flags=0x04))
    with pytest.raises(RuntimeError):
        with cudashare.spinning():
            raise RuntimeError("the candidate raised")
    assert fake.flags == 0x04


def test_spinning_without_the_calls_or_a_driver_changes_nothing(driver):
    fake = driver(FakeDriver(with_ctx_flags=False))  # a driver before CUDA 12.1
    with cudashare.spinning():
        pass
    assert fake.sets == []
    cudashare._state.clear()  # no driver loaded at all (the CPU)
    with cudashare.spinning():
        pass


def test_spinning_leaves_a_context_it_could_not_read(driver):
    fake = driver(FakeDriver())
    fake.cuCtxGetFlags = Fn(lambda ref: 201)  # CUDA_ERROR_INVALID_CONTEXT: no context current
    with cudashare.spinning():
        pass
    assert fake.sets == []


def test_the_runner_spins_for_the_exclusive_windows_commands_only():
    timing = {kinds.CMD_TIMING_INPUTS, kinds.CMD_TIMED, kinds.CMD_SAMPLE, kinds.CMD_CLOCK_PREPARE,
              kinds.CMD_CLOCK_BLOCK, kinds.CMD_CLOCK_DESCRIBE}
    assert timing <= runner._EXCLUSIVE_COMMANDS
    shared = {kinds.CMD_SETUP, kinds.CMD_LOAD, kinds.CMD_CONSTRUCT, kinds.CMD_CALL, kinds.CMD_CHECK}
    assert not shared & runner._EXCLUSIVE_COMMANDS


def test_byref_fake_writes_through():
    # The fake driver writes through ctypes.byref the way libcuda does (the tests above rely on it).
    v = ctypes.c_uint()
    FakeDriver(flags=3)._get(ctypes.byref(v))
    assert v.value == 3
