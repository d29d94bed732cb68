#!/bin/sh
# A fleet on one machine with several GPUs (issue 38): Redis + `kgym serve --redis URL --workers 0` (the API server)
# + `kgym worker --redis URL --gpus LIST --workers J` (one worker process per GPU, J evaluation threads each), fed the
# GRPO-shaped mix through the HTTP API.
#
#   sh bench/fleet.sh [--gpus 0,1] [--workers J] [--tasks N] [--list FILE] [--kill] [--kill-jobs N] [--lease S]
#                     [--settle S] [--wait S] [--timeout S] [--device cuda|cpu] [--kernelbench DIR] [--keep DIR]
#                     [-- extra kgym worker flags]
#
# Runs, in this one command: "one" (the first GPU of --gpus alone: `kgym worker --gpus 0`), then "all" (every GPU
# listed: `kgym worker --gpus 0,1`), and with --kill a third run "kill" on every GPU in which the worker process of
# the LAST GPU (the per-GPU child that `kgym worker --gpus` forks, not the parent) is SIGKILLed once a third of the
# jobs ended and it is running one, with `--lease S` (default 10 s) so that its jobs are taken over soon.  Each run
# has a fresh
# redis-server (its own folder and free port, --appendonly yes: nothing is answered from an earlier run's dedup
# entries), a fresh API server and workers, an empty Triton cache (TRITON_CACHE_DIR in a temporary folder, as
# grpo.sh) and an empty trusted compile cache.  Once every worker's heartbeat is there and --settle S seconds passed
# (10 on a GPU, 3 on the CPU: the warm pairs start), the whole list is submitted as one `POST /v1/jobs` batch (chunks
# of 1,000), and the run waits until every job ended (at most --wait S, 900).  Progress and timestamps go to stderr.
#
# The list: bench/grpo_mix.py's mix, --tasks N KernelBench tasks x 8 samples (default 16: 128 jobs, two of each
# eight exact twins, which the fleet answers from their twin: cached_from), or --list FILE (a kgym bench list:
# {"kernelbench": ID | "task": FILE, "candidate": FILE}, taken as it is).  The kill run takes the first --kill-jobs N
# pairs of it (default half: after the kill one GPU does the rest).  --timeout S sets each request's timeout field
# (the server's default: 300 s).  --workers J: evaluation threads per GPU (default 6).  Flags after -- go to every
# `kgym worker` (e.g. -- --warm 0).
#
# Printed: a markdown table per run (jobs, evaluated + answered from a twin, wall from submit to the last end,
# evaluations per GPU-hour, answers per hour, verdicts, attempts > 1, jobs per GPU), the ratio all / one (goal
# ≥ 1.9 with two GPUs), and PASS/FAIL lines: in every run every acknowledged job listed once and ended exactly once
# (one kgym:done notice each, kgym:counts summing to the jobs) with status done or a failure naming the
# interruption; in the kill run also that the killed worker was running jobs, that each was taken over and
# finished done by a surviving worker (attempts ≥ 2), and NOTE lines (re-runs, takeover delay, verdicts against the
# "all" run, how long what the killed worker had started outlived it).  Exit 1 on any FAIL.  Written: WORK/summary.json
# (the figures and checks), WORK/NAME/run.json (every job: status, verdict, attempts, worker, cached_from, times) and
# the logs of Redis, the API server and the workers (WORK: --keep DIR, else a temporary folder removed at the end).
#
# On the CPU (--device cpu; for testing the script): `kgym worker --gpus` names CUDA devices, so one
# `kgym worker --device cpu` process is started per entry of --gpus (two CPU "GPUs" for --gpus 0,1), and the mix is
# made from bench/fleet_cpu.jsonl (the bundled examples; --tasks default 3), or --list.  CPU figures say nothing of
# GPU throughput.  Environment: bench/gpu_common.sh (KGYM_BIN, KGYM_PYTHON, KGYM_KERNELBENCH); KGYM_REDIS_SERVER
# (else redis-server on PATH, else .gpu/redis/redis-server from `sh scripts/gpu-prepare.sh --fleet`).  On a GPU
# machine without the -dev packages, scripts/gpu-prepare.sh --fleet and its header say how to build and run there:
#   sh .gpu/build.sh --fleet && sh bench/fleet.sh --gpus 0,1 --kill --keep $OUT/fleet
set -u
NAME=fleet
cd "$(dirname "$0")/.." || exit 1
. bench/gpu_common.sh

GPUS=0,1
WORKERS=6
TASKS=
LIST=
KILL=
KILL_JOBS=
LEASE=10
SETTLE=
WAIT=900
TIMEOUT=
CMDLINE="sh bench/fleet.sh"
while [ $# -gt 0 ]; do
    case $1 in
    --gpus)
        need_value "$1" $#
        case $2 in "" | ,* | *, | *,,* | *[!0-9,]*)
            printf '%s: --gpus takes GPU numbers like 0,1, not %s\n' "$NAME" "$2" >&2 && exit 2 ;;
        esac
        GPUS=$2 CMDLINE="$CMDLINE --gpus $2"
        shift 2
        ;;
    --workers | --tasks | --kill-jobs | --lease | --settle | --wait | --timeout)
        need_value "$1" $#
        case $2 in *[!0-9]* | "") printf '%s: %s takes a number, not %s\n' "$NAME" "$1" "$2" >&2 && exit 2 ;; esac
        case $1 in
        --workers) WORKERS=$2 ;; --tasks) TASKS=$2 ;; --kill-jobs) KILL_JOBS=$2 ;; --lease) LEASE=$2 ;;
        --settle) SETTLE=$2 ;; --wait) WAIT=$2 ;; --timeout) TIMEOUT=$2 ;;
        esac
        CMDLINE="$CMDLINE $1 $2"
        shift 2
        ;;
    --list) need_value "$1" $# && LIST=$2 CMDLINE="$CMDLINE --list $2" && shift 2 ;;
    --kill) KILL=1 CMDLINE="$CMDLINE --kill" && shift ;;
    --device)
        need_value "$1" $#
        case $2 in cuda | cpu) DEVICE=$2 ;;
        *) printf '%s: --device is cuda or cpu, not %s\n' "$NAME" "$2" >&2 && exit 2 ;;
        esac
        CMDLINE="$CMDLINE --device $2"
        shift 2
        ;;
    --kernelbench) need_value "$1" $# && KB=$2 && shift 2 ;;
    --keep) need_value "$1" $# && KEEP=$2 && shift 2 ;;
    -h | --help) usage && exit 0 ;;
    --) shift && break ;;
    *) printf '%s: unknown argument %s\n\n' "$NAME" "$1" >&2 && usage >&2 && exit 2 ;;
    esac
done
[ $# -gt 0 ] && CMDLINE="$CMDLINE -- $*"
for v in "$WORKERS" "${TASKS:-1}" "${KILL_JOBS:-1}" "$LEASE" "$WAIT"; do
    [ "$v" -gt 0 ] ||
        { printf '%s: --workers, --tasks, --kill-jobs, --lease and --wait must be positive\n' "$NAME" >&2 && exit 2; }
done
GPU_LIST=$(echo "$GPUS" | tr , ' ')
NGPU=$(echo $GPU_LIST | wc -w)
FIRST=$(echo $GPU_LIST | awk '{ print $1 }')
LAST=$(echo $GPU_LIST | awk '{ print $NF }')
[ -z "$KILL" ] || [ "$NGPU" -ge 2 ] || { printf '%s: --kill needs two GPUs or more in --gpus\n' "$NAME" >&2; exit 2; }
[ -n "$SETTLE" ] || { SETTLE=10 && [ "$DEVICE" = cpu ] && SETTLE=3; }
[ -n "$TASKS" ] || { TASKS=16 && [ "$DEVICE" = cpu ] && TASKS=3; }

say() { printf '%s: %s %s\n' "$NAME" "$(date +%H:%M:%S)" "$*" >&2; }
T0=$(date +%s)

# ------------------------------------------------------------------------------------------ preflight
[ -x "$KGYM" ] ||
    die "no kgym binary at $KGYM (build it with: make build/kgym, or on a GPU machine sh .gpu/build.sh --fleet)"
command -v "$PY" >/dev/null 2>&1 ||
    die "no Python at $PY (set KGYM_PYTHON to a Python with torch and triton, e.g. KGYM_PYTHON=python3)"
"$KGYM" worker --help >/dev/null 2>&1 ||
    die "$KGYM has no \`kgym worker\` (a device build without the service: build with sh .gpu/build.sh --fleet)"
REDIS=${KGYM_REDIS_SERVER:-}
if [ -z "$REDIS" ]; then
    REDIS=$(command -v redis-server 2>/dev/null) || REDIS=.gpu/redis/redis-server
fi
REDIS_SH= # the carried one is a shell wrapper, run by sh (a copy may have lost its mode)
case $REDIS in *.gpu/redis/redis-server) REDIS_SH=sh ;; esac
$REDIS_SH "$REDIS" --version >/dev/null 2>&1 ||
    die "no working redis-server at $REDIS (install it, set KGYM_REDIS_SERVER or carry one: scripts/gpu-prepare.sh --fleet)"
[ -z "$LIST" ] || [ -r "$LIST" ] || die "cannot read the list $LIST (paths are taken from the repository's root)"
# KernelBench ids (the GPU mix, or a list naming them) are resolved by the API server in its --kernelbench.
if { [ -z "$LIST" ] && [ "$DEVICE" = cuda ]; } || { [ -n "$LIST" ] && grep -q '"kernelbench"' "$LIST"; }; then
    if [ -z "$KB" ] && [ -d ../shared/kernelbench/level1 ]; then KB=../shared/kernelbench; fi
    [ -n "$KB" ] || die "no KernelBench: set KGYM_KERNELBENCH or pass --kernelbench DIR (the folder holding level1/)"
fi
if [ -n "$KB" ]; then
    [ -d "$KB/level1" ] || die "$KB holds no level1/ (point KGYM_KERNELBENCH at a checkout's KernelBench/ folder)"
    KB=$(cd "$KB" && pwd)
fi
GPU_NAME=cpu
if [ "$DEVICE" = cuda ]; then
    GPU_NAME=
    for g in $GPU_LIST; do
        name=$("$PY" bench/gpu_report.py gpu-check --device "cuda:$g") ||
            die "no GPU cuda:$g visible (reason above): run this where nvidia-smi lists the GPUs of --gpus," \
                "with KGYM_PYTHON naming a Python whose torch has CUDA (or --device cpu to test the script)"
        case "$GPU_NAME" in "" | "$name") GPU_NAME=$name ;; *) GPU_NAME="$GPU_NAME + $name" ;; esac
    done
fi
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT with uncommitted changes"
if [ -n "$KEEP" ]; then
    mkdir -p "$KEEP" || die "cannot make $KEEP"
    WORK=$(cd "$KEEP" && pwd)
else
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/kgym-$NAME.XXXXXX") || die "cannot make a temporary folder"
fi
say "$GPU_NAME x $NGPU (--gpus $GPUS), $WORKERS workers per GPU, kgym $COMMIT, redis $REDIS, outputs in $WORK"

# ------------------------------------------------------------------------------------------ the fleet
# One fleet at a time; its processes (our children) and scratch folder, for stop_fleet and the exit trap.
FLEET_PIDS=
REDIS_PID=
SCRATCH=

# wait_gone PID SECONDS: until PID (our child) ends, at most SECONDS; 1 if it is still there.
wait_gone() {
    _i=0
    while kill -0 "$1" 2>/dev/null && [ "$_i" -lt $(($2 * 5)) ]; do sleep 0.2; _i=$((_i + 1)); done
    ! kill -0 "$1" 2>/dev/null
}

# Evaluation processes left by a killed worker that nothing ended: they carry TMPDIR=$SCRATCH/tmp (as
# tests/integration/serve/lib.sh finds them).
reap_scratch() {
    [ -n "$SCRATCH" ] || return 0
    for e in /proc/[0-9]*/environ; do
        p=${e#/proc/}
        p=${p%/environ}
        [ "$p" = "$$" ] && continue
        { tr '\0' '\n' <"$e" | grep -qx "TMPDIR=$SCRATCH/tmp" && kill -9 "$p" && say "killed left-over process $p"; } \
            2>/dev/null
    done
}

stop_fleet() {
    for p in $FLEET_PIDS; do kill -TERM "$p" 2>/dev/null; done
    for p in $FLEET_PIDS; do
        wait_gone "$p" 30 || { say "process $p did not stop 30 s after SIGTERM: SIGKILL" && kill -9 "$p" 2>/dev/null; }
        wait "$p" 2>/dev/null
    done
    if [ -n "$REDIS_PID" ]; then
        kill -TERM "$REDIS_PID" 2>/dev/null
        wait_gone "$REDIS_PID" 10 || kill -9 "$REDIS_PID" 2>/dev/null
        wait "$REDIS_PID" 2>/dev/null
    fi
    reap_scratch
    [ -z "$SCRATCH" ] || rm -rf "$SCRATCH"
    FLEET_PIDS= REDIS_PID= SCRATCH=
}
trap 'stop_fleet' EXIT
trap 'say "interrupted; partial outputs in $WORK"; exit 130' INT TERM

# run_fleet NAME GPUS LIST [LEASE KILL]: one run on a fresh fleet; WORK/NAME/run.json.
run_fleet() {
    _name=$1 _gpus=$2 _list=$3 _lease=$4 _kill=$5
    shift 5
    _dir=$WORK/$_name
    _n=$(echo "$_gpus" | tr , ' ' | wc -w)
    mkdir -p "$_dir" || die "cannot make $_dir"
    SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/kgym-fleet-$_name.XXXXXX") || die "no temporary folder"
    mkdir -p "$SCRATCH/redis" "$SCRATCH/tmp" "$SCRATCH/triton"
    empty_compile_cache  # every run compiles what it needs (the cache is machine-wide: "all" found "one"'s kernels)
    _rport=$("$PY" bench/fleet.py free-port) || die "no free port"
    $REDIS_SH "$REDIS" --port "$_rport" --bind 127.0.0.1 --save "" --appendonly yes --dir "$SCRATCH/redis" \
        >"$_dir/redis.log" 2>&1 &
    REDIS_PID=$!
    "$PY" bench/fleet.py redis-ping --port "$_rport" || die "redis-server did not start: $(tail -5 "$_dir/redis.log")"
    _url=redis://127.0.0.1:$_rport
    # Every process of the fleet: its temporary files in the scratch folder, an empty Triton cache.
    _lease_flag= && [ -n "$_lease" ] && _lease_flag="--lease $_lease"
    # A port file of an earlier run kept in this --keep folder would be read as this server's before it writes its
    # own (seen: the workers awaited on a dead port for 300 s).
    rm -f "$_dir/port" || die "cannot remove the old $_dir/port"
    TMPDIR=$SCRATCH/tmp TRITON_CACHE_DIR=$SCRATCH/triton \
        "$KGYM" serve --redis "$_url" --workers 0 --port 0 --port-file "$_dir/port" ${KB:+--kernelbench "$KB"} \
        $_lease_flag >"$_dir/api.log" 2>&1 &
    _api=$!
    FLEET_PIDS=$_api
    _i=0
    while [ ! -s "$_dir/port" ] && kill -0 "$_api" 2>/dev/null && [ $_i -lt 300 ]; do sleep 0.2; _i=$((_i + 1)); done
    [ -s "$_dir/port" ] || die "the API server did not start: $(tail -5 "$_dir/api.log")"
    _http=http://127.0.0.1:$(cat "$_dir/port")
    _slots= _victim=
    if [ "$DEVICE" = cuda ]; then
        # The fleet as issue 38 runs it: one `kgym worker` forks a process per GPU.
        TMPDIR=$SCRATCH/tmp TRITON_CACHE_DIR=$SCRATCH/triton \
            "$KGYM" worker --redis "$_url" --gpus "$_gpus" --workers "$WORKERS" $_lease_flag "$@" \
            >"$_dir/worker.log" 2>&1 &
        FLEET_PIDS="$_api $!"
        _victim="--kill-device cuda:$LAST"
    else
        # kgym worker --gpus names CUDA devices: on the CPU one worker process per entry stands for a GPU's.
        for g in $(echo "$_gpus" | tr , ' '); do
            TMPDIR=$SCRATCH/tmp TRITON_CACHE_DIR=$SCRATCH/triton \
                "$KGYM" worker --redis "$_url" --device cpu --workers "$WORKERS" $_lease_flag "$@" \
                >"$_dir/worker-$g.log" 2>&1 &
            FLEET_PIDS="$FLEET_PIDS $!"
            _slots="$_slots --slot $!=cpu-as-gpu$g"
            _victim="--kill-pid $!"
        done
    fi
    say "$_name: redis on port $_rport, API server $_http, worker process(es)" \
        "$(echo $FLEET_PIDS | cut -d' ' -f2-) on GPUs $_gpus"
    _devs=cpu && [ "$DEVICE" = cuda ] && _devs=$(echo "$_gpus" | sed 's/[0-9][0-9]*/cuda:&/g')
    "$PY" bench/fleet.py await-workers --url "$_http" --count $((WORKERS * _n)) --devices "$_devs" --wait 300 \
        >"$_dir/workers.txt" || die "the workers did not all start on $_devs (above; logs: $(tail -3 "$_dir"/worker*.log))"
    say "$_name: $((WORKERS * _n)) workers live; settling $SETTLE s"
    sleep "$SETTLE"
    [ -n "$_kill" ] || _victim=
    "$PY" bench/fleet.py run --url "$_http" --redis-port "$_rport" --list "$_list" --name "$_name" \
        --out "$_dir/run.json" --gpus "$_gpus" --workers-per-gpu "$WORKERS" --device "$DEVICE" --wait "$WAIT" \
        ${_lease:+--lease "$_lease"} ${TIMEOUT:+--timeout "$TIMEOUT"} $_slots $_victim ||
        die "the run $_name failed (logs in $_dir)"
    stop_fleet
    say "$_name: fleet stopped"
}

# ------------------------------------------------------------------------------------------ the runs
if [ -z "$LIST" ]; then
    if [ "$DEVICE" = cpu ]; then
        "$PY" bench/grpo_mix.py "$WORK/mix" --tasks "$TASKS" --source bench/fleet_cpu.jsonl ||
            die "could not write the mix"
    else
        "$PY" bench/grpo_mix.py "$WORK/mix" --tasks "$TASKS" || die "could not write the mix"
    fi
    LIST=$WORK/mix/mix.jsonl
fi
NPAIRS=$(grep -c '^[[:space:]]*{' "$LIST")
[ -n "$KILL_JOBS" ] || KILL_JOBS=$(((NPAIRS + 1) / 2))
RUNS=
run_fleet one "$FIRST" "$LIST" "" "" "$@"
RUNS="one=$WORK/one/run.json"
if [ "$NGPU" -ge 2 ]; then
    run_fleet all "$GPUS" "$LIST" "" "" "$@"
    RUNS="$RUNS all=$WORK/all/run.json"
fi
if [ -n "$KILL" ]; then
    [ "$KILL_JOBS" -gt $((WORKERS * NGPU)) ] || say "warning: the kill run's $KILL_JOBS jobs fit the $((WORKERS * NGPU))" \
        "workers at once: they may all end before the kill finds the last GPU's worker busy (--kill-jobs)"
    grep '^[[:space:]]*{' "$LIST" | head -n "$KILL_JOBS" >"$WORK/kill.jsonl"
    run_fleet kill "$GPUS" "$WORK/kill.jsonl" "$LEASE" 1 "$@"
    RUNS="$RUNS kill=$WORK/kill/run.json"
fi
"$PY" bench/fleet.py report --out "$WORK/summary.json" --command "$CMDLINE" --commit "$COMMIT" --gpu-name "$GPU_NAME" \
    $RUNS
rc=$?
if [ "$rc" -eq 0 ] && [ -z "$KEEP" ]; then
    rm -rf "$WORK" && say "done in $(($(date +%s) - T0)) s (outputs removed: --keep DIR keeps them)"
else
    say "done in $(($(date +%s) - T0)) s; outputs in $WORK"
fi
exit "$rc"
