#!/bin/sh
# GPU only (KGYM_DEVICE=cuda, e.g. make gpu-test): the timing protocol's and the
# profiler's raw facts (tests/gpu/check_timing_profile.py).  On CPU it checks nothing.
. "$(dirname "$0")/lib.sh"
if [ "$DEVICE" = cpu ]; then
    echo "CPU: the GPU timing checks run under make gpu-test"
    finish
    exit
fi
PYTHONPATH=harness "$PY" tests/gpu/check_timing_profile.py
