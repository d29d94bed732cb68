"""The correctness stage asks kgym after each variant whether the stage has already failed (variant_go,
child.Evaluation.correctness) and runs no more variants once kgym says so; --all-variants (the job's all_variants)
never asks; an answer that is not a "stop" (an older kgym's error line) goes on, as before the request existed.
The C side (kg_eval_correctness_failed) is tested in tests/unit/test_result.c, the whole path in
tests/integration/test_first_failure.sh."""

import pytest

from kgym_harness.judge import child, tasks
from kgym_harness.shared import kinds

NAMES = ["base", "small_odd", "scaled_x2", "signed", "size_large"]


class Chan:
    """kgym's end: records what the judge sends, answers variant_go with ``answers`` in turn (then "go")."""

    def __init__(self, answers=()):
        self.sent, self.answers = [], list(answers)

    def send(self, obj):
        self.sent.append(obj)

    def request(self, obj):
        self.sent.append(obj)
        return self.answers.pop(0) if self.answers else {"type": kinds.MSG_VARIANT_GO, "go": True, "why": ""}

    def of(self, kind):
        return [m for m in self.sent if m.get("type") == kind]


@pytest.fixture
def judge(monkeypatch):
    monkeypatch.setattr(tasks, "make_variants", lambda *a, **k: [
        tasks.Variant(n, {"n": 8}, 42, "none", None, n) for n in NAMES])
    monkeypatch.setattr(tasks, "input_structure", lambda task: [])
    monkeypatch.setattr(tasks, "stage_footprints", lambda task, sizes: {"correctness": 0, "timing": 0})
    monkeypatch.setattr(tasks, "size_constants", lambda task: {})

    def make(answers=(), every=False, fail_at=None):
        chan = Chan(answers)
        ev = child.Evaluation(chan, {"device": "cpu", "all_variants": every})
        ev.task = object()
        ev.has_constant_parameters = lambda: False
        ran = []

        def variant(v):
            ran.append(v.name)
            out = {"name": v.name, "status": "ran", "compare": {"mismatches": int(v.name == fail_at)}}
            if v.name == "base":
                out["repeat_checks"] = {"checks": ["cached_output"]}
            return out
        ev.shared_variant = variant
        return ev, chan, ran
    return make


def test_stops_where_kgym_says_the_stage_failed(judge):
    stop = {"type": kinds.MSG_VARIANT_GO, "go": False, "why": "variant small_odd: 3 of 8 elements differ"}
    ev, chan, ran = judge(answers=[{"type": kinds.MSG_VARIANT_GO, "go": True, "why": ""}, stop])
    detail, data = ev.correctness()
    assert ran == ["base", "small_odd"]
    assert len(chan.of(kinds.MSG_VARIANT_GO)) == 2  # asked after base and after small_odd
    assert [m["name"] for m in chan.of(kinds.MSG_VARIANT)] == ["base", "small_odd"]
    assert "stopped after a failed one (variant small_odd: 3 of 8" in detail and "3 not run" in detail
    assert data["variants"] == NAMES  # the plan, as kgym was told it
    # What base's repeat checks found, and the degeneracy, are still reported.
    assert chan.of(kinds.MSG_REPEAT_CHECKS) and chan.of(kinds.MSG_DEGENERACY)


def test_all_variants_never_asks(judge):
    ev, chan, ran = judge(answers=[{"type": kinds.MSG_VARIANT_GO, "go": False, "why": "x"}], every=True)
    detail, _ = ev.correctness()
    assert ran == NAMES and not chan.of(kinds.MSG_VARIANT_GO)
    assert detail == f"{len(NAMES)} variants ran"


def test_no_question_after_the_last_and_an_error_answer_goes_on(judge):
    error = {"type": kinds.MSG_ERROR, "message": "kgym has no answer to this request"}
    ev, chan, ran = judge(answers=[error] * 10)
    ev.correctness()
    assert ran == NAMES
    assert len(chan.of(kinds.MSG_VARIANT_GO)) == len(NAMES) - 1


# Garbled variant_go answers (the order red team, formerly tests/fixtures/redteam_order/probe_variant_go_answers.py):
# every answer that is not exactly {"type": "variant_go", "go": false} must go on (all variants run: the pass still
# needs them), and an answer that is not an object must fail the stage (never a pass with variants missing).
GARBLED = [{"type": kinds.MSG_VARIANT_GO, "go": "false"}, {"type": kinds.MSG_VARIANT_GO, "go": 0},
           {"type": kinds.MSG_VARIANT_GO}, {"type": kinds.MSG_ERROR, "go": False}, {"go": False},
           {"type": kinds.MSG_VARIANT_GO, "go": None}]


@pytest.mark.parametrize("answer", GARBLED)
def test_garbled_answers_go_on(judge, answer):
    ev, chan, ran = judge(answers=[answer] * 10)
    ev.correctness()
    assert ran == NAMES


@pytest.mark.parametrize("answer", [[], "stop", None, 0])
def test_non_object_answers_raise(judge, answer):
    ev, chan, ran = judge(answers=[answer] * 10)
    with pytest.raises(Exception):
        ev.correctness()
    assert not chan.of(kinds.MSG_DEGENERACY)  # the stage never ended as ok
