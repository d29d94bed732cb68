"""The lists of kinds (src/eval/kinds.def, include/kgym/rl.h KG_VERDICT_MAP) and their Python side: the generated
kgym_harness/shared/kinds.py and python/kgym/kinds.py are what the C lists give, and the judge and the runner send
and dispatch only what the lists name, through the generated constants."""

import ast
import json
import os
import subprocess
import sys

import pytest

from kgym_harness.shared import kinds

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEN = os.path.join(ROOT, "scripts", "gen_kinds.py")
CHILD = os.path.join(ROOT, "harness", "kgym_harness", "judge", "child.py")
RUNNER = os.path.join(ROOT, "harness", "kgym_harness", "runner", "runner.py")


def test_generated_files_are_what_the_c_lists_give():
    run = subprocess.run([sys.executable, GEN, "--check"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_check_fails_when_c_and_python_disagree(tmp_path):
    """--check compares the lists with the files: a list changed in C alone is reported."""
    import shutil

    for rel in ("scripts/gen_kinds.py", "src/eval/kinds.def", "include/kgym/rl.h",
                "harness/kgym_harness/shared/kinds.py", "python/kgym/kinds.py"):
        os.makedirs(tmp_path / os.path.dirname(rel), exist_ok=True)
        shutil.copy(os.path.join(ROOT, rel), tmp_path / rel)
    d = tmp_path / "src/eval/kinds.def"
    d.write_text(d.read_text().replace('X(TIMING_GO, "timing_go", judge)', 'X(TIMING_GO, "timing_start", judge)'))
    run = subprocess.run([sys.executable, str(tmp_path / "scripts/gen_kinds.py"), "--check"], capture_output=True,
                         text=True)
    assert run.returncode == 1 and "harness/kgym_harness/shared/kinds.py" in run.stderr
    r = tmp_path / "include/kgym/rl.h"
    r.write_text(r.read_text().replace('X(TIMEOUT, 6, "timeout")', 'X(TIMEOUT, 7, "timeout")'))
    run = subprocess.run([sys.executable, str(tmp_path / "scripts/gen_kinds.py")], capture_output=True, text=True)
    assert run.returncode != 0 and "verdict codes" in run.stderr


def test_lists():
    assert kinds.VERDICTS == ("correct", "incorrect", "hacked", "invalid", "compile_error", "runtime_error",
                              "timeout")
    assert kinds.STAGES[0] == "extract" and kinds.JUDGE_STAGES == kinds.STAGES[1:]
    for names in (kinds.VERDICTS, kinds.STAGES, kinds.JOB_STATUSES, kinds.MESSAGES, kinds.RUNNER_COMMANDS,
                  kinds.RUNNER_REPLIES, kinds.FINDINGS):
        assert len(set(names)) == len(names)


def test_policy_names_only_known_findings():
    with open(os.path.join(ROOT, "policy", "default.json")) as f:
        policy = json.load(f)
    assert set(policy["findings"]) <= set(kinds.FINDINGS)


def _literals(path, key):
    """String literals used as `key` in dict displays, dict(..., key=...) and x.get(key) == ... of a file."""
    tree = ast.parse(open(path).read())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == key:
                    found.append(v)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict":
            found += [kw.value for kw in node.keywords if kw.arg == key]
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Call):
            f = node.left
            if (getattr(f.func, "attr", None) == "get" and f.args and isinstance(f.args[0], ast.Constant)
                    and f.args[0].value == key):
                found += node.comparators
    return found


@pytest.mark.parametrize("path", [CHILD, RUNNER])
def test_protocol_kinds_come_from_the_lists(path):
    """Every message type and runner command the judge or the runner writes or compares is a kinds constant, not a
    literal (an exception's own "type", e.g. "RuntimeError", is no message kind)."""
    for key in ("type", "cmd"):
        for v in _literals(path, key):
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                assert not v.value.islower(), f"{os.path.basename(path)}:{v.lineno}: {key} {v.value!r} spelled out"
            elif isinstance(v, ast.Attribute) and getattr(v.value, "id", None) == "kinds":
                assert hasattr(kinds, v.attr), f"{os.path.basename(path)}:{v.lineno}: no kinds.{v.attr}"


def test_runner_dispatches_every_command():
    """The runner's command loop handles exactly the listed commands (resume and compiled are answers the runner
    reads inside a compile)."""
    tree = ast.parse(open(RUNNER).read())
    handled = {c.attr for n in ast.walk(tree) if isinstance(n, ast.Compare) and getattr(n.left, "id", None) == "cmd"
               for c in n.comparators if isinstance(c, ast.Attribute) and getattr(c.value, "id", None) == "kinds"}
    assert {getattr(kinds, a) for a in handled} | {kinds.CMD_RESUME, kinds.CMD_COMPILED} == set(kinds.RUNNER_COMMANDS)
