#!/bin/sh
# bench/gpu_report.py's timing-precision table (what `bench/grpo.sh` pairs and `bench/two_benches.sh` print to say
# whether a change moved the timing): counts and ratios from made-up runs whose answers are known, read from
# `kgym bench --json` documents and from --out lines in another order, exact twins (one file listed twice) included.
. tests/integration/lib.sh

"$PY" - "$TMP" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
def res(path, speedup, remeasured=False, noisy=False, cv=0.001):
    return {"candidate": {"path": path}, "verdict": "correct",
            "timing": {"speedup": speedup, "remeasured": remeasured, "noisy": noisy, "round_cv": cv}}
base = [res("a.py", 2.0), res("a.py", 2.0), res("b.py", 1.0, cv=0.004), res("c.py", 4.0),
        {"candidate": {"path": "d.py"}, "verdict": "incorrect", "timing": None,
         "correctness": {"variants": [], "not_run": ["signed", "size_large"]}}]
# The tiny run's steps (stages[tiny_run].spent_ms) in new judges (a.py#1, b.py: process.judge_served 0) and a
# kept one (a.py#2).
for r, served, spent in ((base[0], 0, {"reference": 600.0, "call": 200.0}), (base[1], 1, {"reference": 20.0, "call": 30.0}),
                         (base[2], 0, {"reference": 400.0, "call": 100.0})):
    r["process"] = {"judge_served": served}
    r["stages"] = [{"name": "tiny_run", "status": "ok", "ms": 1.0, "detail": "", "spent_ms": spent}]
head = [res("c.py", 4.4, remeasured=True, noisy=True, cv=0.2), res("a.py", 2.02), res("b.py", 1.0),
        res("a.py", 2.0)]
# kgym's checks (timing.checks): c.py's first asked for a round on the device-wide clock, its second for one more
# (cv), its third said no; a.py#1's one check said no (not counted).
head[0]["timing"]["checks"] = [{"rounds": 2, "more": True, "reason": "disagree", "clock_basis": "device"},
                               {"rounds": 3, "more": True, "reason": "cv", "clock_basis": "stream"},
                               {"rounds": 4, "more": False, "reason": "stable", "clock_basis": "stream"}]
head[1]["timing"]["checks"] = [{"rounds": 2, "more": False, "reason": "stable", "clock_basis": "stream"}]
# c.py's figure ended on the device-wide clock (the column "device clock"); every other result is on the stream's
# or says nothing (base).
head[0]["timing"]["clock_basis"] = "device"
for r in head[1:]:
    r["timing"]["clock_basis"] = "stream"
# By task (task.id): head's two a.py evaluations are level1/1's, the first in a new judge; their variants'
# candidate_ms (full size: base, size_large; small_odd; the others) and the judge's steps but the call.
head[1]["task"] = head[3]["task"] = {"id": "level1/1"}
head[1]["process"], head[3]["process"] = {"judge_served": 0}, {"judge_served": 1}
head[1]["correctness"] = {"variants": [
    {"name": "base", "candidate_ms": 1000.0, "spent_ms": {"call": 1000.0, "inputs": 200.0, "compare": 300.0}},
    {"name": "small_odd", "candidate_ms": 2000.0, "spent_ms": {"call": 2000.0}},
    {"name": "seed_1", "candidate_ms": 500.0, "spent_ms": {"tolerance": 100.0}}]}
head[3]["correctness"] = {"variants": [{"name": "size_large", "candidate_ms": 1000.0, "spent_ms": {"call": 900.0}}]}
json.dump({"summary": {"wall_s": 60}, "results": [{"label": r["candidate"]["path"], "result": r} for r in base]},
          open(os.path.join(d, "base.json"), "w"))
json.dump({"summary": {"wall_s": 50}, "results": [{"label": r["candidate"]["path"], "result": r} for r in head]},
          open(os.path.join(d, "head.json"), "w"))
with open(os.path.join(d, "head.jsonl"), "w") as f:
    for r in head:
        f.write(json.dumps(r) + "\n")
    # An answer from a twin (bench --dedup: its pair's result again, cached_from on the line) counts for nothing,
    # and a last line cut short (a run killed while writing it) is left out.
    f.write(json.dumps(dict(res("c.py", 9.0), cached_from={"pair": 4, "label": "c.py"})) + "\n")
    f.write(json.dumps(res("b.py", 7.0))[:40])
PYEOF
"$PY" bench/gpu_report.py timing-precision base="$TMP/base.json" head="$TMP/head.jsonl" >"$TMP/out" 2>&1
row() { grep "^| $1 " "$TMP/out" | tr -d ' ' ; }
# base: 4 timed (d.py untimed), none on the device-wide clock, none re-measured, CVs 0.001 x3 and 0.004; head: one
# on the device-wide clock (c.py), a.py#1 2.02/2.0 = 1%, a.py#2 0%, b.py 0%, c.py 4.4/4.0 = 10%: median 0.50%, max
# 10.00%, one re-measured (kgym's checks: a disagreement on the device-wide clock, then the CV) and noisy, round CV
# max 0.2.
[ "$(row base)" = "|base|4|0|0|-|0|0.0010|0.0040|-|" ] && ok "timing-precision: the yardstick's own row" \
    || bad "the base row" "$(cat "$TMP/out")"
[ "$(row head)" = "|head|4|1|1|cv1,disagree(device)1|1|0.0010|0.2000|0.50%,10.00%(4)|" ] \
    && ok "timing-precision: re-measured, round CV and speedup ratios against the first run, twins paired by file" \
    || bad "the head row" "$(cat "$TMP/out")"
# grpo's report (bench/grpo.sh pairs): the goal lines say whether the head's timing moved beyond 2% of the base's.
"$PY" bench/gpu_report.py grpo --mix mix.jsonl --jobs 6 base="$TMP/base.json" head="$TMP/head.json" >"$TMP/grpo" 2>&1
cp "$TMP/grpo" "$TMP/grpo_pair"
grep -q "MISSED every head run's speedups within 2% of base's .*largest change 10.00% over 4 timed" "$TMP/grpo" \
    && ok "grpo report: a head whose speedups moved 10% misses the timing goal" || bad "grpo's timing goal" "$(cat "$TMP/grpo")"
# head's level1/1 (a.py twice, one in a new judge; base's results name no task): calls at full size 1.0 + 1.0 s,
# small_odd 2.0, seed_1 0.5; the judge's steps but the calls 0.2 + 0.3 + 0.1 s.
grep -q "^| level1/1 *| *2 | *1 | *2.0 | *2.0 | *0.5 | *0.6 |$" "$TMP/grpo" \
    && ok "grpo report: by task, the candidates' calls by kind of variant and the judge's steps" \
    || bad "grpo's by-task table" "$(cat "$TMP/grpo")"
"$PY" bench/gpu_report.py grpo --mix mix.jsonl --jobs 6 base="$TMP/base.json" head="$TMP/base.json" >"$TMP/grpo" 2>&1
grep -q "MET every head run's speedups within 2% of base's .*largest change 0.00%" "$TMP/grpo" \
    && ok "grpo report: the same run twice meets it" || bad "grpo's timing goal, same run" "$(cat "$TMP/grpo")"
grep -q "^base: the tiny run's steps in 2 new judges, mean ms: reference 500.0, call 150.0$" "$TMP/grpo" &&
    grep -q "^base: the tiny run's steps in 1 kept judges, mean ms: reference 20.0, call 30.0$" "$TMP/grpo" \
    && ok "grpo report: the tiny run's steps, new judges apart from kept ones" || bad "grpo's tiny-run steps" "$(cat "$TMP/grpo")"
# The variants a stopped evaluation did not run (correctness.not_run: d.py's two, one task) are counted per task.
grep -q "^| base .* 0.0 computed, 0.0 held, 2.0 not run " "$TMP/grpo" \
    && ok "grpo report: the variants not run, per task" || bad "grpo's not-run count" "$(cat "$TMP/grpo")"
# The where-table's last column: the calls of small_odd, the first variant at sizes not multiples of 16, which holds
# the second Triton compile (head's a.py: 2.0 s; base has none).
grep "^| head " "$TMP/grpo_pair" | awk -F'|' '{ gsub(/ /, "", $(NF-1)); print $(NF-1) }' | grep -qx "2.0" \
    && ok "grpo report: the where-table's small_odd calls" || bad "grpo's small_odd calls" "$(cat "$TMP/grpo_pair")"
# --head-jobs (bench/grpo.sh --head-jobs: the pair measures the number of jobs) is said in the report's first line.
"$PY" bench/gpu_report.py grpo --mix mix.jsonl --jobs 6 --head-jobs 10 base="$TMP/base.json" head="$TMP/base.json" >"$TMP/grpo" 2>&1
head -1 "$TMP/grpo" | grep -q ", 6 jobs (head: 10)$" && ok "grpo report: the head's own number of jobs is named" \
    || bad "grpo's --head-jobs line" "$(head -3 "$TMP/grpo")"
"$PY" bench/gpu_report.py grpo --mix mix.jsonl --jobs 6 --head-jobs 6 base="$TMP/base.json" head="$TMP/base.json" >"$TMP/grpo" 2>&1
head -1 "$TMP/grpo" | grep -q ", 6 jobs$" && ok "grpo report: equal jobs named once" || bad "grpo's equal jobs line" "$(head -3 "$TMP/grpo")"
"$PY" bench/gpu_report.py timing-precision base="$TMP/missing.json" >"$TMP/err" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "missing.json: neither" "$TMP/err" && ok "timing-precision: an unreadable run is an error naming it" \
    || bad "a missing run: rc $rc" "$(cat "$TMP/err")"
"$PY" bench/gpu_report.py timing-precision base.json >"$TMP/err" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "NAME=FILE" "$TMP/err" && ok "timing-precision: a run without its name is refused" \
    || bad "a run without NAME=: rc $rc" "$(cat "$TMP/err")"
# two-rounds: what --timing-rounds 2 --timing-agree X would have said of three-round runs.  a.py's first two rounds
# agree within 0.2% (mean 2.002, the run's 2.0: 0.1%), b.py's lie 1% apart (a third needed), c.py has two rounds
# only, d.py was not timed, and a round whose warm-up broke counts nowhere (e.py: three rounds, one of them broken).
"$PY" - "$TMP" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
def rnd(s, ms, broken=False):
    x = {"speedup": s, "supervisor_ms": ms}
    if broken:
        x["warm_broken"] = {"reasons": 4, "warm_reasons": 0}
    return x
def res(path, final, rounds):
    return {"candidate": {"path": path}, "verdict": "correct", "timing": {"speedup": final, "rounds": rounds}}
rs = [res("a.py", 2.0, [rnd(2.0, 100), rnd(2.004, 100), rnd(2.0, 100)]),
      res("b.py", 1.0, [rnd(1.0, 100), rnd(1.01, 100), rnd(1.0, 100)]),
      res("c.py", 3.0, [rnd(3.0, 100), rnd(3.0, 100)]),
      {"candidate": {"path": "d.py"}, "verdict": "incorrect", "timing": None},
      res("e.py", 1.0, [rnd(1.0, 100), rnd(1.2, 100, broken=True), rnd(1.0, 100)])]
json.dump({"summary": {}, "results": [{"label": r["candidate"]["path"], "result": r} for r in rs]},
          open(os.path.join(d, "three.json"), "w"))
PYEOF
"$PY" bench/gpu_report.py two-rounds --agree 0.003 run="$TMP/three.json" >"$TMP/two" 2>&1
[ "$(grep '^| run  *| *[0-9]' "$TMP/two" | tr -d ' ')" = "|run|2|1|0.100%|0.1of0.6s|" ] \
    && ok "two-rounds: which candidates two rounds would have ended, their largest change, the time saved" \
    || bad "two-rounds" "$(cat "$TMP/two")"
# coverage: each run's profile coverage against the first run's, pair by pair.  a.py moves 0.02 and stays above the
# floor; b.py moves 0.04 and crosses it (0.52 -> 0.48); c.py has no profile in the head; d.py's label differs.
"$PY" - "$TMP" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
def run(name, covs):
    rs = [{"label": lab, "result": {"verdict": "correct", "profile": None if c is None else {"coverage": c}}}
          for lab, c in covs]
    json.dump({"summary": {}, "results": rs}, open(os.path.join(d, name), "w"))
run("cov_base.json", [("a.py", 0.90), ("b.py", 0.52), ("c.py", 0.70), ("d.py", 0.60)])
run("cov_head.json", [("a.py", 0.88), ("b.py", 0.48), ("c.py", None), ("e.py", 0.10)])
PYEOF
"$PY" bench/gpu_report.py coverage base="$TMP/cov_base.json" head="$TMP/cov_head.json" >"$TMP/cov" 2>&1
[ "$(grep '^| head ' "$TMP/cov" | tr -d ' ')" = "|head|2|0.0300|0.0400(b.py)|1|" ] \
    && ok "coverage: pairs profiled in both, the median and largest move, the one across the floor" \
    || bad "coverage" "$(cat "$TMP/cov")"

# bench/fleet.py's report takes issue 38's ratio apart: GPUs x evaluations' length x slots busy, which multiply
# back to the ratio.  One GPU: 2 slots, four evaluations of 1.0 s, the last ending 2.5 s after the submit (busy
# 4 / (2 x 2.5) = 80%); two GPUs: 2 slots each, the same four at 1.25 s, ending at 1.6 s (busy 5 / (4 x 1.6) =
# 78.125%): ratio 2.5 / 1.6 = 1.5625 = 2 x 0.8 x 0.9765625.
"$PY" - "$TMP" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
def run(name, gpus, wall_ms, ends, pids):
    recs = [{"id": f"j{i}", "index": i, "status": "done", "verdict": "correct", "wall_ms": wall_ms,
             "finished_at": 100.0 + ends[i], "worker": f"h:{pids[i % len(pids)]}:cpu#{i}"} for i in range(4)]
    json.dump({"name": name, "gpus": gpus, "workers_per_gpu": 2, "device": "cpu", "t_submit": 100.0,
               "records": recs, "slots": {str(p): f"cpu{k}" for k, p in enumerate(pids)}, "list": "mix.jsonl",
               "jobs": 4, "acked": [{"id": r["id"]} for r in recs], "listed": [r["id"] for r in recs],
               "done_events": [[r["id"], 0] for r in recs], "counts": {"done": 4}},
              open(os.path.join(d, f"fleet_{name}.json"), "w"))
run("one", ["0"], 1000, [1.0, 1.0, 2.0, 2.5], [101])
run("all", ["0", "1"], 1250, [1.25, 1.25, 1.3, 1.6], [201, 202])
PYEOF
"$PY" bench/fleet.py report --out "$TMP/fleet_summary.json" one="$TMP/fleet_one.json" all="$TMP/fleet_all.json" \
    >"$TMP/fleet" 2>&1 || bad "fleet.py report" "$(cat "$TMP/fleet")"
[ "$("$PY" -c "import json,sys; r=json.load(open(sys.argv[1]))['ratio']; p=r['parts']
print(round(r['answers_per_hour'], 4), p['gpus'], round(p['evaluation_length'], 4), round(p['slots_busy'], 7),
      round(p['product'], 4))" "$TMP/fleet_summary.json")" = "1.5625 2.0 0.8 0.9765625 1.5625" ] \
    && grep -q "slots busy: one 80.0%, all 78.1%" "$TMP/fleet" \
    && ok "fleet report: the ratio taken apart into GPUs, evaluations' length and slots busy, multiplying back" \
    || bad "fleet report's ratio parts" "$(cat "$TMP/fleet")"

# driver-counts: two judge jobs' counts summed, and the operators and host reads by step per job.
mkdir -p "$TMP/jp"
printf '{"device_blocks_made": 3, "segments_allocated": null, "aten_ops": {"compare": 10, "tolerance": 4}, "host_reads": {"compare": 2}}\n' >"$TMP/jp/judge-1-1.json"
printf '{"device_blocks_made": 5, "segments_allocated": null, "aten_ops": {"compare": 30}, "host_reads": {"tolerance": 4}}\n' >"$TMP/jp/judge-1-2.json"
"$PY" bench/gpu_report.py driver-counts "$TMP/jp" >"$TMP/dc" 2>&1
grep -q "^| device_blocks_made | 8 | 4.0 | 2 |" "$TMP/dc" && grep -q "^| compare | 20.0 | 1.0 |" "$TMP/dc" \
    && grep -q "^| tolerance | 2.0 | 2.0 |" "$TMP/dc" && grep -q "^| all | 22.0 | 3.0 |" "$TMP/dc" \
    && ! grep -q "^| aten_ops |" "$TMP/dc" \
    && ok "driver-counts: counts summed, operators and host reads by step per judge job" \
    || bad "driver-counts" "$(cat "$TMP/dc")"
finish
