"""KGYM_PROFILE_SHARED (child._profile_shared, an experiment off by default): the profile taken in a shared phase
after the exclusive window.  Only the switch is tested here: the timing stage runs on a GPU only."""

from kgym_harness.judge import child


def test_the_switch_is_off_by_default_and_read_only_on_a_gpu(monkeypatch):
    monkeypatch.delenv("KGYM_PROFILE_SHARED", raising=False)
    assert not child._profile_shared("cuda:0") and not child._profile_shared("cpu")
    monkeypatch.setenv("KGYM_PROFILE_SHARED", "1")
    assert child._profile_shared("cuda:0") and not child._profile_shared("cpu")
    monkeypatch.setenv("KGYM_PROFILE_SHARED", "yes")  # only "1" turns it on
    assert not child._profile_shared("cuda:0")
