"""The facts the judge reports for kgym's fail-closed verdict (src/eval/result.c kg_eval_unjudged): the repeat
checks say which ran and who raised when one did not, and the sandbox report takes the judge's own protection
only from the judge."""

import types

from kgym_harness.judge import child
from kgym_harness.runner import sandbox
from kgym_harness.shared.report import RemoteError

BASE = types.SimpleNamespace(name="base", sizes={"n": 8})


def _repeat(run):
    return child.Evaluation.repeat_checks(None, BASE, run)


def test_repeat_checks_that_ran():
    def both(checks):
        checks["cached_output"] = "ran"
        checks["nondeterministic"] = "ran"

    out = _repeat(both)
    assert out["checks"] == {"cached_output": "ran", "nondeterministic": "ran"}
    assert out["error"] is None and out["raised_by"] is None


def test_a_candidate_that_raises_on_its_second_call_leaves_both_checks_unrun():
    """What the judge kept as second_call_error, which nothing read: now each check says it did not run."""
    def raises(checks):
        raise RemoteError({"type": "RuntimeError", "message": "only one call"})

    out = _repeat(raises)
    assert out["checks"] == {"cached_output": "not_run", "nondeterministic": "not_run"}
    assert out["raised_by"] == "candidate" and out["error"]["message"] == "only one call"


def test_a_raise_after_the_first_decision_keeps_it():
    def third_call_raises(checks):
        checks["cached_output"] = "ran"
        raise ValueError("the judge's own comparison broke")

    out = _repeat(third_call_raises)
    assert out["checks"] == {"cached_output": "ran", "nondeterministic": "not_run"}
    assert out["raised_by"] == "judge" and out["error"]["type"] == "ValueError"


def test_the_sandbox_report_takes_the_judges_protection_from_the_judge_only():
    judge = sandbox.Granted()
    setup = {"pid": 1, "uid": 61000, "sandbox": {"active": ["x", 3], "warnings": [],
                                                 "protections": ["seccomp", "judge_not_dumpable", 7]}}
    report = child._sandbox_report(setup, judge, [])
    assert report["protections"] == ["seccomp"]  # the runner's claim about the judge is dropped, non-strings too
    assert report["active"] == ["x"] and report["type"] == "sandbox"
    sandbox.grant(judge, "judge_not_dumpable", "judge not dumpable")
    report = child._sandbox_report(setup, judge, ["w"])
    assert report["protections"] == ["seccomp", "judge_not_dumpable"]
    assert report["active"] == ["x", "judge not dumpable"] and report["warnings"] == ["w"]
    assert child._sandbox_report({"sandbox": "nonsense"}, judge, [])["protections"] == ["judge_not_dumpable"]
