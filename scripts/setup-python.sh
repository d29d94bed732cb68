#!/bin/sh
# Makes the Python that runs the measuring harness: either KGYM_PYTHON (an
# existing interpreter with torch and triton, e.g. a GPU machine's) or a venv
# at .venv with the pinned harness/requirements.txt.  Re-installs only when
# the requirements change.
set -e
cd "$(dirname "$0")/.."
if [ -n "$KGYM_PYTHON" ] && [ "$KGYM_PYTHON" != "$(pwd)/.venv/bin/python" ]; then
    "$KGYM_PYTHON" -c 'import torch, triton' || {
        echo "kgym: KGYM_PYTHON=$KGYM_PYTHON cannot import torch and triton" >&2; exit 1; }
    exit 0
fi
req=harness/requirements.txt
stamp=.venv/.kgym-requirements
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
    exit 0
fi
PY=${PYTHON:-python3}
if ! "$PY" -m venv --help >/dev/null 2>&1; then
    echo "kgym: installing python3-venv"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq python3-venv python3-pip >/dev/null
fi
echo "kgym: creating .venv (torch, triton; a few minutes the first time)"
"$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r "$req" 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -c 'import torch, triton, numpy' 
cp "$req" "$stamp"
