#!/bin/sh
# Evaluation throughput on one GPU with the full protocol (correctness variants and calibrated timing).
#
#   sh bench/throughput.sh [JOBS] [--write-doc] [--list FILE] [--kernelbench DIR] [--device D] [--keep DIR]
#                          [-- extra kgym bench flags]
#
# One `kgym bench --jobs JOBS` (default 6: on an 80 GB GPU, more concurrent evaluations of the multi-GB
# level-1 tasks run out of memory and are re-run alone) over the fixed mix bench/throughput_mix.jsonl (132
# pairs: the KernelBench level 1/2 test pairs, the bundled examples, and the honest KernelBench pairs a second
# time; the file's header says why).  Printed: evaluations per GPU-hour (goal ≥ 2,000), verdict counts, wall per
# evaluation, the time split by stage (sum, mean, share) and, when kgym reports it, the summed exclusive GPU
# (timing-window) time.  --write-doc replaces the <!-- bench:throughput --> section of docs/PERFORMANCE.md
# ($KGYM_BENCH_DOC).  See bench/gpu_common.sh for the environment (KGYM_BIN, KGYM_PYTHON, KGYM_KERNELBENCH).
set -u
NAME=throughput
cd "$(dirname "$0")/.." || exit 1
. bench/gpu_common.sh


LIST=bench/throughput_mix.jsonl
JOBS=6
case ${1:-} in [0-9]*) JOBS=$1 && shift ;; esac
case $JOBS in *[!0-9]* | 0) printf '%s: JOBS must be a positive number, not %s\n' "$NAME" "$JOBS" >&2 && exit 2 ;; esac
CMDLINE="sh bench/throughput.sh $JOBS"
while [ $# -gt 0 ]; do
    case $1 in
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
    --list)
        # Another (e.g. smaller) list of pairs: a GPU session's 10-minute command limit fits about 70.
        need_value "$1" $#
        LIST=$2 CMDLINE="$CMDLINE --list $2"
        shift 2
        ;;
    -h | --help) usage && exit 0 ;;
    --) shift && break ;;
    *) printf '%s: unknown argument %s\n\n' "$NAME" "$1" >&2 && usage >&2 && exit 2 ;;
    esac
done
[ $# -gt 0 ] && CMDLINE="$CMDLINE -- $*"

preflight
# The trusted compile cache starts empty (as in grpo.sh and fleet.sh): it is machine-wide, so a second run of the same
# list found every candidate's kernels compiled by the first.  Until the forty-second session this script left it,
# and a machine's second run was 5,914-5,995/h against its first's 5,130-5,593/h (docs/PERFORMANCE.md): the build
# that ran second in bench/throughput_paired.sh was favoured.
empty_compile_cache
run_bench "$WORK/run.json" "$JOBS" "$LIST" "$@"
report throughput --jobs "$JOBS" --mix "$LIST" "$WORK/run.json"
finish
