"""Each stage reserves its own device memory (child.Evaluation.reserve_for, tasks.stage_footprints): the acquire
that first asks for a figure other than the one reserved says "renew", so kgym gives the old reservation back and the
new one waits in line (src/supervisor/supervisor.c, arbiter.h kg_arbiter_account_renew)."""

from kgym_harness.judge import child
from kgym_harness.shared import kinds


class _Eval:
    """What reserve_for and _acquire read of their evaluation, and the lines they send."""

    def __init__(self, stage_reserve):
        self.stage_reserve, self.reserve_bytes, self.reserve_renew = stage_reserve, 0, False
        self.current_stage, self.sent = None, []
        self.chan = self

    def send(self, msg):
        self.sent.append(msg)

    def recv(self):
        return {"type": kinds.MSG_GPU_GRANT}

    def _device_total(self):
        return 100

    def phase(self, stage, mode="shared"):
        self.current_stage = stage
        child.Evaluation._acquire(self, mode)
        return self.sent[-1]


def test_a_stage_with_its_own_figure_renews_once():
    e = _Eval({"correctness": 8, "timing": 24})
    child.Evaluation.reserve_for(e, "correctness")
    first = e.phase("correctness")
    assert first["reserve_bytes"] == 8 and first["renew"] is True  # from none: the first reservation
    assert "renew" not in e.phase("correctness")  # every later phase of the stage keeps it
    child.Evaluation.reserve_for(e, "timing")
    t = e.phase("timing")
    assert t["reserve_bytes"] == 24 and t["renew"] is True
    again = e.phase("timing", "exclusive")
    assert again["reserve_bytes"] == 24 and "renew" not in again
    assert e.phase("exit")["reserve_bytes"] == 24  # the wind-down keeps the last stage's


def test_the_same_figure_keeps_its_place():
    # ReLU's two stages need the same: no renewal, so the timing stage never queues for memory it holds.
    e = _Eval({"correctness": 30, "timing": 30})
    child.Evaluation.reserve_for(e, "correctness")
    e.phase("correctness")
    child.Evaluation.reserve_for(e, "timing")
    assert "renew" not in e.phase("timing")


def test_the_stage_figures_are_a_switch_off_by_default(monkeypatch):
    # Measured on an H200 (child._stage_reserve): fewer waits for memory, no throughput; the larger figure from
    # correctness on stays the default.
    monkeypatch.delenv("KGYM_STAGE_RESERVE", raising=False)
    assert child._stage_reserve() is False
    monkeypatch.setenv("KGYM_STAGE_RESERVE", "0")
    assert child._stage_reserve() is False
    monkeypatch.setenv("KGYM_STAGE_RESERVE", "1")
    assert child._stage_reserve() is True
