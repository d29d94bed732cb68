#!/bin/sh
# Timing under concurrency: does a kernel get the same speedup when other evaluations share the GPU?
#
#   sh bench/concurrency.sh [--jobs N] [--passes P] [--write-doc] [--kernelbench DIR] [--device D]
#                           [--keep DIR] [-- extra kgym bench flags]
#
# The pairs of bench/timing_stability.jsonl, once with `kgym bench --jobs 1` and once with --jobs N (8) on the
# same GPU.  kgym runs timing in exclusive windows, so the other evaluations' correctness work must not leak
# into a measurement.  The shared run goes over the list P (2) times: otherwise the last evaluations of a
# 12-pair list would run with fewer and fewer neighbours; pass 1 is what is compared, later passes are shown.
# Printed per problem: both speedups and their ratio (goal: median |ratio − 1| ≤ 3%), and the candidate's
# kernel time in both.  --write-doc replaces the <!-- bench:concurrency --> section of docs/PERFORMANCE.md
# ($KGYM_BENCH_DOC).  See bench/gpu_common.sh for the environment (KGYM_BIN, KGYM_PYTHON, KGYM_KERNELBENCH).
# Memory: N full-size evaluations at once; the list keeps multi-GB problems to three so 8 fit in 80 GB.
set -u
NAME=concurrency
cd "$(dirname "$0")/.." || exit 1
. bench/gpu_common.sh


LIST=bench/timing_stability.jsonl
JOBS=8
PASSES=2
CMDLINE="sh bench/concurrency.sh"
while [ $# -gt 0 ]; do
    case $1 in
    --jobs)
        need_value "$1" $#
        JOBS=$2 CMDLINE="$CMDLINE --jobs $2"
        shift 2
        ;;
    --passes)
        need_value "$1" $#
        PASSES=$2 CMDLINE="$CMDLINE --passes $2"
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
for v in "$JOBS" "$PASSES"; do
    case $v in '' | *[!0-9]* | 0) printf '%s: --jobs and --passes need positive numbers, not %s\n' "$NAME" "$v" >&2 && exit 2 ;; esac
done
[ $# -gt 0 ] && CMDLINE="$CMDLINE -- $*"

preflight

# The shared run's list: the same pairs P times over.  Candidate paths stay relative to the repository root,
# which kgym resolves against its working directory before the list's own folder.
i=0
while [ "$i" -lt "$PASSES" ]; do
    grep -v '^[[:space:]]*#' "$LIST"
    i=$((i + 1))
done >"$WORK/shared.jsonl"

run_bench "$WORK/alone.json" 1 "$LIST" "$@"
run_bench "$WORK/shared.json" "$JOBS" "$WORK/shared.jsonl" "$@"
report concurrency --pairs "$LIST" --jobs-a 1 --jobs-b "$JOBS" "$WORK/alone.json" "$WORK/shared.json"
finish
