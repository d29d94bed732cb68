# bench/gpu_common.sh — shared by the GPU benchmark drivers (timing_stability.sh, throughput.sh,
# concurrency.sh); sourced, not run.  The caller sets NAME (for messages) and has cd'd to the repository root.
#
# Environment: KGYM_BIN (build/kgym), KGYM_PYTHON (.venv/bin/python; on a GPU machine e.g. python3),
# KGYM_KERNELBENCH (else --kernelbench DIR, else ../shared/kernelbench), KGYM_BENCH_DOC (docs/PERFORMANCE.md:
# the file --write-doc edits; point it elsewhere to try --write-doc without touching the real doc).

KGYM=${KGYM_BIN:-build/kgym}
PY=${KGYM_PYTHON:-.venv/bin/python}
DOC=${KGYM_BENCH_DOC:-docs/PERFORMANCE.md}
KB=${KGYM_KERNELBENCH:-}
DEVICE=cuda
WRITE_DOC=
KEEP=
WORK=

die() {
    printf '%s: %s\n' "$NAME" "$*" >&2
    [ -n "$WORK" ] && [ -d "$WORK" ] && printf '%s: raw outputs kept in %s\n' "$NAME" "$WORK" >&2
    exit 1
}

# The script's leading comment block is its help text (one place to keep it current).
usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "bench/$NAME.sh"
}

# An option's value must be there: `shift 2` past the end would abort dash with a less helpful message.
need_value() {
    [ "$2" -ge 2 ] || { printf '%s: %s needs a value\n' "$NAME" "$1" >&2; exit 2; }
}

# Everything a long GPU run depends on is checked before it starts, so that minutes of evaluations never end
# in "no Python" or "no KernelBench", and a machine without a GPU gets one clear sentence instead of kgym
# quietly timing nothing.
preflight() {
    [ -x "$KGYM" ] || die "no kgym binary at $KGYM (build it with: make build/kgym, or set KGYM_BIN)"
    command -v "$PY" >/dev/null 2>&1 ||
        die "no Python at $PY (set KGYM_PYTHON to a Python with torch and triton, e.g. KGYM_PYTHON=python3)"
    if [ -z "$KB" ] && [ -d ../shared/kernelbench/level1 ]; then
        KB=../shared/kernelbench
    fi
    [ -n "$KB" ] || die "no KernelBench: set KGYM_KERNELBENCH or pass --kernelbench DIR (the folder holding level1/)"
    [ -d "$KB/level1" ] && [ -d "$KB/level2" ] ||
        die "$KB holds no level1/ and level2/ (point KGYM_KERNELBENCH at a checkout's KernelBench/ folder)"
    KB=$(cd "$KB" && pwd) # absolute: kgym's children and do_bench_agreement.py run from other folders
    KGYM_KERNELBENCH=$KB
    export KGYM_KERNELBENCH
    if ! GPU_NAME=$("$PY" bench/gpu_report.py gpu-check --device "$DEVICE"); then
        die "no GPU visible, nothing measured (reason above). These benchmarks time kernels on an NVIDIA GPU: run" \
            "them where nvidia-smi lists one, with KGYM_PYTHON naming a Python whose torch has CUDA."
    fi
    # Figures are only meaningful next to the code that produced them; others edit the tree concurrently,
    # so say when the working tree differs from the commit.
    COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    git diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT with uncommitted changes"
    if [ -n "$KEEP" ]; then
        mkdir -p "$KEEP" || die "cannot make $KEEP"
        WORK=$KEEP
    else
        WORK=$(mktemp -d "${TMPDIR:-/tmp}/kgym-$NAME.XXXXXX") || die "cannot make a temporary folder"
    fi
    trap 'printf "%s: interrupted; partial outputs in %s\n" "$NAME" "$WORK" >&2; exit 130' INT TERM
    printf '%s: %s, kgym %s, KernelBench %s, outputs in %s\n' "$NAME" "$GPU_NAME" "$COMMIT" "$KB" "$WORK" >&2
}

# run_bench OUT JOBS LIST [kgym bench flags...]: one `kgym bench` process, its JSON saved to OUT.
# empty_compile_cache: the trusted compile cache (harness judge/kernelcache.py) emptied, as on a fresh machine: what
# one run compiled is not found by the next (its kernels directory is machine-wide).
empty_compile_cache() {
    "$PY" -c 'import shutil, sys; sys.path.insert(0, "harness")
from kgym_harness.judge import kernelcache
r, _ = kernelcache.root()
r and shutil.rmtree(r, ignore_errors=True)' || die "could not empty the compile cache"
}

run_bench() {
    _out=$1 _jobs=$2 _list=$3
    shift 3
    printf '%s: kgym bench --jsonl %s --jobs %s %s\n' "$NAME" "$_list" "$_jobs" "$*" >&2
    "$KGYM" bench --jsonl "$_list" --json --device "$DEVICE" --kernelbench "$KB" --jobs "$_jobs" "$@" >"$_out"
    _rc=$?
    [ "$_rc" -eq 0 ] || die "kgym bench exited with status $_rc (its messages are above)"
}

# report SUBCOMMAND [args...]: the analysis, with the provenance the doc section needs.
report() {
    _sub=$1
    shift
    "$PY" bench/gpu_report.py "$_sub" --command "$CMDLINE" --gpu-name "$GPU_NAME" --commit "$COMMIT" \
        ${WRITE_DOC:+--write-doc "$DOC"} "$@" ||
        die "the analysis failed; rerun it on the kept outputs with: $PY bench/gpu_report.py $_sub ... (see --help)"
}

# Raw outputs are scratch unless --keep asked for them; on any failure die() leaves them in place.
finish() {
    [ -n "$KEEP" ] || rm -rf "$WORK"
}
