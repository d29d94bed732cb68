"""Where the verl tests run (test_verl.py, test_verl_reward.py).

verl is heavy (torch and more) and is not installed by `make test`.  A verl test module runs in-process when
`import verl` works in the interpreter running pytest; otherwise, when KGYM_VERL_PYTHON names the python of a venv
that has verl and pytest, the module is re-run under it (with KGYM_VERL_INPROCESS=1); otherwise it is skipped,
with the reason.
"""
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def here(why_not):
    """Whether the calling module's tests run in this interpreter.  ``why_not``: why verl did not import (None
    when it did).  In the re-run under KGYM_VERL_PYTHON a failed import is an error, not a skip."""
    inprocess = os.environ.get("KGYM_VERL_INPROCESS") == "1"
    if why_not is not None and inprocess:
        raise ImportError(f"KGYM_VERL_INPROCESS=1 but verl does not import: {why_not}")
    return why_not is None or inprocess


def rerun_test(path, why_not):
    """The test that re-runs the module at ``path`` under KGYM_VERL_PYTHON; skips the whole module without it."""
    verl_py = os.environ.get("KGYM_VERL_PYTHON")
    if not verl_py:
        pytest.skip(f"verl cannot be imported ({why_not}); set KGYM_VERL_PYTHON to the python of a "
                    "venv with verl and pytest to run these tests", allow_module_level=True)

    def test_under_the_verl_venv():
        """Re-runs this file under KGYM_VERL_PYTHON, where verl imports."""
        env = dict(os.environ, KGYM_VERL_INPROCESS="1")
        p = subprocess.run([verl_py, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
        assert " passed" in p.stdout and "skipped" not in p.stdout.splitlines()[-1], p.stdout[-2000:]

    return test_under_the_verl_venv
