#!/bin/sh
# GPU only (KGYM_DEVICE=cuda, e.g. make gpu-test): the timing protocol's and the
# profiler's raw facts (tests/gpu/check_timing_profile.py), then the result's
# timing and profile blocks from `kgym eval --json`, the reference-time cache,
# and several evaluations sharing the GPU through the arbiter.  On CPU it checks nothing.
# The whole suite takes over 7 minutes on an H200 (fortieth session), more than a lent machine's 600 s a command
# leaves after a build: GPU_TIMING_PART=1 runs everything before the neighbours' attacks (~5 minutes), =2 those
# attacks, the shared block's slack and red team 7 (~4 minutes); unset, both.
. "$(dirname "$0")/lib.sh"
if [ "$DEVICE" = cpu ]; then
    echo "CPU: the GPU timing checks run under make gpu-test"
    finish
    exit
fi
case ${GPU_TIMING_PART:-} in
'' | 1 | 2) ;;
*) echo "test_gpu_timing.sh: GPU_TIMING_PART is 1 or 2 (or unset: both), not $GPU_TIMING_PART" >&2 && exit 2 ;;
esac
if [ "${GPU_TIMING_PART:-1}" = 1 ]; then
out=$(PYTHONPATH=harness "$PY" tests/gpu/check_timing_profile.py 2>&1)
echo "$out" | grep -v "passed, .* failed"
p=$(echo "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
f=$(echo "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
PASS=$((PASS + ${p:-0})); FAIL=$((FAIL + ${f:-1}))

E=examples/04_gemm_bias_relu
"$KGYM" eval --task $E/task.py --kernel $E/correct.py --json >"$TMP/r.json"
t='r["timing"]'
[ "$(jget "$TMP/r.json" "r['verdict']")" = correct ] && ok "GEMM example correct" || bad "GEMM example correct" "$(head -c 600 "$TMP/r.json")"
# Two planned rounds (the default), a third only where kgym's check after them asked for it for a reason its own
# figures bear out (timing.checks): speedups more than 0.3% apart (--timing-agree) on the clock the check used (the
# rounds listed are on the final clock, which a third round can change), or rounds shorter than 90 ms on kgym's
# clock; or a round left out.  (The
# thirty-second session met a third round for two rounds 0.06% apart on the stream: a device-clock check is the
# likely reason, which the result now says.)
[ "$(jget "$TMP/r.json" "(lambda c: $t['rounds_run'] >= 2 and len($t['rounds']) == $t['rounds_run'] and ($t['rounds_run'] == 2 or $t['rounds_not_counted'] > 0 or (c['rounds'] == 2 and c['more'] and ((c['reason'] == 'disagree' and c['spread'] > 0.003) or (c['reason'] == 'short' and c['lasted_ms'] < 90)))))($t['checks'][0] if $t['checks'] else {'rounds': 0, 'more': False, 'reason': 'none'})")" = True ] \
    && ok "timing: the 2 planned rounds, a third only where the check's figures ask for it; each reported" || bad "timing rounds" "$(jget "$TMP/r.json" "$t")"
[ "$(jget "$TMP/r.json" "$t['speedup_ci'][0] <= $t['speedup'] <= $t['speedup_ci'][1]")" = True ] \
    && ok "timing: the speedup lies in its confidence interval" || bad "speedup interval" "$(jget "$TMP/r.json" "$t['speedup'], $t['speedup_ci']")"
# A round has at most `iters` calls (50), fewer (at least 3) where a pair of calls is slow enough that the round
# would outlast round_ms; every call of every round is a sample.
[ "$(jget "$TMP/r.json" "$t['candidate_ms']['samples'] == sum(x['candidate']['samples'] for x in $t['rounds']) and all(min($t['iters'], 3) <= x['candidate']['samples'] <= $t['iters'] == 50 for x in $t['rounds']) and $t['flush_bytes'] >= 2 * $t['l2_bytes']")" = True ] \
    && ok "timing: at most 50 calls a round, each a sample; L2 flush of twice its size" || bad "timing samples/flush" "$(jget "$TMP/r.json" "$t['candidate_ms'], [x['candidate']['samples'] for x in $t['rounds']], $t['flush_bytes']")"
# A new input set for every timed call, in the judge's call block (canaries read after every call), and the
# persisting-L2 reset done in both processes (or not needed on this device); no warning about it.
[ "$(jget "$TMP/r.json" "$t['input_mode'] == 'fresh_set_per_call' and $t['canaries'] is True and all(x['overhead']['canaries_ms'] > 0 for x in $t['rounds']) and all($t['l2_persisting'][p]['reset'] in ('ok', 'not_needed') for p in ('judge', 'runner')) and r['warnings'] == []")" = True ] \
    && ok "timing: fresh set per call in a canaried call block; persisting L2 reset" || bad "timing inputs / L2 reset" "$(jget "$TMP/r.json" "$t.get('input_mode'), $t.get('canaries'), $t.get('l2_persisting'), r['warnings'], [x.get('overhead') for x in $t['rounds']]")"
[ "$(jget "$TMP/r.json" "all(x['supervisor_ms'] >= 0.9 * x['reported_ms'] for x in $t['rounds'])")" = True ] \
    && ok "timing: kgym's clock saw each round take at least what was reported" || bad "supervisor clock" "$(jget "$TMP/r.json" "$t['rounds']")"
[ "$(jget "$TMP/r.json" "r['profile']['coverage'] > 0.9 and r['profile']['kernels'][0]['candidate']")" = True ] \
    && ok "profile: a Triton-only forward has coverage ~1, its kernel named" || bad "profile coverage" "$(jget "$TMP/r.json" "r['profile']")"

# Fail closed (docs/evaluation-protocol.md, "What a pass needs"): the run above lacked nothing a pass needs and says
# nothing it could not see; without timing there is no profile, so the default coverage floor (0.5) cannot be
# checked: not correct until --coverage-floor 0 accepts that, and then the result says so.
[ "$(jget "$TMP/r.json" "r['unjudged'] == [] and r['sandbox']['missing'] == [] and r['limits'] == [] and r['profile']['coverage'] >= 0.5")" = True ] \
    && ok "fail closed: every fact of the pass present on the GPU, nothing in limits" || bad "GPU facts" "$(jget "$TMP/r.json" "r['unjudged'], r['sandbox'], r['limits']")"
"$KGYM" eval --task $E/task.py --kernel $E/correct.py --json --no-timing >"$TMP/nt.json"
"$KGYM" eval --task $E/task.py --kernel $E/correct.py --json --no-timing --coverage-floor 0 >"$TMP/nt0.json"
[ "$(jget "$TMP/nt.json" "r['verdict'] == 'runtime_error' and r['unjudged'][0]['fact'] == 'profile' and '--coverage-floor 0' in r['unjudged'][0]['reason']")" = True ] &&
[ "$(jget "$TMP/nt0.json" "r['verdict'] == 'correct' and [l['code'] for l in r['limits']] == ['not_timed', 'no_coverage_floor']")" = True ] \
    && ok "--no-timing leaves the coverage floor unchecked: not correct, unless --coverage-floor 0 (then limits say so)" \
    || bad "--no-timing and the coverage floor" "$(jget "$TMP/nt.json" "r['verdict'], r['unjudged']"; jget "$TMP/nt0.json" "r['verdict'], r['limits']")"
# An honest kernel that zero-fills its output (a PyTorch memset beside its own kernel, on a task so small that the
# two cost about the same) stays above the default floor.
"$KGYM" eval --task tests/fixtures/tasks/add_one.py --kernel tests/fixtures/honest/h36_add_one_zeros_output.py --json >"$TMP/z.json"
[ "$(jget "$TMP/z.json" "r['verdict'] == 'correct' and r['profile']['coverage'] >= 0.5")" = True ] \
    && ok "a zero-filled output's memset keeps coverage above the default floor ($(jget "$TMP/z.json" "round(r['profile']['coverage'], 3)"))" \
    || bad "zeros_like output and the coverage floor" "$(jget "$TMP/z.json" "r['verdict'], r['profile'], r['hacks']")"

# Work on a side stream (tests/fixtures/hacks/side_stream.py, under the runtime-only policy: the language forbids
# streams) that ends inside the synchronize's latency leaves no gap (a 3 us kernel on add_one: speedup 3.9-4.3
# against 1.7 for the same kernel on the timed stream, thirty-third session). The clock block's profile finds its
# device time on another stream, and kgym times both models on the device-wide clock; the honest kernel's profile
# finds none and stays on the stream's.
# The runner's launch hook sees the side stream (side_stream, a hack: test_hacks.sh), and its guards a replaced
# harness function (harness_tampering, which ends the evaluation before timing); here both are warnings, so that
# the clocks' own answer is checked on its own.
"$PY" -c 'import json, sys; p = json.load(open(sys.argv[1])); p["findings"].update(side_stream="warn", harness_tampering="warn"); json.dump(p, open(sys.argv[2], "w"))' \
    tests/fixtures/hacks/runtime_only.json "$TMP/clocks_only.json"
RT=$TMP/clocks_only.json
"$KGYM" eval --task tests/fixtures/tasks/add_one.py --kernel tests/fixtures/hacks/side_stream.py --policy $RT --json >"$TMP/side.json"
"$KGYM" eval --task tests/fixtures/tasks/add_one.py --kernel tests/fixtures/candidates/ok.py --policy $RT --json >"$TMP/same.json"
[ "$(jget "$TMP/side.json" "r['profile']['side_stream_device_us'] > 0 and r['timing']['clock_basis'] == 'device' and r['timing']['speedup'] <= $(jget "$TMP/same.json" "r['timing']['speedup']")")" = True ] &&
[ "$(jget "$TMP/same.json" "r['profile']['side_stream_device_us'] == 0 and r['timing']['clock_basis'] == 'stream' and r['verdict'] == 'correct'")" = True ] \
    && ok "side-stream work found by the profile: device-wide clock (speedup $(jget "$TMP/side.json" "round(r['timing']['speedup'], 3)") against $(jget "$TMP/same.json" "round(r['timing']['speedup'], 3)") on the timed stream)" \
    || bad "side stream and the clock" "$(jget "$TMP/side.json" "r['verdict'], r.get('profile'), (r.get('timing') or {}).get('clock_basis'), (r.get('timing') or {}).get('speedup')"; jget "$TMP/same.json" "r['verdict'], (r.get('profile') or {}).get('side_stream_device_us'), (r.get('timing') or {}).get('clock_basis')")"
# A runner that withholds the side-stream figure (tests/fixtures/hacks/null_stream_figure.py replaces the harness's
# cudashare.stream_id) where the judge's driver names streams: side_stream_missing, and the device-wide clock as
# for side-stream time (red team 33: the gap alone decided, and missed the kernel).
"$KGYM" eval --task tests/fixtures/tasks/add_one.py --kernel tests/fixtures/hacks/null_stream_figure.py --policy $RT --json >"$TMP/null.json"
[ "$(jget "$TMP/null.json" "r['profile']['side_stream_device_us'] is None and r['profile']['side_stream_missing'] is True and r['timing']['clock_basis'] == 'device' and r['verdict'] == 'correct'")" = True ] \
    && ok "a withheld side-stream figure: device-wide clock (speedup $(jget "$TMP/null.json" "round(r['timing']['speedup'], 3)"))" \
    || bad "withheld side-stream figure" "$(jget "$TMP/null.json" "r['verdict'], r.get('profile'), (r.get('timing') or {}).get('clock_basis')")"

# Red team 27's skip gamble (tests/fixtures/redteam27/skip_one_in_three.py): a padded warm-up gives it rounds of 3
# calls, and it returns an empty output on the first call of each.  Every call of a 3-call round is checked now
# (timing.checked_positions): never `correct` (it was in ~64% of evaluations, at x1.5).  Its untimed re-run answers
# another wrong output, so the verdict is `incorrect` (a failed timed_inputs variant), or `hacked`.
"$KGYM" eval --task tests/fixtures/red7/task_gemm_fp16.py --kernel tests/fixtures/redteam27/skip_one_in_three.py --json >"$TMP/skip.json"
[ "$(jget "$TMP/skip.json" "r['verdict'] in ('incorrect', 'hacked')")" = True ] \
    && ok "red team 27: a skipped call in a 3-call round is always checked ($(jget "$TMP/skip.json" "r['verdict']"))" \
    || bad "red team 27 skip_one_in_three" "$(jget "$TMP/skip.json" "r['verdict'], (r.get('timing') or {}).get('rounds_run'), [x['candidate']['samples'] for x in (r.get('timing') or {}).get('rounds', [])], (r.get('timing') or {}).get('speedup')")"

# The reference-time cache: the second evaluation times only the candidate.
"$KGYM" eval --task $E/task.py --kernel $E/correct.py --json --reference-cache "$TMP/cache" >"$TMP/c1.json"
"$KGYM" eval --task $E/task.py --kernel $E/correct.py --json --reference-cache "$TMP/cache" >"$TMP/c2.json"
[ "$(jget "$TMP/c1.json" "r['timing']['reference_cached']")" = False ] && [ "$(jget "$TMP/c2.json" "r['timing']['reference_cached']")" = True ] \
    && ok "reference cache: a miss, then a hit" || bad "reference cache" "$(jget "$TMP/c2.json" "r['timing']")"
# ... and the entry keeps the same calls' device-wide times beside the stream's (as many; each at least its stream
# time), which a candidate on the device-wide clock is compared with (reference_clock).
"$PY" - "$TMP/cache" <<'PYEOF' && ok "the reference cache keeps device-wide times" || bad "the reference cache's device-wide times" "$(cat "$TMP/cache"/*.json | head -c 600)"
import glob, json, sys
(f,) = glob.glob(sys.argv[1] + "/*.json")
e = json.load(open(f))
s, d = e["reference_ms"], e["reference_device_ms"]
assert len(s) == len(d) > 0 and all(b >= a for a, b in zip(s, d)), (len(s), len(d))
PYEOF
[ "$(jget "$TMP/c2.json" "r['timing']['reference_clock'] == r['timing']['clock_basis'] == 'stream'")" = True ] \
    && ok "a hit on the stream clock: reference_clock stream" || bad "reference_clock on a hit" "$(jget "$TMP/c2.json" "r['timing'].get('reference_clock'), r['timing']['clock_basis']")"
# A miss times the reference alone (no candidate call between its calls) and stores those samples, under protocol v7;
# a hit uses them.  The result says how the judge's warm-up for them ended (time, or settled on its NVML reading).
[ "$(jget "$TMP/c1.json" "r['timing']['reference_samples']")" = alone ] && [ "$(jget "$TMP/c2.json" "r['timing']['reference_samples']")" = cached ] \
    && [ "$(cat "$TMP"/cache/*.json | "$PY" -c "import json,sys; e=json.load(sys.stdin); print(e['protocol'].startswith('v7;') and e['samples'] == $(jget "$TMP/c1.json" "r['timing']['reference_ms']['samples']"))")" = True ] \
    && [ "$(jget "$TMP/c1.json" "r['timing']['reference_alone']['warm'][0]['ended'] in ('time', 'settled') and r['timing']['reference_alone']['lost'] >= 0")" = True ] \
    && [ "$(jget "$TMP/c2.json" "r['timing']['reference_alone']")" = None ] \
    && ok "reference cache: the miss timed the reference alone, and those samples were stored (v7)" \
    || bad "reference timed alone" "$(jget "$TMP/c1.json" "r['timing'].get('reference_samples'), r['timing']['reference_ms']"; head -c 300 "$TMP"/cache/*.json)"
[ "$(jget "$TMP/c2.json" "abs(r['timing']['speedup'] / $(jget "$TMP/c1.json" "r['timing']['speedup']") - 1) < 0.1")" = True ] \
    && ok "reference cache: the speedup agrees with a full measurement (10%)" || bad "cached speedup" "$(jget "$TMP/c2.json" "r['timing']['speedup']")"

# bench (and serve) time a task's reference once per process by default, in a private folder removed at the end;
# --reference-cache off times it every time.
mkdir -p "$TMP/rtmp"
printf '{"task": "%s", "candidate": "%s"}\n{"task": "%s", "candidate": "%s"}\n' "$PWD/$E/task.py" "$PWD/$E/correct.py" \
    "$PWD/$E/task.py" "$PWD/$E/correct.py" >"$TMP/twice.jsonl"
TMPDIR="$TMP/rtmp" "$KGYM" bench --jsonl "$TMP/twice.jsonl" --jobs 1 --json >"$TMP/twice.json"
[ "$(jget "$TMP/twice.json" "sorted((x['result']['timing']['reference_cached'], x['result']['timing']['reference_samples']) for x in r['results'])")" = "[(False, 'alone'), (True, 'cached')]" ] \
    && [ -z "$(ls -A "$TMP/rtmp" | grep kgym-refcache)" ] && ok "bench: the reference timed once per task, its private folder removed" \
    || bad "bench's default reference cache" "$(jget "$TMP/twice.json" "[x['result'].get('timing') for x in r['results']]"); $(ls "$TMP/rtmp")"
"$KGYM" bench --jsonl "$TMP/twice.jsonl" --jobs 1 --json --reference-cache off >"$TMP/twice_off.json"
[ "$(jget "$TMP/twice_off.json" "[(x['result']['timing']['reference_cached'], x['result']['timing']['reference_samples']) for x in r['results']]")" = "[(False, 'interleaved'), (False, 'interleaved')]" ] \
    && ok "bench --reference-cache off: the reference timed every time" \
    || bad "--reference-cache off" "$(jget "$TMP/twice_off.json" "[x['result'].get('timing') for x in r['results']]")"

# Several evaluations at once share the GPU; timing ran in exclusive windows.
# Without --jobs: ten at once on a machine whose driver lists one GPU, six where it lists several
# (src/cli/common.h kg_cli_gpu_jobs_default).
"$KGYM" bench examples --json >"$TMP/b.json"
GPUS_HERE=$(ls /proc/driver/nvidia/gpus 2>/dev/null | wc -l)
WANT_JOBS=6 && [ "$GPUS_HERE" = 1 ] && WANT_JOBS=10
[ "$(jget "$TMP/b.json" "r['summary']['jobs']")" = "$WANT_JOBS" ] \
    && ok "bench on a GPU: $WANT_JOBS evaluations at once by default ($GPUS_HERE GPUs on the machine)" \
    || bad "bench's default jobs on a GPU ($GPUS_HERE GPUs, $WANT_JOBS expected)" "$(jget "$TMP/b.json" "r['summary']['jobs']")"
[ "$(jget "$TMP/b.json" "r['summary']['expectations_met'] == r['summary']['expectations']")" = True ] \
    && ok "bench at its default jobs: every expectation met" || bad "bench at its default jobs" "$(jget "$TMP/b.json" "r['summary']")"
# One exclusive window per timed evaluation, spent on rounds, the clock block and the profile; none for the
# incorrect ones (kgym tells the child not to time them).
[ "$(jget "$TMP/b.json" "r['summary']['verdicts']['correct'] <= r['summary']['gpu_exclusive_grants'] and all(r['summary']['gpu_exclusive_ms_by_purpose'].get(k, 0) > 0 for k in ('timing_round', 'clock_block', 'profile'))")" = True ] \
    && ok "bench at its default jobs: timing ran in exclusive GPU windows" || bad "exclusive windows" "$(jget "$TMP/b.json" "r['summary']")"
# The arbiter's state times: the exclusive state is the exclusive windows' time, and the states cover the run.
[ "$(jget "$TMP/b.json" "abs(r['summary']['gpu_state_ms']['exclusive'] - r['summary']['gpu_exclusive_ms']) < 1 and abs(sum(r['summary']['gpu_state_ms'].values()) / 1000 - r['summary']['wall_s']) < 0.05")" = True ] \
    && ok "bench at its default jobs: the run's GPU time by the arbiter's state" || bad "gpu_state_ms" "$(jget "$TMP/b.json" "r['summary']")"
# A start is phased: the two CUDA contexts and the device-memory probe in a shared phase of purpose setup (a warm
# pair's in the warmer's phase, not the evaluation's).  Made outside any phase, the contexts alone put other
# evaluations' timing rounds off (docs/PERFORMANCE.md, nineteenth session: re-measured candidates 0-2 -> 4-7 of 31).
# The wind-down (the contexts' teardown) holds one of purpose exit, and its plan says so (gpu_phases.wind_down: phased
# by default; KGYM_EXIT_PHASE=auto, for measurements, leaves it where NVML counts both processes under a bound,
# judge/child.py _wind_down_plan).  Every example whose judge ended by itself reaches both (the runner starts before
# the candidate is read).
[ "$(jget "$TMP/b.json" "(lambda done: len(done) >= 10 and all(x['gpu_phases']['shared']['by_purpose'].get('exit', 0) > 0 and (x['gpu_phases'].get('wind_down') or {}).get('phased') is True and (x['process'].get('warm') or x['gpu_phases']['shared']['by_purpose'].get('setup', 0) > 0) for x in done))([x['result'] for x in r['results'] if (x['result'].get('process') or {}).get('end') == 'completed'])")" = True ] \
    && ok "bench at its default jobs: the set-up and the wind-down ran in shared phases, as the plan said ($(jget "$TMP/b.json" "sorted(set((x['result']['gpu_phases'].get('wind_down') or {}).get('why') for x in r['results']))" | cut -c1-200))" \
    || bad "setup/exit phases" "$(jget "$TMP/b.json" "[(x['result']['gpu_phases']['shared'], x['result']['gpu_phases'].get('wind_down')) for x in r['results']]")"
[ "$(jget "$TMP/b.json" "all(x['result']['gpu_phases']['exclusive']['grants'] == 0 for x in r['results'] if x['result']['verdict'] == 'incorrect')")" = True ] \
    && ok "bench at its default jobs: incorrect candidates were not timed" || bad "incorrect timed" "$(jget "$TMP/b.json" "[x['result']['gpu_phases'] for x in r['results']]")"
# Device work queued by one evaluation never runs in another's exclusive window (red team 6): a candidate whose
# ModelNew.__init__ queues seconds of torch.mm used to leave ~9 s of it running after its phase was handed back,
# inside the next evaluation's timing rounds, and the victim's speedup came out 1.8x its true value.  Every runner
# answer now waits for its device: the victim's speedup next to the hog is its speedup alone.
G=tests/fixtures/gpu_overlap
"$KGYM" eval --task $G/chain_task.py --kernel $G/chain_fused.py --json >"$TMP/solo.json"
printf '{"task": "%s", "candidate": "%s"}\n{"task": "%s", "candidate": "%s"}\n' "$PWD/$G/chain_task.py" \
    "$PWD/$G/chain_fused.py" "$PWD/$E/task.py" "$PWD/$G/hog_init.py" >"$TMP/overlap.jsonl"
"$KGYM" bench --jsonl "$TMP/overlap.jsonl" --jobs 2 --json >"$TMP/overlap.json"
solo=$(jget "$TMP/solo.json" "r['timing']['speedup']")
[ "$(jget "$TMP/overlap.json" "abs([x for x in r['results'] if x['candidate'].endswith('chain_fused.py')][0]['result']['timing']['speedup'] / $solo - 1) < 0.15")" = True ] \
    && ok "work queued in __init__ stays out of another evaluation's timing (speedup $solo alone)" \
    || bad "work queued in __init__ ran in another evaluation's window" "$(jget "$TMP/overlap.json" "[(x['candidate'], x['result']['verdict'], (x['result'].get('timing') or {}).get('speedup')) for x in r['results']]"), alone $solo"

fi  # GPU_TIMING_PART 1
if [ "${GPU_TIMING_PART:-2}" = 2 ]; then
# A neighbour's candidate against the victims' timing (tests/fixtures/gpu_overlap/README.md): eight honest victims of a
# 0.1-ms kernel timed alone, then among 24 copies of an attack each; run_neighbours.sh prints OK for an attack when
# every victim stays within 2% of the victims' median alone.
#   hog_exit: runners that end holding 8 GiB in 64 blocks (wrong output, so each evaluation ends after its tiny run)
#     torn down while the victims are timed.  With the wind-down in a shared phase the victims kept their speedups
#     (0.34% at most on an H200); torn down outside any phase (KGYM_EXIT_PHASE=0) one moved 3.6% and two ran six
#     rounds (thirty-ninth session).
#     Run here under KGYM_EXIT_PHASE=auto (the wind-down leaves the phases where NVML counts each process of the
#     pair at most 2 GiB, judge/child.py _wind_down_plan; for measurements, not the default): these runners are
#     over the bound, so every one of them must stay phased.
#   hog_exit_bound: runners that end holding as many mappings as fit under that bound (1,126 buffers of 1 MiB,
#     ~563 segments), torn down outside any phase where NVML lists them (its line's "unphased" count; 24 of 24 and
#     0.46% at most on an H200, fortieth session).
#   autotune_escape: a compile that raises inside Triton's autotuner (a config's tl.static_assert) never reached the
#     post-compile hook, so the autotuner's do_bench of the next, already compiled config ran with the shared phase
#     handed back (red team 39b); the runner now says the compile's end as the error leaves it.
KGYM_EXIT_PHASE=auto NEIGHBOURS_ONLY="hog_exit hog_exit_bound autotune_escape" KGYM_BIN="$KGYM" KGYM_PYTHON="$PY" \
    sh tests/fixtures/gpu_overlap/run_neighbours.sh >"$TMP/nb.txt" 2>&1
for attack in hog_exit hog_exit_bound autotune_escape; do
    line=$(grep -E "^$attack (OK|LEAK|ERR) " "$TMP/nb.txt")
    case $line in
    *" OK "*) ok "neighbours: $(echo "$line" | cut -c1-160)" ;;
    *) bad "neighbours: $attack reached the victims' timing (or did not run)" "$(grep -E "^(# alone|$attack|#   $attack)" "$TMP/nb.txt")" ;;
    esac
done
# hog_exit_pinned: runners that end holding 4 GiB of pinned host memory, which NVML's figure does not count (red team
# 40): under auto they leave the phase (`KGYM_EXIT_PHASE=auto NEIGHBOURS_ONLY=hog_exit_pinned sh
# tests/fixtures/gpu_overlap/run_neighbours.sh`: victims within 0.34% on an H200, forty-first session); here, by
# default, every one must stay phased and every victim within 2%.
NEIGHBOURS_ONLY=hog_exit_pinned KGYM_BIN="$KGYM" KGYM_PYTHON="$PY" \
    sh tests/fixtures/gpu_overlap/run_neighbours.sh >"$TMP/nbp.txt" 2>&1
grep -qE "^hog_exit_pinned OK .* unphased 0 " "$TMP/nbp.txt" \
    && ok "neighbours, by default: $(grep -E "^hog_exit_pinned " "$TMP/nbp.txt" | cut -c1-160)" \
    || bad "neighbours: runners ending with 4 GiB pinned reached the victims or left the phase by default" "$(grep -E "^(# alone|hog_exit_pinned|#   hog_exit_pinned)" "$TMP/nbp.txt")"
grep -qE "^hog_exit OK .* unphased 0 " "$TMP/nb.txt" \
    && ok "neighbours: runners ending with 8 GiB keep their wind-down in a shared phase" \
    || bad "neighbours: a runner ending with 8 GiB was torn down outside the phases" "$(grep -E "^(hog_exit|#   hog_exit:)" "$TMP/nb.txt")"

# The slack of a shared block (docs/threat-model.md): a new block shows nothing this process or another freed.
"$PY" bench/slack_probe.py >"$TMP/slack.json" 2>&1 \
    && ok "a new shared block holds nothing freed before: $(cat "$TMP/slack.json" | cut -c1-150)" \
    || bad "a new shared block shows memory freed before (or the probe failed)" "$(tail -5 "$TMP/slack.json")"

# Red team 7 (tests/fixtures/red7/README.md): attacks on the timing and the reference-time cache, each judged by
# run_gpu.sh against fresh controls in the same process; an attack line is a check (OK passes; LEAK or ERR fails).
KGYM_BIN="$KGYM" sh tests/fixtures/red7/run_gpu.sh >"$TMP/red7.txt" 2>&1
lines=$(grep -E '^[a-z0-9_]+ +(OK|LEAK|ERR) ' "$TMP/red7.txt")
[ -n "$lines" ] || bad "red team 7 printed no attack line" "$(tail -20 "$TMP/red7.txt")"
while IFS= read -r line; do
    [ -n "$line" ] || continue
    case $line in
    *" OK "*) ok "red7: $(echo "$line" | cut -c1-150)" ;;
    *) bad "red7: $(echo "$line" | cut -c1-150)" "$line" ;;
    esac
done <<EOF2
$lines
EOF2
fi  # GPU_TIMING_PART 2
finish
