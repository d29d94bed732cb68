"""kgym's measuring harness.

This package runs inside kgym's Python processes only: the zygote (zygote.py: it imports torch, triton and
this package once and forks evaluation children) and the children of one evaluation: the trusted judge
(judge/), which loads the task and reports raw facts over the protocol socket, and the untrusted runner
(runner/), the only process in which the candidate's code runs.  shared/ is what both use.  The runner and
shared/ import nothing of the judge (tests/test_boundary.py).  It never decides verdicts: the C supervisor
does.  See docs/protocol.md and docs/architecture.md.
"""
