"""The judge: the trusted half of an evaluation (child.py).  It loads the task (tasks.py), checks the
candidate's source statically (policy.py), makes the inputs, runs the reference, compares (compare.py) and
records what the reference's outputs depend on (degeneracy.py).  Nothing here runs in the runner: the runner
and the shared modules import nothing of this package (tests/test_boundary.py).
"""
