"""The runner: the untrusted process in which the candidate's code runs (runner.py), its sandbox (sandbox.py)
and the runtime evidence it gathers about the candidate (guards.py).  It imports nothing of the judge, only
the shared modules (tests/test_boundary.py): what it reports is evidence, and the judge's reference,
tolerances and comparison are not in the code it runs.
"""
