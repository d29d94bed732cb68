#!/bin/sh
# Throughput of this build against a baseline build, paired: both on the same machine in one command, the
# same list in turns, so that run-to-run spread (±8% on a half of the mix) does not decide the comparison.
#
#   sh bench/throughput_paired.sh BASELINE_KGYM [JOBS] [--list FILE]... [--order ORDER] [--head-env NAME=VALUE]...
#                                 [--kernelbench DIR] [--keep DIR] [-- extra flags for both builds]
#
# BASELINE_KGYM is another build's kgym binary with its own harness (on a GPU machine:
# `sh scripts/gpu-prepare.sh --baseline COMMIT` here, carry .gpu, then `sh .gpu/build.sh .gpu/base` there
# builds .gpu/base/build/kgym).  This build is KGYM_BIN (build/kgym).  For each list (default: the two halves,
# bench/throughput_half.jsonl and bench/throughput_half2.jsonl), one `bench/throughput.sh JOBS --list FILE` per
# build and per word of --order: base,head (the default), head,base, or a balanced base,head,head,base or
# head,base,base,head (each build once first and once second on each list: what a machine keeps between runs
# favours neither).  --head-env NAME=VALUE (repeatable; no spaces in VALUE) sets that variable for the head's runs
# only: with BASELINE_KGYM naming this very build (build/kgym) the pair measures a switch the build reads from its
# environment, e.g. --head-env KGYM_STAGE_RESERVE=1.
# Printed: run wall per list and build (summed over its runs), evaluations per GPU-hour over all lists, and head /
# base.
# Four half-mix runs take 8–10 minutes on an H100: one device command.
set -u
NAME=throughput_paired
cd "$(dirname "$0")/.." || exit 1
. bench/gpu_common.sh

[ $# -ge 1 ] || { usage >&2; exit 2; }
case $1 in -h | --help) usage && exit 0 ;; esac
BASE=$1 && shift
[ -x "$BASE" ] || die "no baseline kgym binary at $BASE"
JOBS=6
case ${1:-} in [0-9]*) JOBS=$1 && shift ;; esac
case $JOBS in *[!0-9]* | 0) printf '%s: JOBS must be a positive number, not %s\n' "$NAME" "$JOBS" >&2 && exit 2 ;; esac
LISTS=
ORDER="base head"
HEAD_ENV=
while [ $# -gt 0 ]; do
    case $1 in
    --list) need_value "$1" $# && LISTS="$LISTS $2" && shift 2 ;;
    --order)
        need_value "$1" $#
        case $2 in base,head | head,base | base,head,head,base | head,base,base,head) ORDER=$(echo "$2" | tr , ' ') ;;
        *) printf '%s: --order is base,head, head,base, base,head,head,base or head,base,base,head, not %s\n' "$NAME" "$2" >&2 && exit 2 ;; esac
        shift 2
        ;;
    --head-env)
        need_value "$1" $#
        case $2 in [A-Za-z_]*=*) ;; *) printf '%s: --head-env takes NAME=VALUE, not %s\n' "$NAME" "$2" >&2 && exit 2 ;; esac
        case ${2%%=*} in *[!A-Za-z0-9_]*) printf '%s: --head-env: %s is not a variable name\n' "$NAME" "${2%%=*}" >&2 && exit 2 ;; esac
        case $2 in *" "*) printf '%s: --head-env: no spaces in %s\n' "$NAME" "$2" >&2 && exit 2 ;; esac
        HEAD_ENV="$HEAD_ENV $2"
        shift 2
        ;;
    --kernelbench) need_value "$1" $# && KB=$2 && shift 2 ;;
    --keep) need_value "$1" $# && KEEP=$2 && shift 2 ;;
    -h | --help) usage && exit 0 ;;
    --) shift && break ;;
    *) printf '%s: unknown argument %s\n\n' "$NAME" "$1" >&2 && usage >&2 && exit 2 ;;
    esac
done
[ -n "$LISTS" ] || LISTS="bench/throughput_half.jsonl bench/throughput_half2.jsonl"
for l in $LISTS; do [ -f "$l" ] || die "no list $l"; done

preflight
HEAD_BIN=$KGYM
: >"$WORK/walls"
for l in $LISTS; do
    k=0
    for who in $ORDER; do
        k=$((k + 1))
        bin=$HEAD_BIN && [ "$who" = base ] && bin=$BASE
        out="$WORK/$who-$(basename "$l" .jsonl)" && [ "$k" -gt 2 ] && out="$out.2"
        printf '%s: %s on %s\n' "$NAME" "$who" "$l" >&2
        # Each run starts from an empty Triton cache, as on a fresh machine.  Builds that share one cache
        # across their evaluations (c5d44a4 compiled into ~/.triton) otherwise meet the kernels of the runs
        # before them already compiled: measured on an H100, c5d44a4 took 83.9 s on a list it had just run and
        # 106.9 s with an empty cache (docs/PERFORMANCE.md).  kgym's runners each compile into their own
        # workdir whatever this says; the machine-wide trusted compile cache (judge/kernelcache.py) is emptied by
        # bench/throughput.sh before each run (only since the forty-second session: until then the build that ran
        # second found the first's kernels compiled).
        tcache=$(mktemp -d "${TMPDIR:-/tmp}/kgym-paired-triton.XXXXXX") || die "no temporary directory"
        # HEAD_ENV: NAME=VALUE words, checked above; a subshell, so the baseline's runs never see them
        (if [ "$who" = head ]; then for kv in $HEAD_ENV; do export "${kv?}"; done; fi
         TRITON_CACHE_DIR=$tcache KGYM_BIN=$bin KGYM_KERNELBENCH=$KB \
            sh bench/throughput.sh "$JOBS" --list "$l" -- --out "$out.jsonl" "$@" \
            >"$out.txt" 2>"$out.err") || die "bench/throughput.sh failed for $who on $l (see $out.err)"
        rm -rf "$tcache"
        wall=$(sed -n 's/^| run wall *| \([0-9.]*\) s.*/\1/p' "$out.txt")
        n=$(grep -c '"schema"' "$out.jsonl")
        [ -n "$wall" ] || die "no run wall in $out.txt"
        echo "$who $l $wall $n" >>"$WORK/walls"
    done
done
"$PY" - "$WORK/walls" "$JOBS" "$ORDER" "$COMMIT" "$GPU_NAME" "$BASE" "$HEAD_ENV" <<'PYEOF'
import sys
path, jobs, order, commit, gpu, base, head_env = sys.argv[1:]
rows = [l.split() for l in open(path)]
env = f" (head with{head_env})" if head_env.strip() else ""
print(f"paired throughput, {gpu}, {jobs} jobs, order {order}: head kgym {commit}{env}, base {base}\n")
print("| list | base run wall | head run wall | throughput head / base |\n|---|---:|---:|---:|")
tot = {"base": [0.0, 0], "head": [0.0, 0]}
for l in dict.fromkeys(r[1] for r in rows):
    w = {"base": [], "head": []}  # each build's runs on this list, in order (two under a balanced order)
    for r in rows:
        if r[1] == l:
            w[r[0]].append(float(r[2]))
            tot[r[0]][0] += float(r[2]); tot[r[0]][1] += int(r[3])
    shown = {k: " + ".join(f"{x:.1f}" for x in v) + " s" for k, v in w.items()}
    print(f"| {l} | {shown['base']} | {shown['head']} | {sum(w['base']) / sum(w['head']):.3f} |")
rate = {k: 3600 * n / s for k, (s, n) in tot.items()}
print(f"\nevaluations per GPU-hour: base {rate['base']:,.0f}, head {rate['head']:,.0f}: "
      f"head is {100 * (rate['head'] / rate['base'] - 1):+.1f}% against base")
PYEOF
finish
