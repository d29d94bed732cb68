#!/bin/sh
# Timing stability: does kgym give the same speedup every time it measures the same kernel, and does its
# kernel time agree with an independent tool?
#
#   sh bench/timing_stability.sh [--runs N] [--write-doc] [--kernelbench DIR] [--device D] [--keep DIR]
#                                [-- extra kgym bench flags, e.g. --reference-mode compile]
#
# The 12 (problem, honest candidate) pairs of bench/timing_stability.jsonl are evaluated by N (5) separate
# `kgym bench` processes: separate processes, because what must not vary is what a fresh evaluation reports
# (new zygote, new CUDA context, new allocator state), not repeated calls inside one warm process.  Then
# bench/do_bench_agreement.py times every candidate with triton.testing.do_bench (rep 2000 ms, median) on the
# same full-size inputs.  Printed per problem: the N speedups, their CV (goal: median ≤ 2%), kgym's
# timing.candidate_ms.median and do_bench's time (goal: |kgym/do_bench − 1| ≤ 3% on every problem).
# --write-doc replaces the <!-- bench:timing-stability --> section of docs/PERFORMANCE.md ($KGYM_BENCH_DOC).
# Takes about N × 1-2 minutes plus ~1 minute of do_bench on an H100/H200.  See bench/gpu_common.sh for the
# environment (KGYM_BIN, KGYM_PYTHON, KGYM_KERNELBENCH).
set -u
NAME=timing_stability
cd "$(dirname "$0")/.." || exit 1
. bench/gpu_common.sh


LIST=bench/timing_stability.jsonl
RUNS=5
CMDLINE="sh bench/timing_stability.sh"
while [ $# -gt 0 ]; do
    case $1 in
    --runs)
        need_value "$1" $#
        RUNS=$2 CMDLINE="$CMDLINE --runs $2"
        shift 2
        ;;
    --write-doc) WRITE_DOC=1 && shift ;;
    --kernelbench)
        need_value "$1" $#
        KB=$2
        shift 2
        ;;
    --device)
        need_value "$1" $#
        DEVICE=$2 CMDLINE="$CMDLINE --device $2"
        shift 2
        ;;
    --keep)
        need_value "$1" $#
        KEEP=$2
        shift 2
        ;;
    -h | --help) usage && exit 0 ;;
    --) shift && break ;;
    *) printf '%s: unknown argument %s\n\n' "$NAME" "$1" >&2 && usage >&2 && exit 2 ;;
    esac
done
case $RUNS in '' | *[!0-9]*) printf '%s: --runs needs a number, not %s\n' "$NAME" "$RUNS" >&2 && exit 2 ;; esac
[ "$RUNS" -ge 2 ] || { printf '%s: --runs must be at least 2 (a CV needs two values)\n' "$NAME" >&2; exit 2; }
[ $# -gt 0 ] && CMDLINE="$CMDLINE -- $*"

preflight

i=1
while [ "$i" -le "$RUNS" ]; do
    printf '%s: run %s of %s\n' "$NAME" "$i" "$RUNS" >&2
    run_bench "$WORK/run$i.json" 1 "$LIST" "$@"
    i=$((i + 1))
done

# do_bench after the kgym runs, not between them: the runs should see the same GPU state as each other.
# A pair do_bench cannot measure is reported as missing, not fatal: the stability half still stands.
"$PY" bench/do_bench_agreement.py --pairs "$LIST" --kernelbench "$KB" --device "$DEVICE" >"$WORK/do_bench.jsonl" ||
    printf '%s: do_bench_agreement.py could not measure every pair (see above); continuing\n' "$NAME" >&2

set -- # the run files, in order (a glob would sort run10 before run2)
i=1
while [ "$i" -le "$RUNS" ]; do
    set -- "$@" "$WORK/run$i.json"
    i=$((i + 1))
done
report timing-stability --pairs "$LIST" --do-bench "$WORK/do_bench.jsonl" "$@"
finish
