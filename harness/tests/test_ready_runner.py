"""A ready runner (src/supervisor/pair.c): kgym sends a runner "setup" itself, ahead of its judge, and hands the
kept judge that adopts it the set-up and the runner's answer with the job (judge/child.py _adopt_runner).  The
judge takes it only where the set-up is exactly the one it would have sent for this job and the answer is a
well-formed "ok" to command 1; the runner lays its folder out itself when told to (``prepare``)."""

import json
import os
import socket
import stat

import pytest

from kgym_harness.judge import child
from kgym_harness.shared import kinds
from kgym_harness.shared import transport as tp


def _job(tmp_path, **over):
    job = {"workdir": str(tmp_path), "device": "cpu", "threads": 1, "sandbox": {"enabled": False},
           "policy": False, "task": "/t.py", "candidate": "c.py", "nonce": "n"}
    job.update(over)
    return job


def _ready(job, reply=None, **setup_over):
    setup = dict(child._runner_setup(job), **setup_over)
    return dict(job, runner_ready={"setup": setup, "reply": reply or {"type": kinds.REPLY_OK, "seq": 1,
                                                                      "pid": 7, "sandbox": {}}})


def _adopt(job):
    a, b = socket.socketpair()
    try:
        return child._adopt_runner(a, job, "cpu", [])
    finally:
        b.close()


def test_the_set_up_the_judge_would_have_sent_is_adopted(tmp_path):
    link, reply = _adopt(_ready(_job(tmp_path)))
    assert reply["pid"] == 7 and reply["seq"] == 1
    assert link.seq == 1  # the judge's next command is the runner's second
    link.close()


@pytest.mark.parametrize("other", [{"threads": 2}, {"workdir": "/elsewhere"}, {"policy": {"runtime": {}}},
                                   {"sandbox": {"enabled": True}}, {"runner_uid": 61001}])
def test_a_set_up_for_another_runner_part_is_refused(tmp_path, other):
    with pytest.raises(RuntimeError, match="ready runner"):
        _adopt(_ready(_job(tmp_path), **other))


def test_a_set_up_missing_a_key_is_refused(tmp_path):
    job = _ready(_job(tmp_path))
    del job["runner_ready"]["setup"]["threads"]
    with pytest.raises(RuntimeError, match="ready runner"):
        _adopt(job)


@pytest.mark.parametrize("reply", [{"type": kinds.REPLY_OK, "seq": 2}, {"type": kinds.REPLY_OK},
                                   "ok", None, [1]])
def test_an_answer_to_another_command_is_refused(tmp_path, reply):
    job = _ready(_job(tmp_path))
    job["runner_ready"]["reply"] = reply
    with pytest.raises(child.RunnerLost):
        _adopt(job)


def test_a_failed_set_up_is_said_as_a_cold_start_would(tmp_path):
    with pytest.raises(child.RunnerLost, match="failed to set up"):
        _adopt(_ready(_job(tmp_path), reply={"type": kinds.REPLY_ERROR, "seq": 1, "error": {"message": "no"}}))


def test_findings_in_the_answer_are_the_runners_evidence(tmp_path):
    findings = []
    a, b = socket.socketpair()
    reply = {"type": kinds.REPLY_OK, "seq": 1, "findings": [{"type": "guard_error", "message": "m"}]}
    child._adopt_runner(a, _ready(_job(tmp_path), reply=reply), "cpu", findings)
    b.close()
    assert findings == [{"type": "guard_error", "message": "m", "source": "runner"}]


def test_prepare_lays_the_folder_out_as_the_judge_does(tmp_path):
    """transport.prepare_workdir is the one layout: the judge's _prepare_workdir and a ready runner's set-up."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "old.py").write_text("left over")
    (tmp_path / "run").write_text("a file where a folder goes")
    tp.prepare_workdir(str(tmp_path), None)
    assert stat.S_IMODE(os.stat(tmp_path).st_mode) == 0o711
    for d in ("src", "run"):
        st = os.lstat(tmp_path / d)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and not os.listdir(tmp_path / d)
    if os.geteuid() == 0:
        tp.prepare_workdir(str(tmp_path), 61234)
        src, run = os.stat(tmp_path / "src"), os.stat(tmp_path / "run")
        assert (src.st_uid, src.st_gid, stat.S_IMODE(src.st_mode)) == (0, 61234, 0o750)
        assert (run.st_uid, run.st_gid) == (61234, 61234)


def test_the_runner_prepares_its_folder_only_when_told(tmp_path):
    """runner.py setup: ``prepare`` (kgym's ready runner) lays the folder out before anything else; without it the
    folder is the judge's to lay out, and the runner leaves it as it is."""
    import subprocess
    import sys

    code = r"""
import json, os, socket, sys
from kgym_harness.runner import runner
a, b = socket.socketpair()
r = runner.Runner.__new__(runner.Runner)
job = json.loads(sys.argv[1])
prepare = sys.argv[2] == "1"
try:
    runner.Runner.setup(r, {"cmd": "setup", "seq": 1, "job": job, **({"prepare": True} if prepare else {})})
except BaseException as exc:
    pass
print(json.dumps(sorted(os.listdir(job["workdir"]))))
"""
    for prepare, want in (("0", []), ("1", ["run", "src"])):
        wd = tmp_path / f"w{prepare}"
        wd.mkdir()
        job = {"workdir": str(wd), "device": "cpu", "threads": 1, "sandbox": {"enabled": False}}
        out = subprocess.run([sys.executable, "-c", code, json.dumps(job), prepare], capture_output=True, text=True,
                             cwd=os.path.dirname(os.path.dirname(os.path.dirname(child.__file__))), timeout=120)
        assert json.loads(out.stdout.strip().splitlines()[-1]) == want, out.stderr[-2000:]
