#!/bin/sh
# Issue 38's host question: do two GPUs' evaluations slow each other down through the host's cores, and does giving
# each GPU's kgym a CPU set of its own help?  Two plain `kgym bench` processes, one per GPU (CUDA_VISIBLE_DEVICES),
# on the same list, side by side:
#
#   sh bench/two_benches.sh LIST [JOBS] [--arms LIST] [--keep DIR]
#
# LIST: a kgym bench list (e.g. bench/grpo_mix.py's mix.jsonl, which `sh bench/grpo.sh --keep DIR` leaves in
# DIR/mix/mix.jsonl).  Three arms, in this order, each with an empty trusted compile cache and a fresh Triton cache
# per process: "alone" (GPU 0's process only), "free" (both, any core), "pinned" (both, each under `taskset` to a set
# of its own: the CPUs of its GPU's NUMA node where the two GPUs hang off different nodes, else the physical cores
# split in two halves, each core with its SMT siblings, so the two processes never share a core).  --arms (default
# alone,free,pinned) leaves arms out (alone always runs).  Printed per arm: each process's evaluations per hour (kgym
# bench's own figure), their sum, the sum / alone, and the CPU sets; then what the other GPU's evaluations do to
# GPU 0's timing: per arm, candidates re-measured for noise, the median and largest per-round CV, and each
# candidate's speedup against the alone arm's (median and largest |ratio - 1|).  Every result is kept as
# ARM.GPU.jsonl (kgym bench --out) in --keep's folder.
# Environment: bench/gpu_common.sh (KGYM_BIN, KGYM_PYTHON, KGYM_KERNELBENCH).
set -u
NAME=two_benches
cd "$(dirname "$0")/.." || exit 1
. bench/gpu_common.sh
LIST=${1:-}
USAGE="usage: sh bench/two_benches.sh LIST [JOBS] [--arms LIST] [--keep DIR]"
[ -n "$LIST" ] && [ -f "$LIST" ] || { echo "$USAGE" >&2; exit 2; }
shift
JOBS=6
case ${1:-} in [0-9]*) JOBS=$1 && shift ;; esac
KEEP=
ARMS=alone,free,pinned
while [ $# -gt 0 ]; do
    case $1 in
    --keep) KEEP=${2:?--keep needs a folder} && shift 2 ;;
    --arms) ARMS=${2:?--arms needs a list} && shift 2 ;;
    *) echo "two_benches: unknown argument $1 ($USAGE)" >&2
       exit 2 ;;
    esac
done
for arm in $(echo "$ARMS" | tr ',' ' '); do
    case $arm in alone | free | pinned) ;; *) echo "two_benches: --arms takes alone, free, pinned, not $arm" >&2 && exit 2 ;; esac
done
CMDLINE="sh bench/two_benches.sh $LIST $JOBS --arms $ARMS"
preflight
SETS=$("$PY" - <<'EOF'
import glob, os, subprocess
def node_of(i):
    # The GPU's PCI device, as nvidia-smi names it, and its NUMA node (-1: none known).
    bus = subprocess.run(["nvidia-smi", "-i", str(i), "--query-gpu=pci.bus_id", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().lower()
    for path in glob.glob("/sys/bus/pci/devices/*"):
        if bus and os.path.basename(path).lower().endswith(bus[-12:]):
            try:
                return int(open(os.path.join(path, "numa_node")).read())
            except (OSError, ValueError):
                return -1
    return -1
rows = [l.split(",") for l in subprocess.run(["lscpu", "-p=CPU,CORE,NODE"], capture_output=True,
                                             text=True).stdout.splitlines() if l and not l.startswith("#")]
cpus = [(int(c), int(core), int(node or 0)) for c, core, node in rows]
n0, n1 = node_of(0), node_of(1)
if n0 >= 0 and n1 >= 0 and n0 != n1:
    sets = [[c for c, _, n in cpus if n == want] for want in (n0, n1)]
else:
    cores = sorted({core for _, core, _ in cpus})
    half = set(cores[: len(cores) // 2])
    sets = [[c for c, core, _ in cpus if core in half], [c for c, core, _ in cpus if core not in half]]
print(" ".join(",".join(map(str, s)) for s in sets))
EOF
) || die "could not read the CPU topology"
SET0=${SETS% *}
SET1=${SETS#* }
printf '%s: GPU 0 CPU set %s, GPU 1 CPU set %s\n' "$NAME" "$SET0" "$SET1" >&2

one() { # one ARM GPU [CPUSET]: one kgym bench on that GPU, its per-hour figure in WORK/ARM.GPU.out
    _tc=$(mktemp -d "${TMPDIR:-/tmp}/kgym-triton.XXXXXX") || die "no temporary folder"
    # ${3:+...} unquoted: "taskset -c SET" when a set is given (a comma list, no spaces), else nothing
    CUDA_VISIBLE_DEVICES=$2 TRITON_CACHE_DIR=$_tc ${3:+taskset -c $3} "$KGYM" bench --jsonl "$LIST" --device cuda \
        --kernelbench "$KB" --jobs "$JOBS" --out "$WORK/$1.$2.jsonl" >"$WORK/$1.$2.out" 2>&1
    rm -rf "$_tc"
}
rate() { sed -n 's/.* evaluations in .* (\([0-9]*\) per hour).*/\1/p' "$WORK/$1.$2.out" | tail -1; }

empty_compile_cache
one alone 0
ALONE=$(rate alone 0)
printf '| arm | GPU 0 / h | GPU 1 / h | sum / h | sum / alone |\n|---|---:|---:|---:|---:|\n'
printf '| alone | %s | | %s | 1.000 |\n' "$ALONE" "$ALONE"
for arm in free pinned; do
    case ",$ARMS," in *",$arm,"*) ;; *) continue ;; esac
    empty_compile_cache
    if [ $arm = pinned ]; then
        one $arm 0 "$SET0" & p0=$!
        one $arm 1 "$SET1" & p1=$!
    else
        one $arm 0 & p0=$!
        one $arm 1 & p1=$!
    fi
    wait $p0 $p1
    r0=$(rate $arm 0) r1=$(rate $arm 1)
    "$PY" -c 'import sys; a, r0, r1 = (int(x or 0) for x in sys.argv[1:4]); s = r0 + r1
print(f"| {sys.argv[4]} | {r0} | {r1} | {s} | {s / a:.3f} |" if a else f"| {sys.argv[4]} | {r0} | {r1} | {s} | ? |")' \
        "$ALONE" "$r0" "$r1" $arm
done
# Each run's timing against GPU 0's alone (candidates re-measured for noise, per-round CV, speedups).
# Only this run's arms (a kept folder may hold an earlier run's).
set -- alone.0="$WORK/alone.0.jsonl"
for arm in free pinned; do
    case ",$ARMS," in *",$arm,"*) set -- "$@" "$arm.0=$WORK/$arm.0.jsonl" "$arm.1=$WORK/$arm.1.jsonl" ;; esac
done
echo
"$PY" bench/gpu_report.py timing-precision "$@" || die "the timing table failed; the results are in $WORK"
finish
