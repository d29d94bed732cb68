"""kgym's measuring harness.

This package runs inside kgym's Python processes only: the zygote (which
imports torch and triton once and forks evaluation children) and the
evaluation children (which load a task and a candidate and report raw facts
over the protocol socket).  It never decides verdicts: the C supervisor does.
See docs/protocol.md.
"""
