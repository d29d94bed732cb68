#!/bin/sh
# test_rl_cli.sh — the RL subcommands (reward, advantages, metrics, rejection,
# curriculum) on the small JSONL fixtures in rl_fixtures/, checked against
# numbers computed by hand (docs/rl.md has the formulas).  Runs build/asan/kgym
# unless KGYM_BIN names another binary.  Last line: "N passed, N failed".
cd "$(dirname "$0")/../.." || exit 1
KGYM=${KGYM_BIN:-build/asan/kgym}
FIX=tests/integration/rl_fixtures
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

if [ ! -x "$KGYM" ]; then
    echo "FAIL $KGYM is not built"
    echo "0 passed, 1 failed"
    exit 1
fi

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

# near A B [TOL]: |A − B| <= TOL (default 1e-9)
near() { awk -v a="$1" -v b="$2" -v t="${3:-1e-9}" \
    'BEGIN { if (a == "" || b == "") exit 1; d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; }

# field KEY: the value of the LAST "KEY": in each line of stdin — the fields
# the subcommands add come after any nested result, so the last is theirs.
field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p"; }

# expect NAME KEY "v1 v2 ..." FILE: the KEY of each line of FILE, in order
expect() {
    name=$1; key=$2; want=$3; file=$4
    got=$(field "$key" <"$file" | tr '\n' ' ')
    set -- $got
    for w in $want; do
        if [ $# -eq 0 ] || ! near "$1" "$w" 1e-9; then
            bad "$name: $key = [$got], want [$want]"
            return
        fi
        shift
    done
    if [ $# -ne 0 ]; then bad "$name: $key has extra values [$got]"; return; fi
    ok "$name"
}

# keeps_are NAME "true false ..." [PATTERN]: the "keep" of each line of $TMP/out, in order, and
# PATTERN (if given) in $TMP/stats
keeps_are() {
    got=$(field keep <"$TMP/out" | tr '\n' ' ')
    if [ "$got" = "$2 " ] && { [ -z "$3" ] || grep -q -- "$3" "$TMP/stats"; }; then
        ok "$1"
    else
        bad "$1: keep = [$got], want [$2]; stats: $(cat "$TMP/stats" 2>/dev/null)"
    fi
}

# run_ok NAME CMD...: exit status 0
run_ok() {
    name=$1; shift
    if "$@" >"$TMP/out" 2>"$TMP/err"; then ok "$name"; else bad "$name (rc $?): $(cat "$TMP/err")"; fi
}

# run_fails NAME RC PATTERN CMD...: exits RC and says PATTERN on stderr
run_fails() {
    name=$1; want_rc=$2; pattern=$3; shift 3
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ $rc -eq "$want_rc" ] && grep -q -- "$pattern" "$TMP/err"; then
        ok "$name"
    else
        bad "$name: rc $rc, stderr: $(cat "$TMP/err")"
    fi
}

# ---- advantages on reward records ------------------------------------------
# s0: r 0, 1   s1: .5, .5   s2: 1, 2  ->  G = 1,1 | 1,.5 | 3,2 ; level1/7 alone
"$KGYM" advantages --estimator trloo $FIX/trajectories.jsonl >"$TMP/trloo" 2>"$TMP/err"
expect "trloo returns" return "1 1 1 0.5 3 2 0.8" "$TMP/trloo"
# turn 1: 1-(1+3)/2, 1-(1+3)/2, 3-(1+1)/2; turn 2: 1-2.5/2, .5-3/2, 2-1.5/2;
# level1/7 is a singleton: A = G = 0.8 (Dr. Kernel)
expect "trloo advantages" advantage "-1 -0.25 -1 -1 2 1.25 0.8" "$TMP/trloo"

"$KGYM" advantages --estimator trloo --singleton zero $FIX/trajectories.jsonl >"$TMP/out" 2>&1
expect "trloo singleton=zero" advantage "-1 -0.25 -1 -1 2 1.25 0" "$TMP/out"

"$KGYM" advantages --estimator trloo --gamma 0.5 $FIX/trajectories.jsonl >"$TMP/out" 2>&1
# G1 = r1 + .5 r2: .5, .75, 2 -> .5-(2.75)/2, .75-(2.5)/2, 2-(1.25)/2
expect "trloo gamma 0.5" advantage "-0.875 -0.25 -0.5 -1 1.375 1.25 0.8" "$TMP/out"

"$KGYM" advantages --estimator grpo $FIX/trajectories.jsonl >"$TMP/out" 2>&1
# (N-1)/N = 2/3 of TRLOO
expect "grpo = 2/3 trloo" advantage "-0.666666666667 -0.166666666667 -0.666666666667 -0.666666666667 1.33333333333 0.833333333333 0.8" "$TMP/out"

"$KGYM" advantages --estimator grpo --std-normalize $FIX/single_turn.jsonl >"$TMP/out" 2>&1
# r = 1, 2, 6: mean 3, unbiased std sqrt(7) -> (r-3)/sqrt(7)
adv=$(field advantage <"$TMP/out" | head -1)
if near "$adv" -0.755928946 1e-5; then ok "grpo std-normalised"; else bad "grpo std-normalised: $adv"; fi

"$KGYM" advantages --estimator trloo $FIX/masked.jsonl >"$TMP/out" 2>&1
# c's turn 2 masked: its reward 2 is zeroed (G: c 1, 0), so turn 1 is G = 1, 1, 1;
# turn-2 group {a: 1, b: .5}
expect "mask: advantages" advantage "0 0.5 0 -0.5 0 0" "$TMP/out"
expect "mask: returns" return "1 1 1 0.5 1 0" "$TMP/out"
"$KGYM" advantages --estimator trloo --masked-reward keep $FIX/masked.jsonl >"$TMP/out" 2>&1
# the masked reward still in c's G1 = 3
expect "mask: --masked-reward keep" advantage "-1 0.5 -1 -0.5 2 0" "$TMP/out"

# issue 15's example: a masked -1 at turn 2 does not reach turn 1
printf '%s\n' '{"prompt":"p","sample":0,"turn":1,"reward":1}' \
    '{"prompt":"p","sample":0,"turn":2,"reward":-1,"mask":0}' \
    '{"prompt":"p","sample":1,"turn":1,"reward":0}' '{"prompt":"p","sample":1,"turn":2,"reward":0}' \
    | "$KGYM" advantages --estimator trloo >"$TMP/out" 2>&1
expect "masked reward zeroed before returns" advantage "1 0 -1 0" "$TMP/out"

# keep: false (a rejection) -> advantage 0; it stays in the baseline unless --rejected drop
sed 's/"sample": 2, "turn": 1, "reward": 1.0}/"sample": 2, "turn": 1, "reward": 1.0, "keep": false}/' \
    $FIX/trajectories.jsonl >"$TMP/rejected.jsonl"
"$KGYM" advantages --estimator trloo "$TMP/rejected.jsonl" >"$TMP/out" 2>&1
expect "rejected record: A = 0, still a baseline" advantage "-1 -0.25 -1 -1 0 1.25 0.8" "$TMP/out"
"$KGYM" advantages --estimator trloo --rejected drop "$TMP/rejected.jsonl" >"$TMP/out" 2>&1
expect "rejected record: --rejected drop" advantage "0 -0.25 0 -1 0 1.25 0.8" "$TMP/out"

# group filter: turn groups of trajectories.jsonl all vary; a constant one is dropped
printf '%s\n' '{"prompt":"q","sample":0,"reward":0.5}' '{"prompt":"q","sample":1,"reward":0.5004}' \
    '{"prompt":"r","sample":0,"reward":0}' '{"prompt":"r","sample":1,"reward":1}' \
    '{"prompt":"s","sample":0,"reward":1}' >"$TMP/groups.jsonl"
"$KGYM" rejection --method group "$TMP/groups.jsonl" >"$TMP/out" 2>"$TMP/stats"
keeps_are "group filter: std < 1e-3 dropped" "false false true true true" '"groups_rejected":1'
"$KGYM" rejection --method group --min-group-size 2 "$TMP/groups.jsonl" >"$TMP/out" 2>"$TMP/stats"
keeps_are "group filter: min group size" "false false true true false"
# --by prompt judges each trajectory by its last turn: level1/3 last turns 1, .5, 2 vary
"$KGYM" rejection --method group --by prompt --min-group-size 2 $FIX/trajectories.jsonl \
    >"$TMP/out" 2>"$TMP/stats"
keeps_are "group filter --by prompt" "true true true true true true false"

"$KGYM" advantages --estimator rloo $FIX/single_turn.jsonl >"$TMP/out" 2>&1
expect "rloo" advantage "-3 -1.5 4.5" "$TMP/out"

# ---- reward, then advantages: the pipeline ----------------------------------
"$KGYM" reward --fn drkernel $FIX/multi_turn_results.jsonl >"$TMP/rewards" 2>"$TMP/err"
# 0 | .5+.5*2+.5*.8 | .5+.5*1.1+.5*.5 | 0 | hacked 0 | .5+.5*.5+.5*.35
expect "reward drkernel" reward "0 1.9 1.3 0 0 0.925" "$TMP/rewards"
"$KGYM" advantages --estimator trloo <"$TMP/rewards" >"$TMP/out" 2>&1
expect "reward | advantages trloo" advantage "0.7875 1.4375 -0.1125 -1.4125 -0.675 -0.025" "$TMP/out"

"$KGYM" reward --fn tritonrl $FIX/multi_turn_results.jsonl >"$TMP/out" 2>&1
expect "reward tritonrl" reward "0 3 2.1 0 0 1.5" "$TMP/out"
"$KGYM" reward --fn staged --set speed_weight=0.1 $FIX/multi_turn_results.jsonl >"$TMP/out" 2>&1
expect "reward staged + speed term" reward "0.3 1.2 1.11 0.7 0 1.05" "$TMP/out"
"$KGYM" reward --fn speedup $FIX/multi_turn_results.jsonl >"$TMP/out" 2>&1
expect "reward speedup (log)" reward "-2 0.69314718056 0.0953101798043 -2 -2 -0.69314718056" "$TMP/out"
"$KGYM" reward --fn drkernel --set regression_penalty=0.5 --set hack_penalty=1 \
    $FIX/multi_turn_results.jsonl >"$TMP/out" 2>&1
expect "reward penalties" reward "0 1.9 1.3 -0.5 -1 0.925" "$TMP/out"
# a bare result becomes a record: the evaluator's staged "reward" stays inside it
"$KGYM" reward --fn drkernel $FIX/bench_cpu.jsonl >"$TMP/out" 2>&1
if grep -q '"result":{"schema":"kgym.result/1".*"reward":1.0.*},"reward":0.5}' "$TMP/out"; then
    ok "bare result wrapped"
else
    bad "bare result wrapped: $(head -1 "$TMP/out")"
fi

# ---- metrics -----------------------------------------------------------------
"$KGYM" metrics --plot "$TMP/fast.svg" $FIX/multi_turn_results.jsonl >"$TMP/table" 2>"$TMP/err"
row() { awk -v sec="$1" -v t="$2" -v c="$3" \
    '/^Per turn/ { s = "turn" } /^Best of turns/ { s = "best" } s == sec && $1 == t { print $c }' "$TMP/table"; }
check_cell() { # NAME SECTION TURN COLUMN WANT
    v=$(row "$2" "$3" "$4")
    if near "$v" "$5" 0.0005; then ok "$1"; else bad "$1: $v, want $5"; fi
}
# turn 1: compile_error, correct, hacked -> 1/3 (a hacked kernel does not count as compiled)
check_cell "metrics turn 1 compile rate" turn 1 3 0.333
check_cell "metrics turn 1 correct rate" turn 1 4 0.333
check_cell "metrics turn 1 hack rate" turn 1 5 0.333
check_cell "metrics turn 1 fast@1.2 (hacked 9x not counted)" turn 1 7 0
check_cell "metrics turn 2 fast@2 (>= counts)" turn 2 9 0.333
check_cell "metrics turn 2 geomean" turn 2 11 1.0
check_cell "metrics best-of 2 correct" best 2 4 1.0
check_cell "metrics best-of 2 fast@1" best 2 6 0.667
check_cell "metrics best-of 2 geomean" best 2 11 1.032
if grep -q '^<svg' "$TMP/fast.svg" && [ "$(grep -c '<polyline' "$TMP/fast.svg")" -eq 10 ]; then
    ok "metrics --plot writes an SVG with 10 series"
else
    bad "metrics --plot"
fi
"$KGYM" metrics --format json --thresholds 1,2 $FIX/bench_cpu.jsonl >"$TMP/out" 2>&1
if grep -q '"correct_rate":0.5,' "$TMP/out" && grep -q '"compile_rate":0.75,' "$TMP/out" &&
    grep -q '"fast":{"1":0.0,"2":0.0}' "$TMP/out" && grep -q '"geomean_speedup":null' "$TMP/out"; then
    ok "metrics json on CPU results"
else
    bad "metrics json on CPU results: $(cat "$TMP/out")"
fi

# ---- rejection ---------------------------------------------------------------
# MRS: a loss-masked turn is out of the ratio; "-inf" is a log-ratio; modes
printf '%s\n' '{"prompt":"p","sample":0,"turn":1,"log_ratios":[0.0004,0.0004]}' \
    '{"prompt":"p","sample":0,"turn":2,"log_ratios":[1.6],"mask":0}' \
    '{"prompt":"p","sample":1,"turn":1,"log_ratios":[0.0,"-inf"]}' \
    '{"prompt":"p","sample":2,"turn":1,"log_ratios":[0.0005,0.0015]}' >"$TMP/mrs_mask.jsonl"
"$KGYM" rejection --method mrs "$TMP/mrs_mask.jsonl" >"$TMP/out" 2>"$TMP/stats"
# sample 0: exp(0.0004) kept (the masked 1.6 is not in it); sample 1 vetoed by -inf;
# sample 2: exp(0.001) = 1.0010005 > 1.001 dropped
keeps_are "mrs: masked turn left out, -inf vetoes" "true true false false" '"turns_vetoed":1' 
expect "mrs ratio (geometric)" mismatch_ratio "1.00040008001 1.00040008001 2.06115362244e-9 1.00100050017" "$TMP/out"
"$KGYM" rejection --method mrs --mode token "$TMP/mrs_mask.jsonl" >"$TMP/out" 2>&1
if grep -q '"token_keep":\[true,false\]' "$TMP/out" && [ "$(field keep <"$TMP/out" | tail -1)" = "true" ]; then
    ok "mrs --mode token: token decisions, a turn lives while a token does"
else
    bad "mrs --mode token: $(cat "$TMP/out")"
fi
"$KGYM" rejection --method mrs --mode turn_geo "$TMP/mrs_mask.jsonl" >"$TMP/out" 2>&1
expect "mrs --mode turn_geo ratios" mismatch_ratio "1.00040008 1 2.06115362244e-09 1.0010005" "$TMP/out"
run_fails "mrs --mode unknown" 2 'expected token, turn, turn_geo, sequence, geometric' \
    "$KGYM" rejection --method mrs --mode geo "$TMP/mrs_mask.jsonl"
printf '%s\n' '{"log_ratios":[0.0,"inf"]}' >"$TMP/bad.jsonl"
run_fails "mrs: \"inf\" is not a log-ratio" 1 '"-inf"' "$KGYM" rejection --method mrs "$TMP/bad.jsonl"

# PRS geometric: sample 0's turns 0.5 and 0.32 -> sqrt(0.16) = 0.4 -> p = 1 for both
printf '%s\n' '{"task":"t","sample":0,"turn":1,"result":{"verdict":"correct","profile":{"coverage":0.5}}}' \
    '{"task":"t","sample":0,"turn":2,"result":{"verdict":"correct","profile":{"coverage":0.32}}}' \
    >"$TMP/prs_geo.jsonl"
"$KGYM" rejection --method prs "$TMP/prs_geo.jsonl" >"$TMP/out" 2>&1
expect "prs per turn" keep_probability "1 0.2" "$TMP/out"
"$KGYM" rejection --method prs --mode geometric "$TMP/prs_geo.jsonl" >"$TMP/out" 2>&1
expect "prs --mode geometric" keep_probability "1 1" "$TMP/out"
# --coverage kernels: profile.kernel_coverage 0.35 -> (0.35 - 0.3)/0.1 = 0.5, whatever the time share
printf '%s\n' '{"task":"t","sample":0,"result":{"verdict":"correct","profile":{"coverage":0.9,"kernel_coverage":0.35}}}' \
    >"$TMP/prs_k.jsonl"
"$KGYM" rejection --method prs --coverage kernels "$TMP/prs_k.jsonl" >"$TMP/out" 2>&1
expect "prs --coverage kernels" keep_probability "0.5" "$TMP/out"
run_fails "prs --coverage unknown" 2 'wants time or kernels' \
    "$KGYM" rejection --method prs --coverage count "$TMP/prs_k.jsonl"
run_fails "--mode with --method group" 2 'applies to --method prs' \
    "$KGYM" rejection --method group --mode turn "$TMP/prs_geo.jsonl"

"$KGYM" rejection --method prs --seed 3 $FIX/prs.jsonl >"$TMP/out" 2>"$TMP/stats"
expect "prs keep probabilities" keep_probability "0 1 1 1 0.5" "$TMP/out"
keeps=$(field keep <"$TMP/out" | head -4 | tr '\n' ' ')
if [ "$keeps" = "false true true true " ]; then ok "prs certain decisions"; else bad "prs decisions: $keeps"; fi
if grep -q '"correct":3' "$TMP/stats" && grep -q '"expected_correct_kept":1.5' "$TMP/stats"; then
    ok "prs stats"
else
    bad "prs stats: $(cat "$TMP/stats")"
fi
"$KGYM" rejection --method prs --seed 3 $FIX/prs.jsonl >"$TMP/out2" 2>/dev/null
if cmp -s "$TMP/out" "$TMP/out2"; then ok "prs reproducible by seed"; else bad "prs reproducible by seed"; fi

"$KGYM" rejection --method mrs --is-cap 2 $FIX/mrs.jsonl >"$TMP/out" 2>"$TMP/stats"
keeps=$(field keep <"$TMP/out" | tr '\n' ' ')
# sample 0 geo-mean 1.000125 kept; sample 1 1.015 dropped; sample 2 turn 1 vetoed (ratio e^-11)
if [ "$keeps" = "true true false false true " ]; then ok "mrs decisions"; else bad "mrs decisions: $keeps"; fi
# trajectories_kept: no live turn dropped (sample 2 lost its vetoed turn 1)
if grep -q '"turns_vetoed":1' "$TMP/stats" && grep -q '"trajectories_kept":1' "$TMP/stats"; then
    ok "mrs stats"
else
    bad "mrs stats: $(cat "$TMP/stats")"
fi
if grep -q '"is_weights":\[2.0,1.67017007902e-05\]' "$TMP/out" ||
    grep -q '"is_weights":\[2.0,1.67017007902e-5\]' "$TMP/out"; then
    ok "truncated importance weights"
else
    bad "truncated importance weights: $(sed -n 4p "$TMP/out")"
fi

# ---- curriculum --------------------------------------------------------------
state="$TMP/cur.json"
"$KGYM" curriculum --state "$state" --seed 1 --record $FIX/curriculum_outcomes.jsonl >"$TMP/out" 2>&1
# level 1: correct, wrong, correct, hacked, wrong = 0.4 in this step; one step is below
# min_steps 5, so the level-2 share stays at its start 0.1
if grep -q '"shares":\[0.9,0.1\]' "$TMP/out" && grep -q '"accuracy":\[0.4,1.0\]' "$TMP/out"; then
    ok "curriculum: one step does not move the share"
else
    bad "curriculum shares: $(cat "$TMP/out")"
fi
# shares S0 S1: the "shares" pair of the summary line in $TMP/out
shares_near() {
    want0=$1; want1=$2
    set -- $(sed -n 's/.*"shares":\[\([^]]*\)\].*/\1/p' "$TMP/out" | tr ',' ' ')
    near "$1" "$want0" 1e-12 && near "$2" "$want1" 1e-12
}
cp "$state" "$TMP/cur5.json"
for i in 2 3 4 5; do
    "$KGYM" curriculum --state "$TMP/cur5.json" --record $FIX/curriculum_outcomes.jsonl >"$TMP/out" 2>&1
done
# the fifth step: mean of five step accuracies 0.4 >= 0.4 -> 0.1 + 0.05
if shares_near 0.85 0.15; then
    ok "curriculum: step rule raises by 0.05 at the fifth step"
else
    bad "curriculum step rule: $(cat "$TMP/out")"
fi
printf '{"rule": "linear"}\n' >"$TMP/linear.json"
"$KGYM" curriculum --config "$TMP/linear.json" --record $FIX/curriculum_outcomes.jsonl >"$TMP/out" 2>&1
# linear: 0.1 + 0.4·0.4/0.4 = 0.5
if grep -q '"shares":\[0.5,0.5\]' "$TMP/out"; then ok "curriculum linear rule"; else bad "curriculum linear: $(cat "$TMP/out")"; fi
printf '{"rule": "ramp"}\n' >"$TMP/badrule.json"
run_fails "curriculum: unknown rule" 1 'expected step, linear' "$KGYM" curriculum --config "$TMP/badrule.json"
cp "$state" "$TMP/saved.json"
"$KGYM" curriculum --state "$state" --sample 20 --tasks $FIX/tasks.jsonl >"$TMP/draw1" 2>&1
cp "$TMP/saved.json" "$state"
"$KGYM" curriculum --state "$state" --sample 20 --tasks $FIX/tasks.jsonl >"$TMP/draw2" 2>&1
if [ "$(wc -l <"$TMP/draw1")" -eq 20 ] && cmp -s "$TMP/draw1" "$TMP/draw2"; then
    ok "curriculum resumes with the same draws"
else
    bad "curriculum resume: $(head -3 "$TMP/draw1") / $(head -3 "$TMP/draw2")"
fi
if ! grep -v '"level":1,"task":"level1/[12]"' "$TMP/draw1" |
    grep -v -q -e '"level":2,"task":"level2/[12]"' -e '"level":2,"task":"custom-a"'; then
    ok "curriculum tasks match their level"
else
    bad "curriculum tasks: $(cat "$TMP/draw1")"
fi
printf '{"levels": [{"start": 0.2, "end": 0.6, "target": 0.5}], "window": 4}\n' >"$TMP/cfg.json"
"$KGYM" curriculum --config "$TMP/cfg.json" >"$TMP/out" 2>&1
if grep -q '"shares":\[0.8,0.2\]' "$TMP/out"; then ok "curriculum config"; else bad "curriculum config: $(cat "$TMP/out")"; fi

# ---- bad input and usage -----------------------------------------------------
run_fails "missing reward names the line" 1 'line 2 (task level1/3, sample 1, turn 1): no "reward"' \
    "$KGYM" advantages --estimator trloo $FIX/bad_missing_reward.jsonl
run_fails "duplicate turn names both lines" 1 'line 3 .* repeats the turn of line 1' \
    "$KGYM" advantages --estimator grpo $FIX/bad_duplicate_turn.jsonl
run_fails "NaN is rejected with its line" 1 'line 2: not JSON' \
    "$KGYM" advantages --estimator trloo $FIX/bad_nan.jsonl
run_fails "unknown verdict names the line" 1 'line 2 .*unknown verdict "passed"' \
    "$KGYM" metrics $FIX/bad_verdict.jsonl
run_fails "staged credit is not taken for an RL reward" 1 'pass --fn NAME' \
    "$KGYM" advantages --estimator trloo $FIX/bench_cpu.jsonl
run_fails "rloo refuses multi-turn data" 1 'rloo is single-turn' \
    "$KGYM" advantages --estimator rloo $FIX/trajectories.jsonl
run_fails "prs needs coverage for correct turns" 1 'profile.coverage' \
    "$KGYM" rejection --method prs $FIX/bench_cpu.jsonl
run_fails "estimator required" 2 'estimator' "$KGYM" advantages $FIX/trajectories.jsonl
run_fails "unknown estimator" 2 'unknown estimator "ppo"' \
    "$KGYM" advantages --estimator ppo $FIX/trajectories.jsonl
run_fails "unknown reward constant" 2 'unknown reward constant "bogus"' \
    "$KGYM" reward --fn drkernel --set bogus=1 $FIX/multi_turn_results.jsonl
run_fails "missing file" 1 'cannot open' "$KGYM" metrics "$TMP/no-such-file.jsonl"
# Options (getopt_long, as the other commands): "--name value" and "--name=value", each mistake named.
run_fails "option without its value" 2 'option --estimator needs a value' "$KGYM" advantages --estimator
run_fails "unknown option" 2 'unknown option --bogus' "$KGYM" reward --fn staged --bogus 1 $FIX/bench_cpu.jsonl
run_fails "unknown short option" 2 'unknown option -x' "$KGYM" metrics -x $FIX/bench_cpu.jsonl
run_fails "a flag given a value" 2 'option --std-normalize=1 takes no value' \
    "$KGYM" advantages --estimator grpo --std-normalize=1 $FIX/single_turn.jsonl
run_fails "a second input" 2 'unexpected argument' "$KGYM" reward --fn staged $FIX/bench_cpu.jsonl $FIX/bench_cpu.jsonl
run_fails "curriculum takes no input argument" 2 'outcomes go in --record' "$KGYM" curriculum extra
"$KGYM" reward --fn=staged $FIX/bench_cpu.jsonl >"$TMP/eq" 2>&1
"$KGYM" reward $FIX/bench_cpu.jsonl --fn staged >"$TMP/sp" 2>&1
if [ -s "$TMP/eq" ] && cmp -s "$TMP/eq" "$TMP/sp"; then ok "--fn=staged, and options after the input, as --fn staged"
else bad "--fn=staged vs --fn staged: $(head -c 200 "$TMP/eq")"; fi
for sub in reward advantages rejection metrics curriculum; do
    run_ok "$sub --help" "$KGYM" $sub --help
done
run_ok "stdin input" sh -c "\"$KGYM\" metrics <$FIX/bench_cpu.jsonl"

# ---- an output that cannot be written is an error ---------------------------
# Every command's printed output is flushed and closed before it exits (src/cli/main.c, finished): to a full
# device it fails with a message, never exit 0 over a truncated result.  Every command that prints is here:
# each one's --help, and the real output of each that needs no model server (eval's of a reply without code
# needs no Python either: it stops at extraction).
if [ -w /dev/full ]; then
    printf 'I cannot write this kernel.\n' >"$TMP/refusal.txt"
    E=examples/01_scaled_residual_add
    for cmd in "version" "--help" "eval --help" "bench --help" "extract --help" "reward --help" \
        "advantages --help" "rejection --help" "metrics --help" "serve --help" "worker --help" "curriculum --help" \
        "rollout --help" \
        "reward --fn staged $FIX/bench_cpu.jsonl" "metrics $FIX/bench_cpu.jsonl" \
        "metrics --format json $FIX/bench_cpu.jsonl" "advantages --estimator trloo $FIX/trajectories.jsonl" \
        "rejection --method group $TMP/groups.jsonl" "curriculum --config $TMP/linear.json --record $FIX/curriculum_outcomes.jsonl" \
        "extract $E/correct.py" "eval --device cpu --task $E/task.py --kernel $TMP/refusal.txt" \
        "eval --device cpu --task $E/task.py --kernel $TMP/refusal.txt --json"; do
        # shellcheck disable=SC2086
        "$KGYM" $cmd >/dev/full 2>"$TMP/err"
        rc=$?
        if [ "$rc" -ne 0 ] && grep -q "could not write the standard output" "$TMP/err"; then
            ok "kgym $cmd > /dev/full: exit $rc with a message"
        else
            bad "kgym $cmd > /dev/full: exit $rc, stderr: $(head -c 200 "$TMP/err")"
        fi
    done
    # Files a command writes are checked as well: an unwritable --plot is an error naming it.
    "$KGYM" metrics --plot /dev/full $FIX/bench_cpu.jsonl >/dev/null 2>"$TMP/err"
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q "cannot write /dev/full" "$TMP/err"; then
        ok "kgym metrics --plot /dev/full: exit $rc with a message"
    else
        bad "kgym metrics --plot /dev/full: exit $rc, stderr: $(head -c 200 "$TMP/err")"
    fi
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
