#!/bin/sh
# Throughput on a GRPO-shaped mix: N tasks x 8 samples, as an RL step submits them (bench/grpo_mix.py: the samples
# of a task differ in bytes, two of each eight are exact twins of others), with the full protocol on one GPU.
#
#   sh bench/grpo.sh [JOBS] [--tasks N] [--baseline BASELINE_KGYM] [--order base,head|head,base] [--repeat N]
#                    [--head-env NAME=VALUE]... [--head-flag FLAG]... [--head-jobs N] [--dedup] [--kernelbench DIR]
#                    [--keep DIR]
#                    [--write-doc]
#                    [-- extra kgym bench flags]
#
# One `kgym bench --jobs JOBS` (default 6) over the mix (default 8 tasks: 64 evaluations).  With --baseline, the
# same mix also with another build's kgym (bench/throughput_paired.sh says how to build one on a GPU machine), in
# --order (default base,head), in this one command.  Printed per build: evaluations per GPU-hour, verdicts, the
# reference's timings and output computations per task (what a judge shared by a task's samples saves), the summed
# exclusive GPU time, the bound it puts on throughput (evaluations / exclusive hours) and the share of it reached;
# with a baseline, head / base.  --dedup runs the head build with `kgym bench --dedup` (exact twins answered once
# from their earlier pair, as `kgym serve` does); the baseline runs without it, so the pair measures the change, and
# each build's answers (every pair) are then printed beside its evaluations.  --repeat N (default 1) runs the pair
# N times, the order reversed every other time (base,head then head,base, ...), and prints head / base for each
# repetition and their median: one pair's ratio moves by about ±5% from run to run on an H200 (eighth session: the
# same build gave 2,408 and 2,669 evaluations per hour), so a change worth less than that needs several.  Without
# --baseline, --repeat N runs the head N times.  --head-env NAME=VALUE (repeatable; no spaces in VALUE) sets that
# variable for the head's runs only: with --baseline naming the same kgym (e.g. build/kgym) the pair measures a
# switch of that one build read from its environment (--head-env NAME=1).  --head-jobs N runs the head with N jobs
# (the baseline with JOBS): with --baseline naming the same kgym, the pair measures the number of jobs.  --head-flag
# FLAG (repeatable; one word, no spaces: --timing-round-ms=75) adds that kgym bench flag to the head's runs only:
# with --baseline naming the same kgym, the pair measures that setting, and the report's timing table says whether
# the head's speedups stayed within 2% of the base's (e.g. fewer timed calls: --timing-iters=25).  --write-doc replaces the
# <!-- bench:grpo --> section of docs/PERFORMANCE.md ($KGYM_BENCH_DOC).  Environment: bench/gpu_common.sh (KGYM_BIN,
# KGYM_PYTHON, KGYM_KERNELBENCH).
set -u
NAME=grpo
cd "$(dirname "$0")/.." || exit 1
. bench/gpu_common.sh

JOBS=6
TASKS=8
BASE=
ORDER="base head"
DEDUP=
REPEAT=1
HEAD_ENV=
HEAD_FLAGS=
HEAD_JOBS=
case ${1:-} in [0-9]*) JOBS=$1 && shift ;; esac
case $JOBS in *[!0-9]* | 0) printf '%s: JOBS must be a positive number, not %s\n' "$NAME" "$JOBS" >&2 && exit 2 ;; esac
CMDLINE="sh bench/grpo.sh $JOBS"
while [ $# -gt 0 ]; do
    case $1 in
    --tasks)
        need_value "$1" $#
        case $2 in *[!0-9]* | "" | 0) printf '%s: --tasks must be a positive number, not %s\n' "$NAME" "$2" >&2 && exit 2 ;; esac
        TASKS=$2 CMDLINE="$CMDLINE --tasks $2"
        shift 2
        ;;
    --baseline)
        need_value "$1" $#
        BASE=$2 CMDLINE="$CMDLINE --baseline $2"
        shift 2
        ;;
    --order)
        need_value "$1" $#
        case $2 in base,head | head,base) ORDER=$(echo "$2" | tr , ' ') ;;
        *) printf '%s: --order is base,head or head,base, not %s\n' "$NAME" "$2" >&2 && exit 2 ;; esac
        CMDLINE="$CMDLINE --order $2"
        shift 2
        ;;
    --repeat)
        need_value "$1" $#
        case $2 in *[!0-9]* | "" | 0) printf '%s: --repeat must be a positive number, not %s\n' "$NAME" "$2" >&2 && exit 2 ;; esac
        REPEAT=$2 CMDLINE="$CMDLINE --repeat $2"
        shift 2
        ;;
    --head-env)
        need_value "$1" $#
        case $2 in [A-Za-z_]*=*) ;; *) printf '%s: --head-env takes NAME=VALUE, not %s\n' "$NAME" "$2" >&2 && exit 2 ;; esac
        case ${2%%=*} in *[!A-Za-z0-9_]*) printf '%s: --head-env: %s is not a variable name\n' "$NAME" "${2%%=*}" >&2 && exit 2 ;; esac
        case $2 in *" "*) printf '%s: --head-env: no spaces in %s\n' "$NAME" "$2" >&2 && exit 2 ;; esac
        HEAD_ENV="$HEAD_ENV $2" CMDLINE="$CMDLINE --head-env $2"
        shift 2
        ;;
    --head-flag)
        need_value "$1" $#
        case $2 in -?*) ;; *) printf '%s: --head-flag takes a kgym bench flag (--name or --name=value), not %s\n' "$NAME" "$2" >&2 && exit 2 ;; esac
        case $2 in *" "*) printf '%s: --head-flag: no spaces in %s (write --name=value)\n' "$NAME" "$2" >&2 && exit 2 ;; esac
        HEAD_FLAGS="$HEAD_FLAGS $2" CMDLINE="$CMDLINE --head-flag $2"
        shift 2
        ;;
    --head-jobs)
        need_value "$1" $#
        case $2 in *[!0-9]* | "" | 0) printf '%s: --head-jobs must be a positive number, not %s\n' "$NAME" "$2" >&2 && exit 2 ;; esac
        HEAD_JOBS=$2 CMDLINE="$CMDLINE --head-jobs $2"
        shift 2
        ;;
    --dedup) DEDUP=--dedup CMDLINE="$CMDLINE --dedup" && shift ;;
    --kernelbench) need_value "$1" $# && KB=$2 && shift 2 ;;
    --keep) need_value "$1" $# && KEEP=$2 && shift 2 ;;
    --write-doc) WRITE_DOC=1 && shift ;;
    -h | --help) usage && exit 0 ;;
    --) shift && break ;;
    *) printf '%s: unknown argument %s\n\n' "$NAME" "$1" >&2 && usage >&2 && exit 2 ;;
    esac
done
[ $# -gt 0 ] && CMDLINE="$CMDLINE -- $*"
[ -z "$BASE" ] || [ -x "$BASE" ] || die "no baseline kgym binary at $BASE"
[ -n "$BASE" ] || ORDER=head
HEAD_JOBS=${HEAD_JOBS:-$JOBS}

preflight
"$PY" bench/grpo_mix.py "$WORK/mix" --tasks "$TASKS" || die "could not write the mix"
HEAD_BIN=$KGYM
RUNS=
REVERSED=$(echo $ORDER | awk '{ for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? " " : "") }')
rep=1
while [ "$rep" -le "$REPEAT" ]; do
    order=$ORDER && [ $((rep % 2)) -eq 0 ] && order=$REVERSED
    for who in $order; do
        KGYM=$HEAD_BIN && [ "$who" = base ] && KGYM=$BASE
        flag="$DEDUP$HEAD_FLAGS" && [ "$who" = base ] && flag= # the baseline without --dedup or --head-flag
        jobs=$HEAD_JOBS && [ "$who" = base ] && jobs=$JOBS
        # A repetition's runs are named who#N (gpu_report.py pairs head#N with base#N); one run keeps its plain name.
        tag=$who file=$who && [ "$REPEAT" -gt 1 ] && tag="$who#$rep" file="$who.$rep"
        [ "$REPEAT" -gt 1 ] && printf '%s: repetition %s of %s, %s\n' "$NAME" "$rep" "$REPEAT" "$who" >&2
        # Each build starts from an empty Triton cache, as on a fresh machine (throughput_paired.sh says why).
        tcache=$(mktemp -d "${TMPDIR:-/tmp}/kgym-grpo-triton.XXXXXX") || die "no temporary directory"
        empty_compile_cache  # the trusted compile cache starts empty too
        TRITON_CACHE_DIR=$tcache && export TRITON_CACHE_DIR
        if [ "$who" = head ] && [ -n "$HEAD_ENV" ]; then
            # HEAD_ENV: NAME=VALUE words, checked above; a subshell, so the baseline's runs never see them
            (for kv in $HEAD_ENV; do export "${kv?}"; done && run_bench "$WORK/$file.json" "$jobs" "$WORK/mix/mix.jsonl" $flag "$@") ||
                die "the head's run failed (with$HEAD_ENV)"
        else
            run_bench "$WORK/$file.json" "$jobs" "$WORK/mix/mix.jsonl" $flag "$@"
        fi
        unset TRITON_CACHE_DIR
        rm -rf "$tcache"
        RUNS="$RUNS $tag=$WORK/$file.json"
    done
    rep=$((rep + 1))
done
KGYM=$HEAD_BIN
report grpo --jobs "$JOBS" --head-jobs "$HEAD_JOBS" --mix "$WORK/mix/mix.jsonl" $RUNS
finish
