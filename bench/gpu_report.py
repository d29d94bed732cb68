#!/usr/bin/env python3
"""Analysis for the GPU benchmarks (timing_stability.sh, throughput.sh, concurrency.sh).

The shell drivers run `kgym bench --json` and save its stdout; everything that reads those files lives here, so
the drivers stay thin and the analysis can be checked on a machine without a GPU by feeding it hand-made JSON.
Standard library only: the GPU machine's python3 has torch and numpy, the dev venv has torch, neither is needed.

    gpu_report.py gpu-check [--device cuda:N]          exit 1 with a reason unless torch sees a GPU
    gpu_report.py timing-stability --pairs P --do-bench D RUN.json...
    gpu_report.py throughput --jobs N RUN.json
    gpu_report.py concurrency --pairs P --jobs-a 1 --jobs-b 8 RUN_A.json RUN_B.json
    gpu_report.py window NAME=RUN.json...             where the exclusive windows went (per timed evaluation)
    gpu_report.py two-rounds [--agree X] NAME=RUN.json...  what two rounds (--timing-agree X) would have said
    gpu_report.py coverage [--floor F] NAME=RUN.json...    profile coverage against the first run's, pair by pair
    gpu_report.py make-mix > bench/throughput_mix.jsonl

Each report prints markdown tables (readable as text) and, with --write-doc FILE, replaces its own section of FILE
between <!-- bench:NAME --> and <!-- /bench:NAME --> (appended at the end when the markers are missing).

Fields relied on (docs/result-schema.md plus the timing protocol being added): kgym bench --json stdout is
{"summary": {...}, "results": [{"label", "candidate", "result": RESULT | null, "error", "cached_from"}]} with results
in input order ("cached_from": {"pair", "label"} when `kgym bench --dedup` answered the pair with an earlier exact
twin's result, unevaluated; null or absent otherwise); RESULT.verdict, .wall_ms, .stages[{name,status,ms}], .task.id,
.candidate.path, .timing.{speedup, candidate_ms.median, reference_ms.median, cv, noisy, rounds_run, remeasured, speedup_ci,
reference_mode, reference_cached, gpu}.  Missing optional fields print as "-".
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import math
import os
import statistics
import subprocess
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

GOAL_CV = 0.02          # median CV of the speedup across separate evaluations
GOAL_AGREE = 0.03       # |kgym / do_bench - 1| per problem
GOAL_EVAL_PER_HOUR = 2000
GOAL_GRPO_PER_HOUR = 9000  # issue 36: one H200, the GRPO-shaped mix
GOAL_TIMING_CHANGE = 0.02  # a head run's speedups against the base run's: timing within 2% of the truth
GOAL_CONCURRENCY = 0.03  # median |speedup(jobs N) / speedup(jobs 1) - 1|


# ------------------------------------------------------------------------------------------- input


class ReportError(Exception):
    """Input the report cannot use; the message says which file and why."""


def read_pairs(path):
    """The pairs of a kgym JSONL list (comment lines start with '#', as kgym's own loader allows)."""
    pairs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                pairs.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ReportError(f"{path} line {n}: not JSON ({e})") from None
    if not pairs:
        raise ReportError(f"{path} holds no pairs")
    return pairs


def load_run(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ReportError(f"{path}: not the JSON of `kgym bench --json` ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list) or not isinstance(doc.get("summary"), dict):
        raise ReportError(f"{path}: expected {{\"summary\": ..., \"results\": [...]}} from `kgym bench --json`")
    return doc


def get(obj, *path):
    """obj[path[0]][path[1]]... or None when any step is missing (fields of the new protocol may be absent)."""
    for key in path:
        if isinstance(obj, dict):
            obj = obj.get(key)
        elif isinstance(obj, list) and isinstance(key, int) and -len(obj) <= key < len(obj):
            obj = obj[key]
        else:
            return None
    return obj


def num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def pair_name(pair):
    return pair.get("kernelbench") or pair.get("task") or "?"


def _same_file(a, b):
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (TypeError, ValueError):
        return False


def match_results(doc, pairs, path):
    """The run's entries as (pair index, entry), checking the order against the list.

    kgym bench keeps input order; a run over the list repeated k times maps entry i to pair i % len(pairs).
    The check uses the candidate path (and the KernelBench id when the result has one) so that a run made from
    another list is refused rather than silently mislabelled."""
    out = []
    for i, entry in enumerate(doc["results"]):
        k = i % len(pairs)
        pair = pairs[k]
        cand = entry.get("candidate") or get(entry, "result", "candidate", "path")
        if cand and pair.get("candidate") and not _same_file(cand, pair["candidate"]):
            raise ReportError(f"{path}: result {i} is for {cand}, but the list has {pair['candidate']} there "
                              "(was the run made from another list?)")
        task_id = get(entry, "result", "task", "id")
        if task_id and pair.get("kernelbench") and task_id != pair["kernelbench"]:
            raise ReportError(f"{path}: result {i} is for task {task_id}, the list has {pair['kernelbench']}")
        out.append((k, entry))
    if len(doc["results"]) % len(pairs):
        raise ReportError(f"{path}: {len(doc['results'])} results is not a whole number of passes over "
                          f"{len(pairs)} pairs")
    return out


def timed(entry):
    """(speedup, timing) of a correct, timed evaluation, or (None, why-not text)."""
    r = entry.get("result")
    if not isinstance(r, dict):
        return None, "not evaluated: " + str(entry.get("error") or "no result")
    if r.get("verdict") != "correct":
        end = get(r, "process", "end")
        return None, f"verdict {r.get('verdict')}" + (f" ({end})" if end and end != "completed" else "")
    t = r.get("timing")
    if not isinstance(t, dict):
        return None, "no timing"
    s = num(t.get("speedup"))
    if s is None or s <= 0:
        return None, "timing without a speedup"
    return s, t


def gpu_name(docs, fallback):
    for doc in docs:
        for e in doc["results"]:
            g = get(e, "result", "timing", "gpu")
            if isinstance(g, str) and g:
                return g
    return fallback or "unknown GPU"


def versions():
    """torch and triton versions from package metadata (no import: works without a GPU or CUDA)."""
    try:
        from importlib import metadata
    except ImportError:
        return ""
    parts = []
    for pkg in ("torch", "triton"):
        try:
            parts.append(f"{pkg} {metadata.version(pkg)}")
        except Exception:  # noqa: BLE001 - not installed under that name: leave it out
            pass
    return ", ".join(parts)


def cv(values):
    """Sample coefficient of variation (stdev with n-1 / mean); None below two values."""
    if len(values) < 2:
        return None
    m = statistics.fmean(values)
    return statistics.stdev(values) / m if m else None


# ------------------------------------------------------------------------------------------ output


def fmt(x, spec=".3f", none="-"):
    x = num(x)
    return none if x is None else format(x, spec)


def pct(x, none="-"):
    x = num(x)
    return none if x is None else f"{100 * x:.2f}%"


def md_table(headers, rows):
    """A markdown table; numbers right-aligned so the text output lines up too."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in r] for r in rows]
    width = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    right = [all(_numeric(r[i]) for r in cells[1:]) and len(cells) > 1 for i in range(len(headers))]

    def line(r):
        return "| " + " | ".join(c.rjust(w) if ra else c.ljust(w) for c, w, ra in zip(r, width, right)) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if ra else ("-" * (w + 2)) for w, ra in zip(width, right)) + "|"
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def _numeric(s):
    s = s.strip().rstrip("%x")
    if s in ("-", "—", ""):
        return True
    try:
        float(s.replace(",", ""))
        return True
    except ValueError:
        return False


def verdict_line(met, text, complete=True):
    """One goal's line.  INCOMPLETE: what was measured meets the goal, but some problems have no figure, so the
    goal is not shown to hold (a missing figure must never read as a pass).  met=None: nothing to judge."""
    word = "NOT MEASURED" if met is None else "MISSED" if not met else "MET" if complete else "INCOMPLETE"
    return f"- {word} {text}"


def provenance(args, gpu):
    """The line that says when, where and with what a section was measured."""
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    bits = [f"Measured {date} on {gpu}"]
    v = versions()
    if v:
        bits.append(v)
    if getattr(args, "commit", None):
        bits.append(f"kgym {args.commit}")
    return "; ".join(bits) + "."


def write_doc_section(doc_path, name, body):
    """Replace the text between the section's markers (markers included) or append the section.

    Only this function writes the doc, and only what lies between its own markers, so other sections and
    hand-written text around them survive; the file is rewritten through a temporary file and a rename."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    try:
        with open(doc_path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        text = ""
    i, j = text.find(begin), text.find(end)
    if (i < 0) != (j < 0) or (i >= 0 and j < i) or text.count(begin) > 1 or text.count(end) > 1:
        raise ReportError(f"{doc_path}: the markers {begin} ... {end} are unbalanced; fix them by hand "
                          "(nothing was written)")
    if i >= 0:
        text = text[:i] + block + text[j + len(end):]
    else:
        text = text.rstrip("\n") + ("\n\n" if text.strip() else "") + block + "\n"
    tmp = doc_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, doc_path)
    print(f"\nwrote section bench:{name} of {doc_path}")


# ------------------------------------------------------------------------------- timing stability


def read_do_bench(path):
    """do_bench_agreement.py's JSON lines as {(task, candidate realpath): ms or None}."""
    out = {}
    if not path or not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue  # the script only writes JSON lines to stdout, but be lenient with stray output
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue
            key = (d.get("kernelbench") or d.get("task"), os.path.realpath(d.get("candidate") or ""))
            out[key] = (num(d.get("do_bench_ms")), d.get("error"))
    return out


def report_timing_stability(args):
    pairs = read_pairs(args.pairs)
    docs = [load_run(p) for p in args.runs]
    n_runs = len(docs)
    # per pair: one list of (speedup or None, timing or why) per run
    per = [[] for _ in pairs]
    for path, doc in zip(args.runs, docs):
        seen = [0] * len(pairs)
        for k, entry in match_results(doc, pairs, path):
            if seen[k]:
                continue  # a run over a repeated list: only the first pass counts as "this run"
            seen[k] = 1
            per[k].append(timed(entry))
    dob = read_do_bench(args.do_bench)

    rows, detail, cvs, agree, missing = [], [], [], [], []
    for k, pair in enumerate(pairs):
        name = pair_name(pair)
        speeds = [s for s, _ in per[k] if s is not None]
        timings = [t for s, t in per[k] if s is not None]
        c = cv(speeds) if len(speeds) == n_runs else None
        if c is not None:
            cvs.append((c, name))
        else:
            why = sorted({t for s, t in per[k] if s is None})
            missing.append(f"{name}: {len(speeds)} of {n_runs} runs timed" + (f" ({'; '.join(why)})" if why else ""))
        cand_ms = [num(get(t, "candidate_ms", "median")) for t in timings]
        cand_ms = [x for x in cand_ms if x is not None]
        kg = statistics.median(cand_ms) if cand_ms else None
        db, db_err = dob.get((name, os.path.realpath(pair.get("candidate") or "")), (None, "not measured"))
        ratio = kg / db if kg is not None and db else None
        if ratio is not None:
            agree.append((abs(ratio - 1), name))
        else:
            missing.append(f"{name}: no kgym/do_bench ratio (" +
                           ("kgym not timed" if kg is None else f"do_bench: {db_err or 'not measured'}") + ")")
        run_cells = []
        for s, t in per[k]:
            run_cells.append(fmt(s) if s is not None else "—")
        run_cells += ["—"] * (n_runs - len(run_cells))
        noisy = sum(1 for t in timings if t.get("noisy") is True)
        rows.append([name, pair.get("kind", "")] + run_cells +
                    [pct(c), fmt(kg), fmt(db), fmt(ratio, ".3f"), f"{noisy}/{len(timings)}" if timings else "-"])
        for i, (s, t) in enumerate(per[k]):
            if s is None:
                detail.append([name, i + 1, "-", "-", "-", "-", "-", "-", "-", t])
                continue
            ci = t.get("speedup_ci")
            ci_txt = (f"{fmt(ci[0])}–{fmt(ci[1])}" if isinstance(ci, list) and len(ci) == 2 else "-")
            detail.append([name, i + 1, fmt(s), ci_txt, pct(t.get("cv")), pct(t.get("round_cv")),
                           fmt(get(t, "reference_ms", "median")),
                           fmt(get(t, "candidate_ms", "median")),
                           f"{t.get('rounds_run', '-')}/{t.get('remeasured', '-')}",
                           ", ".join(x for x in [t.get("reference_mode") or "",
                                                 "ref cached" if t.get("reference_cached") else "",
                                                 "noisy" if t.get("noisy") else ""] if x)])

    headers = ["problem", "kind"] + [f"speedup {i + 1}" for i in range(n_runs)] + \
              ["CV", "kgym cand ms", "do_bench ms", "kgym/do_bench", "noisy"]
    table = md_table(headers, rows)
    med_cv = statistics.median([c for c, _ in cvs]) if cvs else None
    max_cv = max(cvs) if cvs else None
    med_ag = statistics.median([a for a, _ in agree]) if agree else None
    max_ag = max(agree) if agree else None
    complete_cv = len(cvs) == len(pairs)
    complete_ag = len(agree) == len(pairs)
    goals = [
        verdict_line(None if med_cv is None else med_cv <= GOAL_CV,
                     f"median CV of the speedup across {n_runs} evaluations ≤ {GOAL_CV:.0%}: "
                     f"{pct(med_cv)} (max {pct(max_cv[0]) if max_cv else '-'}"
                     f"{', ' + max_cv[1] if max_cv else ''}; {len(cvs)} of {len(pairs)} problems timed in every run)",
                     complete_cv),
        verdict_line(None if max_ag is None else max_ag[0] <= GOAL_AGREE,
                     f"|kgym/do_bench − 1| ≤ {GOAL_AGREE:.0%} on every problem: median {pct(med_ag)}, "
                     f"max {pct(max_ag[0]) if max_ag else '-'}{', ' + max_ag[1] if max_ag else ''}"
                     f" ({sum(1 for a, _ in agree if a > GOAL_AGREE)} over; {len(agree)} of {len(pairs)} compared)",
                     complete_ag),
    ]
    gpu = gpu_name(docs, args.gpu_name)

    print(f"timing stability: {len(pairs)} problems × {n_runs} separate `kgym bench` runs on {gpu}\n")
    print(table)
    print("\nper evaluation (within-evaluation figures from the timing protocol):\n")
    print(md_table(["problem", "run", "speedup", "95% CI", "cand CV", "round CV", "ref ms", "cand ms",
                    "rounds/remeasured", "notes"], detail))
    if missing:
        print("\nincomplete:\n" + "\n".join(f"- {m}" for m in missing))
    print("\ngoals:\n" + "\n".join(goals))

    if args.write_doc:
        body = "\n".join([
            "## Timing stability and agreement with triton.testing.do_bench", "",
            f"{provenance(args, gpu)} Command: `{args.command}`.", "",
            f"Each problem's honest candidate evaluated in {n_runs} separate `kgym bench` processes (full protocol); "
            "speedup i = timing.speedup of run i; CV = stdev/mean of those speedups; kgym cand ms = median over "
            "the runs of timing.candidate_ms.median; do_bench ms = `triton.testing.do_bench(rep=2000, "
            "return_mode=\"median\")` on the same candidate and full-size base inputs "
            "(`bench/do_bench_agreement.py`); noisy = runs whose timing was flagged noisy.", "",
            table, "",
            *goals,
            *([""] + ["Incomplete: " + "; ".join(missing) + "."] if missing else []),
        ])
        write_doc_section(args.write_doc, "timing-stability", body)
    return 0


# ------------------------------------------------------------------------------------- throughput


def report_throughput(args):
    doc = load_run(args.run)
    s = doc["summary"]
    # A pair answered from an exact twin (--dedup: "cached_from") repeats its twin's stages: not an evaluation.
    results = [e.get("result") for e in doc["results"] if not e.get("cached_from")]
    done = [r for r in results if isinstance(r, dict)]
    wall_s = num(s.get("wall_s"))
    evaluated = num(s.get("evaluated"))
    if evaluated is None:
        evaluated = len(done)
    # One GPU per run (kgym bench --device cuda uses one device), so evaluations per GPU-hour is evaluations per
    # hour divided by --gpus (1 unless the driver was told otherwise).
    per_gpu_hour = evaluated * 3600.0 / wall_s / args.gpus if wall_s else None

    stages = {}  # name -> [count that ran, sum ms]
    order = []
    walls = []
    for r in done:
        w = num(r.get("wall_ms"))
        if w is not None:
            walls.append(w)
        for st in r.get("stages") or []:
            name = st.get("name")
            if name not in stages:
                stages[name] = [0, 0.0]
                order.append(name)
            if st.get("status") != "skipped":
                stages[name][0] += 1
                stages[name][1] += num(st.get("ms")) or 0.0
    total_wall = sum(walls)
    stage_sum = sum(v[1] for v in stages.values())
    stage_rows = [[n, stages[n][0], fmt(stages[n][1] / 1000, ",.1f"),
                   fmt(stages[n][1] / stages[n][0], ",.0f") if stages[n][0] else "-",
                   pct(stages[n][1] / total_wall if total_wall else None)] for n in order]
    stage_rows.append(["(outside stages)", len(walls), fmt((total_wall - stage_sum) / 1000, ",.1f"),
                       fmt((total_wall - stage_sum) / len(walls), ",.0f") if walls else "-",
                       pct((total_wall - stage_sum) / total_wall if total_wall else None)])
    stage_rows.append(["total (summed evaluation wall)", len(walls), fmt(total_wall / 1000, ",.1f"),
                       fmt(total_wall / len(walls), ",.0f") if walls else "-", pct(1.0 if total_wall else None)])

    verdicts = s.get("verdicts") or {}
    vtext = ", ".join(f"{k} {v}" for k, v in verdicts.items() if v) or "-"
    exp, met = s.get("expectations"), s.get("expectations_met")
    gex = num(s.get("gpu_exclusive_ms"))
    timings = [r.get("timing") for r in done if isinstance(r.get("timing"), dict)]
    cached = sum(1 for t in timings if t.get("reference_cached") is True)
    noisy = sum(1 for t in timings if t.get("noisy") is True)
    rounds = [num(t.get("rounds_run")) for t in timings if num(t.get("rounds_run")) is not None]
    gpu = gpu_name([doc], args.gpu_name)
    figures = [
        ["GPU (kgym device)", f"{gpu} ({s.get('device', '?')})"],
        ["pairs / evaluated / kgym errors", f"{s.get('pairs', '-')} / {evaluated} / {s.get('errors', 0)}"],
        ["jobs", s.get("jobs", args.jobs)],
        ["run wall", f"{fmt(wall_s, ',.1f')} s"],
        ["evaluations per GPU-hour", fmt(per_gpu_hour, ",.0f")],
        ["verdicts", vtext],
        ["expectations met", f"{met} of {exp}" if exp is not None else "-"],
        ["wall per evaluation (mean / median / max)",
         f"{fmt(statistics.fmean(walls), ',.0f')} / {fmt(statistics.median(walls), ',.0f')} / "
         f"{fmt(max(walls), ',.0f')} ms" if walls else "-"],
        ["timed evaluations (reference cached / noisy / mean rounds)",
         f"{len(timings)} ({cached} / {noisy} / {fmt(statistics.fmean(rounds), '.1f') if rounds else '-'})"],
    ]
    if gex is not None:
        # Time the GPU was held for one evaluation's timing/profiling alone: the part of the run that does not
        # overlap, so run wall / this share says how far more jobs could still raise throughput.
        grants = [f"{s[k]} {what}" for k, what in (("gpu_exclusive_grants", "exclusive"),
                                                   ("gpu_shared_grants", "shared")) if num(s.get(k)) is not None]
        wait = num(s.get("gpu_max_wait_ms"))
        figures.append(["summed exclusive GPU time",
                        f"{fmt(gex / 1000, ',.1f')} s ({pct(gex / 1000 / wall_s if wall_s else None)} of the run wall"
                        + (f"; grants: {', '.join(grants)}" if grants else "")
                        + (f"; longest wait {fmt(wait / 1000, ',.1f')} s" if wait is not None else "") + ")"])
    by_purpose = s.get("gpu_exclusive_ms_by_purpose") or {}
    if by_purpose and evaluated:
        # Exclusive time bounds throughput (no other evaluation's GPU work runs meanwhile): its split per
        # purpose says which part of the protocol to make cheaper.
        figures.append(["exclusive GPU time per evaluation, by purpose (mean ms)",
                        ", ".join(f"{k} {fmt(num(v) / evaluated, ',.0f')}"
                                  for k, v in sorted(by_purpose.items(), key=lambda kv: -(num(kv[1]) or 0)))])
    phases = [r.get("gpu_phases") for r in results if isinstance(r, dict) and isinstance(r.get("gpu_phases"), dict)]
    if phases:
        # Waiting is where concurrency loses: for the lock (others' exclusive windows; shared grants wait while
        # an exclusive request is pending) or for device memory (the evaluation's reservation did not fit).
        def mean_of(f):
            return statistics.fmean(num(f(p)) or 0 for p in phases)
        figures.append(["GPU waits per evaluation (mean ms): shared / exclusive / of which for memory",
                        f"{fmt(mean_of(lambda p: (p.get('shared') or {}).get('waited_ms')), ',.0f')} / "
                        f"{fmt(mean_of(lambda p: (p.get('exclusive') or {}).get('waited_ms')), ',.0f')} / "
                        f"{fmt(mean_of(lambda p: p.get('memory_waited_ms')), ',.0f')}"])
        # The footprint estimate against what the evaluations measured (gpu_phases.peak_bytes): a reservation
        # far above the peak makes large evaluations wait for memory they never use; one below it risks
        # running out of memory in a shared phase.
        sized = [(num(p.get("peak_bytes")) or 0) / num(p.get("reserved_bytes")) for p in phases
                 if (num(p.get("reserved_bytes")) or 0) > (1 << 30) and num(p.get("peak_bytes"))]
        if sized:
            figures.append(["measured peak / reserved memory, evaluations reserving > 1 GiB (median / max; over 1)",
                            f"{statistics.median(sized):.2f} / {max(sized):.2f}; {sum(x > 1 for x in sized)} "
                            f"of {len(sized)}"])
    goal = verdict_line(None if per_gpu_hour is None else per_gpu_hour >= GOAL_EVAL_PER_HOUR,
                        f"evaluations per GPU-hour ≥ {GOAL_EVAL_PER_HOUR:,}: {fmt(per_gpu_hour, ',.0f')}")
    t1 = md_table(["figure", "value"], figures)
    t2 = md_table(["stage", "ran", "sum s", "mean ms", "share of summed wall"], stage_rows)

    print(f"throughput: {args.run}\n")
    print(t1)
    print("\ntime by stage (stages marked skipped are not counted; 'ran' = evaluations that ran the stage):\n")
    print(t2)
    print("\ngoal:\n" + goal)
    if args.write_doc:
        body = "\n".join([
            "## Evaluation throughput on one GPU (full protocol)", "",
            f"{provenance(args, gpu)} Command: `{args.command}`.", "",
            (f"Mix: `bench/throughput_mix.jsonl` ({s.get('pairs', '?')} pairs: every pair of "
             "tests/kernelbench/level1.jsonl and level2.jsonl, every example in examples/, then the honest "
             "KernelBench pairs a second time)" if args.mix.endswith("throughput_mix.jsonl") else
             f"Mix: `{args.mix}` ({s.get('pairs', '?')} pairs)")
            + ", timing on, one `kgym bench` process. Stage shares are of the summed per-evaluation wall time "
            "(with several jobs it exceeds the run's wall).", "",
            t1, "", t2, "", goal,
        ])
        write_doc_section(args.write_doc, "throughput", body)
    return 0


def _grpo_figures(doc):
    """One run of the GRPO-shaped mix in figures (a dict; report_grpo prints them).

    A run with `kgym bench --dedup` answers an exact twin with its earlier pair's result, unevaluated (the entry's
    "cached_from" names that pair): such a pair is answered, not evaluated.  Evaluations, their rate, the per-task
    reference figures and the GPU times count the evaluated pairs only (a twin's result repeats its pair's times);
    answers count every pair with a result."""
    s = doc["summary"]
    answers = [e for e in doc["results"] if isinstance(e.get("result"), dict)]
    done = [e["result"] for e in answers if not e.get("cached_from")]
    wall_s = num(s.get("wall_s"))
    n = len(done)
    per_hour = n * 3600.0 / wall_s if wall_s else None
    tasks = {}
    for r in done:
        t = tasks.setdefault(get(r, "task", "id") or get(r, "task", "path") or "?",
                             {"evaluations": 0, "ref_timed": 0, "ref_cached": 0, "ref_computed": 0, "ref_held": 0,
                              "not_run": 0})
        t["evaluations"] += 1
        # Planned variants the judge did not run, the stage having failed (correctness.not_run; absent before it).
        t["not_run"] += len(get(r, "correctness", "not_run") or [])
        tim = r.get("timing")
        if isinstance(tim, dict) and tim.get("reference_cached") is not None:
            t["ref_cached" if tim.get("reference_cached") else "ref_timed"] += 1
        for v in get(r, "correctness", "variants") or []:
            # A variant whose reference output was computed for this evaluation says so in its spent_ms; one
            # served from a judge that holds it says reference_source "held".
            if v.get("reference_source") == "held":
                t["ref_held"] += 1
            elif "reference" in (v.get("spent_ms") or {}):
                t["ref_computed"] += 1
    exclusive_s = sum(num(get(r, "gpu_phases", "exclusive", "held_ms")) or 0.0 for r in done) / 1000
    bound = n * 3600.0 / exclusive_s if exclusive_s else None
    verdicts = s.get("verdicts") or {}
    # Judges kept between evaluations (process.judge_served > 0; absent before 35493e9), and why judges were not
    # kept, from the line a judge writes on its stderr ("kgym judge: not kept for another job: WHY").
    served = [get(r, "process", "judge_served") for r in done]
    kept = sum(1 for x in served if isinstance(x, int) and x > 0) if any(x is not None for x in served) else None
    not_kept = {}
    for r in done:
        text = str(get(r, "process", "stderr") or "")
        at = text.find("kgym judge: not kept for another job: ")
        if at >= 0:
            why = text[at + 38:].split("\\n")[0].split("\n")[0][:90]
            not_kept[why] = not_kept.get(why, 0) + 1
    return {"evaluations": n, "answered": len(answers), "twins": len(answers) - n, "kept": kept,
            "not_kept": not_kept,
            "answers_per_hour": len(answers) * 3600.0 / wall_s if wall_s else None,
            "wall_s": wall_s, "per_hour": per_hour, "tasks": tasks,
            "verdicts": ", ".join(f"{k} {v}" for k, v in verdicts.items() if v) or "-",
            "exclusive_s": exclusive_s, "bound": bound,
            "share": per_hour / bound if per_hour and bound else None,
            "shared_wait_s": sum(num(get(r, "gpu_phases", "shared", "waited_ms")) or 0.0 for r in done) / 1000,
            # CPU seconds an evaluation cost its judge and its runner (process.cpu_s; absent before this field): an
            # H200 host's cores slow down as they fill, so CPU is what the GPUs of one machine share.
            "cpu": {who: _mean([num(get(r, "process", "cpu_s", who)) for r in done]) for who in ("judge", "runner")},
            "summed_wall_s": sum(num(r.get("wall_ms")) or 0.0 for r in done) / 1000,
            # The trusted compile cache (result "compile_cache"; absent before it): its counts summed.
            "compile_cache": {k: sum(num(get(r, "compile_cache", k)) or 0.0 for r in done)
                              for k in ("requests", "hits", "compiled", "joined", "failed", "refused", "compile_ms",
                                        "wait_ms")},
            # Why requests failed or were refused (compile_cache.reasons), most frequent first: a cache that serves
            # nothing says why (a private TMPDIR once made every worker fail, unnoticed).
            "compile_cache_reasons": cache_reasons(done),
            # The run's GPU time by the arbiter's state (summary gpu_state_ms; absent before it) and the shared
            # part by how many shared phases were held at once (gpu_shared_holders_ms: bin i is i + 1 holders).
            "states": s.get("gpu_state_ms") if isinstance(s.get("gpu_state_ms"), dict) else None,
            "shared_phases": _shared_phases(done),
            "timing": _timed_by_pair(doc["results"]),
            "where": _where_it_went(done),
            "tiny_steps": _tiny_steps(done),
            "by_task": _by_task(done),
            "holders": s.get("gpu_shared_holders_ms") if isinstance(s.get("gpu_shared_holders_ms"), list) else None}


_GPU_STATES = ("exclusive", "shared", "draining", "handoff", "idle")


def cache_reasons(results, top=3):
    """Why compile requests failed or were refused (each result's compile_cache.reasons), the ``top`` most frequent
    first: [(reason, count)].  Used by this report and bench/fleet.py's."""
    return Counter(str(w)[:160] for r in results for w in (get(r, "compile_cache", "reasons") or [])
                   if isinstance(w, str)).most_common(top)


def _timed_by_pair(entries):
    """The timing of every evaluated pair (not answered from a twin) that has a speedup, keyed "FILE#N": the
    candidate's file and which of that file's results this is (a mix's exact twins are one file listed twice; --out
    lines come as evaluations end, not in the list's order): {key: result timing}."""
    out, seen = {}, Counter()
    for e in entries:
        t = get(e, "result", "timing")
        if e.get("cached_from") or not isinstance(t, dict) or not num(t.get("speedup")):
            continue
        # A --json entry's "candidate" is the pair's file name; its result's, a dict with the path.
        cand = e.get("candidate")
        name = str(get(e, "result", "candidate", "path") or (cand if isinstance(cand, str) else get(cand, "path"))
                   or e.get("label"))
        seen[name] += 1
        out[f"{name}#{seen[name]}"] = t
    return out


def _speedup_changes(first, timing):
    """|speedup / first's speedup - 1| for every candidate both timed (_timed_by_pair's keys)."""
    return [abs(num(x["speedup"]) / num(first[k]["speedup"]) - 1) for k, x in timing.items() if k in first]


def run_entries(path):
    """A run's entries: the results of a `kgym bench --json` output, else the lines of its --out file."""
    try:
        return load_run(path)["results"]
    except ReportError:
        return _out_lines(path)


def _out_lines(path):
    """The entries of a `kgym bench --out` file (one result a line; an answer from a twin says cached_from on its
    line).  A last line cut short (a run killed while writing it) is left out with a word on stderr; any other line
    that is not JSON makes the file unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line for line in f if line.strip()]
    except OSError as e:
        raise ReportError(f"{path}: neither `kgym bench --json` nor its --out lines ({e})") from None
    entries = []
    for i, line in enumerate(lines):
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines) - 1 and not line.endswith("\n"):
                print(f"gpu_report.py: {path}: its last line is cut short (left out)", file=sys.stderr)
                break
            raise ReportError(f"{path}: neither `kgym bench --json` nor its --out lines (line {i + 1}: {e})") from None
        if not isinstance(d, dict):
            raise ReportError(f"{path}: line {i + 1} is not a result object")
        entries.append({"result": d, "cached_from": d.get("cached_from")})
    return entries


def _yardstick(runs):
    """The run the others are measured against: the first named base* (bench/grpo.sh's base, base#1), else the
    first."""
    return next(((who, f) for who, f in runs if who.startswith("base")), runs[0])


def named_files(specs):
    """[(NAME, FILE)] from the command line's NAME=FILE runs (grpo, window, timing-precision); a spec without a name
    or a file is an error naming it."""
    out = []
    for spec in specs:
        who, sep, path = spec.partition("=")
        if not sep or not who or not path:
            raise ReportError(f"a run is NAME=FILE (e.g. head=run.json), not {spec!r}")
        out.append((who, path))
    return out


def report_timing_precision(args):
    """`gpu_report.py timing-precision NAME=FILE...`: _timing_rows for runs of one list, each the JSON of `kgym bench
    --json` or the JSON lines of its --out (one result a line, in the list's order)."""
    runs = []
    for who, path in named_files(args.runs):
        runs.append((who, {"timing": _timed_by_pair(run_entries(path))}))
    headers, rows = _timing_rows(runs)
    print(md_table(headers, rows))
    return 0


def report_two_rounds(args):
    """`gpu_report.py two-rounds [--agree X] NAME=FILE...`: what --timing-rounds 2 --timing-agree X would have said
    of runs made with three planned rounds (docs/evaluation-protocol.md, "Re-measuring"): per run, the timed
    candidates with three counted rounds or more, how many of them two rounds would have ended (their speedups within
    X of each other), the largest |two-round speedup / the run's speedup - 1| among those (the two-round speedup
    taken as the mean of the first two rounds' speedups: the rounds' pooled samples are not in the result), and the
    third round's share of the rounds' time on kgym's clock (rounds[].supervisor_ms)."""
    rows = []
    for who, path in named_files(args.runs):
        entries = run_entries(path)
        timed = stopped = 0
        worst = third_ms = all_ms = 0.0
        for e in entries:
            r = e.get("result") if isinstance(e, dict) and "result" in e else e
            t = get(r, "timing")
            final = num(get(t, "speedup"))
            rounds = [x for x in (get(t, "rounds") or []) if isinstance(x, dict) and not x.get("warm_broken")]
            sp = [num(x.get("speedup")) for x in rounds]
            if final is None or len(sp) < 3 or any(x is None or x <= 0 for x in sp):
                continue
            timed += 1
            all_ms += sum(num(x.get("supervisor_ms")) or 0.0 for x in rounds)
            if max(sp[:2]) / min(sp[:2]) - 1 <= args.agree:
                stopped += 1
                worst = max(worst, abs((sp[0] + sp[1]) / 2 / final - 1))
                third_ms += sum(num(x.get("supervisor_ms")) or 0.0 for x in rounds[2:])
        rows.append([who, timed, stopped, f"{worst:.3%}" if stopped else "-",
                     f"{third_ms / 1000:.1f} of {all_ms / 1000:.1f} s" if timed else "-"])
    print(md_table(["run", "timed (3+ rounds)", f"ended after two (spread <= {args.agree:g})",
                    "largest change of those", "rounds' time saved (kgym's clock)"], rows))
    return 0


def report_coverage(args):
    """`gpu_report.py coverage [--floor F] NAME=FILE...`: each run's profile coverage (profile.coverage: the share of
    the forward's device time in the candidate's own kernels, which --coverage-floor holds) against the first run's,
    pair by pair (the runs are of one list: the same pair at the same place, its label the same): how many pairs both
    profiled, the median and largest |difference| in points of share, and how many lie on the other side of the floor
    F (0.5, kgym's default on a GPU) than in the first run: verdicts the change would flip.  For a change of where or
    how the profile is taken (the thirtieth session's profile of the clock block against the base's calls of its own)."""
    runs = []
    for who, path in named_files(args.runs):
        entries = run_entries(path)
        cov = []
        for e in entries:
            r = e.get("result") if isinstance(e, dict) and "result" in e else e
            label = e.get("label") if isinstance(e, dict) else None
            cov.append((label, num(get(get(r, "profile"), "coverage"))))
        runs.append((who, cov))
    first_who, first = runs[0]
    rows = []
    for who, cov in runs:
        diffs, flipped, worst = [], 0, (0.0, "-")
        for (la, a), (lb, b) in zip(first, cov):
            if a is None or b is None or la != lb:
                continue
            d = abs(b - a)
            diffs.append(d)
            if d > worst[0]:
                worst = (d, str(lb))
            flipped += (a >= args.floor) != (b >= args.floor)
        rows.append([who, len(diffs),
                     "-" if who == first_who or not diffs else f"{statistics.median(diffs):.4f}",
                     "-" if who == first_who or not diffs else f"{worst[0]:.4f} ({worst[1]})",
                     "-" if who == first_who else flipped])
    print(md_table(["run", "profiled in both", f"|coverage - {first_who}'s| median", "largest (pair)",
                    f"other side of the floor {args.floor:g}"], rows))
    return 0


def timing_rows(runs):
    """_timing_rows for [(name, entries)], entries as _timed_by_pair reads them (bench/fleet.py's report)."""
    return _timing_rows([(who, {"timing": _timed_by_pair(entries)}) for who, entries in runs])


def _remeasured_why(timing):
    """Why kgym asked for rounds beyond the planned ones (timing.checks, kgym since the thirty-second session): each
    reason with how many checks gave it, "(device)" where the speedups compared were on the device-wide clock,
    e.g. "disagree 3, disagree(device) 1, short 1"; "-" for none (or results without checks)."""
    why = Counter()
    for x in timing.values():
        for c in x.get("checks") or []:
            if isinstance(c, dict) and c.get("more") is True:
                why[str(c.get("reason")) + ("(device)" if c.get("clock_basis") == "device" else "")] += 1
    return ", ".join(f"{k} {n}" for k, n in sorted(why.items())) or "-"


def _timing_rows(runs):
    """What a change must not move, per run: candidates timed, on the device-wide clock (timing.clock_basis: left
    work on a side stream, or read as if: honest ones should not be), re-measured (timing.remeasured; why: _remeasured_why)
    and still noisy, the per-round CV (median, largest), and each candidate's speedup against the yardstick's (_yardstick: the
    first base run, else the first; median and
    largest |ratio - 1| over the candidates both timed).  A second run of the first run's build is the yardstick
    (docs/PERFORMANCE.md, nineteenth session)."""
    first_who, first = _yardstick(runs)
    first = first["timing"]
    # (two runs of one build on one H200 differ by a median 0.03%, at most 0.70%, over the GRPO mix's 31 timed
    # candidates; contexts made beside timing windows moved them by medians of 0.2-1.0%, up to 15%: nineteenth
    # session)
    rows = []
    for who, f in runs:
        t = f["timing"]
        cvs = [num(x.get("round_cv")) for x in t.values() if num(x.get("round_cv")) is not None]
        both = _speedup_changes(first, t)
        rows.append([who, len(t), sum(1 for x in t.values() if x.get("clock_basis") == "device"),
                     sum(1 for x in t.values() if x.get("remeasured")), _remeasured_why(t),
                     sum(1 for x in t.values() if x.get("noisy")),
                     fmt(statistics.median(cvs) if cvs else None, ".4f"), fmt(max(cvs) if cvs else None, ".4f"),
                     "-" if who == first_who or not both else
                     f"{statistics.median(both):.2%}, {max(both):.2%} ({len(both)})"])
    return ["build", "timed", "device clock", "re-measured", "why", "noisy", "round CV median", "round CV max",
            f"speedup vs {first_who}: median, max |ratio - 1| (candidates)"], rows

# The judge's steps of a correctness variant (correctness.variants[].spent_ms), in the order it takes them.
_VARIANT_STEPS = ("inputs", "reference", "tolerance", "construct", "call", "input_check", "compare", "fp64",
                  "repeat_checks")


def _where_it_went(done):
    """Seconds summed over the evaluations: their wall, set-up, stages, GPU phases held and waited, and the
    correctness variants' steps on the judge's clock (the runner's calls split into small_odd, where the second
    Triton specialisation compiles: the first variant at sizes that are not multiples of 16, before size_odd since
    the variants run cheapest first, and the rest)."""
    t = {"wall": 0.0, "setup": 0.0, "shared_held": 0.0, "shared_waited": 0.0, "exclusive_held": 0.0}
    stages, steps = {}, {k: 0.0 for k in _VARIANT_STEPS}
    odd_call = 0.0
    for r in done:
        t["wall"] += num(r.get("wall_ms")) or 0.0
        t["setup"] += num(get(r, "process", "setup_ms")) or 0.0
        t["shared_held"] += num(get(r, "gpu_phases", "shared", "held_ms")) or 0.0
        t["shared_waited"] += num(get(r, "gpu_phases", "shared", "waited_ms")) or 0.0
        t["exclusive_held"] += num(get(r, "gpu_phases", "exclusive", "held_ms")) or 0.0
        for st in r.get("stages") or []:
            if isinstance(st, dict) and st.get("name"):
                stages[st["name"]] = stages.get(st["name"], 0.0) + (num(st.get("ms")) or 0.0)
        for v in get(r, "correctness", "variants") or []:
            spent = v.get("spent_ms") if isinstance(v.get("spent_ms"), dict) else {}
            for k in _VARIANT_STEPS:
                steps[k] += num(spent.get(k)) or 0.0
            if v.get("name") == "small_odd":
                odd_call += num(spent.get("call")) or 0.0
    out = {k: v / 1000 for k, v in t.items()}
    out["stages"] = {k: v / 1000 for k, v in stages.items()}
    out["steps"] = {k: v / 1000 for k, v in steps.items()}
    out["small_odd_call"] = odd_call / 1000
    return out


def _tiny_steps(done):
    """The tiny run's steps on the judge's clock (stages[tiny_run].spent_ms), mean ms, apart for evaluations in a
    new judge (process.judge_served 0) and in a kept one: a new judge's first run holds its shared phase ~10x as
    long, and its steps say which part (the reference's first CUDA library loads, the runner's first call)."""
    out = {}
    for r in done:
        st = next((x for x in r.get("stages") or [] if isinstance(x, dict) and x.get("name") == "tiny_run"), None)
        spent = st.get("spent_ms") if st else None
        if not isinstance(spent, dict):
            continue
        kind = "kept" if (num(get(r, "process", "judge_served")) or 0) > 0 else "new"
        n, steps = out.setdefault(kind, [0, {}])
        out[kind][0] = n + 1
        for k, v in spent.items():
            steps[k] = steps.get(k, 0.0) + (num(v) or 0.0)
    return {kind: (n, {k: v / n for k, v in steps.items()}) for kind, (n, steps) in out.items()}


_FULL_SIZE_VARIANTS = ("base", "signed", "size_small", "size_odd", "size_large")


def _by_task(done):
    """Per task (result.task.id), in the order met: evaluations, how many in a new judge (process.judge_served 0),
    and seconds summed over them: the candidate's correctness calls (correctness.variants[].candidate_ms, the call's
    own clock, so shared time included) in the full-size variants, in small_odd (which also holds the second Triton
    specialisation's compile) and in the others (the value variants at capped sizes), and the judge's own variant
    steps (spent_ms but the call).  Which task the shared phases spend their time on: on the GRPO mix one honest
    sample 33x slower than its reference (level2/22) was about half of the candidates' call time outside
    small_odd (thirty-eighth session)."""
    out = {}
    for r in done:
        tid = get(r, "task", "id") or "?"
        t = out.setdefault(tid, {"n": 0, "new": 0, "full": 0.0, "small_odd": 0.0, "other": 0.0, "judge": 0.0})
        t["n"] += 1
        t["new"] += (num(get(r, "process", "judge_served")) or 0) == 0
        for v in get(r, "correctness", "variants") or []:
            if not isinstance(v, dict):
                continue
            name = v.get("name")
            part = "full" if name in _FULL_SIZE_VARIANTS else "small_odd" if name == "small_odd" else "other"
            t[part] += (num(v.get("candidate_ms")) or 0.0) / 1000
            spent = v.get("spent_ms") if isinstance(v.get("spent_ms"), dict) else {}
            t["judge"] += sum(num(x) or 0.0 for k, x in spent.items() if k != "call") / 1000
    return out


def _shared_phases(done):
    """The shared phases by purpose (the stage that asked; result gpu_phases.shared.by_purpose, absent before
    the eighteenth session): seconds held, summed, and how the evaluations' longest shared phases fall: an
    exclusive window asked for meanwhile waits for the longest to end (the arbiter's "draining")."""
    held, longest = {}, {}
    for r in done:
        sh = get(r, "gpu_phases", "shared") or {}
        for k, ms in (sh.get("by_purpose") or {}).items():
            held[k] = held.get(k, 0.0) + (num(ms) or 0.0) / 1000
        ms, why = num(sh.get("longest_ms")), sh.get("longest_purpose")
        if ms and isinstance(why, str):
            longest.setdefault(why, []).append(ms / 1000)
    return {"held": held, "longest": longest}


def _where_rows(runs):
    """The table of where each build's evaluations spent their time (seconds summed over them)."""
    names = []
    for _who, f in runs:
        for k in f["where"]["stages"]:
            if k not in names:
                names.append(k)
    headers = (["build", "evaluation wall", "set-up", "shared held", "shared waited", "exclusive held"]
               + [f"stage {k}" for k in names] + [f"variant {k}" for k in _VARIANT_STEPS] + ["small_odd calls"])
    rows = []
    for who, f in runs:
        w = f["where"]
        rows.append([who] + [fmt(w[k], ",.1f") for k in ("wall", "setup", "shared_held", "shared_waited",
                                                          "exclusive_held")]
                    + [fmt(w["stages"].get(k), ",.1f") for k in names]
                    + [fmt(w["steps"][k], ",.1f") for k in _VARIANT_STEPS] + [fmt(w["small_odd_call"], ",.1f")])
    return headers, rows


def _states_row(who, f):
    """One build's row of the GPU-state table: seconds and share of the run in each arbiter state, and the mean
    number of shared phases held while any was."""
    st = f["states"]
    if not st:
        return [who] + ["-"] * (len(_GPU_STATES) + 1)
    total = sum(num(st.get(k)) or 0.0 for k in _GPU_STATES) or None
    cells = [f"{fmt((num(st.get(k)) or 0.0) / 1000, ',.1f')} s ({pct((num(st.get(k)) or 0.0) / total if total else None)})"
             for k in _GPU_STATES]
    bins = [num(x) or 0.0 for x in f["holders"] or []]
    held = sum(bins)
    mean = sum((i + 1) * x for i, x in enumerate(bins)) / held if held else None
    return [who] + cells + [fmt(mean, ".2f")]


def _mean(values):
    """The mean of the numbers among `values` (None stands for "not measured"), or None when there are none."""
    v = [x for x in values if x is not None]
    return sum(v) / len(v) if v else None


def _repetitions(rate):
    """From run names like head#2 (grpo.sh --repeat): ([(repetition, head rate, base rate)] for the repetitions
    that have both, in order; [every head#N's rate]).  Runs without a number are not repetitions."""
    reps = {}
    for who, per_hour in rate.items():
        name, sep, k = who.partition("#")
        if sep and k.isdigit() and name in ("head", "base") and per_hour:
            reps.setdefault(int(k), {})[name] = per_hour
    pairs = [(k, r["head"], r["base"]) for k, r in sorted(reps.items()) if "head" in r and "base" in r]
    return pairs, [r["head"] for _k, r in sorted(reps.items()) if "head" in r]


def report_grpo(args):
    runs = [(who, _grpo_figures(load_run(path))) for who, path in named_files(args.runs)]
    gpu = gpu_name([], args.gpu_name)
    # A run that answered twins unevaluated (--dedup) gets its answers beside its evaluations.
    dedup = any(f["twins"] for _, f in runs)
    rows = []
    for who, f in runs:
        ntasks = len(f["tasks"]) or 1
        per_task = lambda k: sum(t[k] for t in f["tasks"].values()) / ntasks  # noqa: E731
        answered = [f"{f['answered']} ({f['twins']} from a twin)", fmt(f["answers_per_hour"], ",.0f")] if dedup else []
        rows.append([who, f["evaluations"]] + answered + [f"{fmt(f['wall_s'], ',.1f')} s", fmt(f["per_hour"], ",.0f"),
                     f["verdicts"],
                     f"{fmt(per_task('ref_timed'), '.1f')} timed, {fmt(per_task('ref_cached'), '.1f')} cached",
                     f"{fmt(per_task('ref_computed'), '.1f')} computed, {fmt(per_task('ref_held'), '.1f')} held"
                     + (f", {fmt(per_task('not_run'), '.1f')} not run" if per_task("not_run") else ""),
                     f"{fmt(f['exclusive_s'], ',.1f')} s", fmt(f["bound"], ",.0f"), pct(f["share"]),
                     f"{fmt(f['shared_wait_s'], ',.1f')} s of {fmt(f['summed_wall_s'], ',.1f')} s",
                     "-" if f["kept"] is None else f"{f['kept']} of {f['evaluations']}",
                     f"{fmt(f['cpu']['judge'], '.2f')} + {fmt(f['cpu']['runner'], '.2f')} s"])
    table = md_table(["build", "evaluations"] + (["answered", "answers / GPU-hour"] if dedup else []) +
                     ["run wall", "evaluations / GPU-hour", "verdicts (every answer)" if dedup else "verdicts",
                      "reference timings per task", "reference outputs per task (variants)",
                      "summed exclusive GPU time", "exclusive-window bound / h", "share of the bound",
                      "shared-phase waits of summed evaluation wall", "in kept judges",
                      "CPU an evaluation (judge + runner)"], rows)
    jobs = f"{args.jobs} jobs" + (f" (head: {args.head_jobs})" if args.head_jobs not in (None, args.jobs) else "")
    lines = [f"grpo: {args.mix} ({len(runs[0][1]['tasks'])} tasks), {jobs}\n", table]
    # Where the evaluations' time went (seconds summed over them: they overlap, so the sums exceed the run's wall),
    # in the order an evaluation takes it: what a change moved shows here before it shows in the rate.
    headers, rows = _where_rows(runs)
    lines += ["\nwhere the evaluations' time went, seconds summed over them (stages from the results' stages; "
              "variant steps on the judge's clock, correctness.variants[].spent_ms; small_odd calls hold the second "
              "Triton compile):\n", md_table(headers, rows)]
    if any(f["states"] for _, f in runs):
        # Where the run's GPU time went, by the arbiter's state (src/supervisor/arbiter.h, KG_GPU_STATE_MAP):
        # draining is shared phases still held while a timing window waits for them; idle, nothing held or
        # waiting (every evaluation on the host: compiling, setting up).
        lines += ["\nthe run's GPU time by the arbiter's state (draining: shared phases ending while a timing "
                  "window waits; idle: no phase held or asked for):\n",
                  md_table(["build"] + list(_GPU_STATES) + ["shared holders (mean)"],
                           [_states_row(who, f) for who, f in runs])]
    for who, f in runs:
        cc = f["compile_cache"]
        if cc["requests"]:
            lines.append(f"\n{who}: compile cache, summed over the evaluations: {cc['requests']:.0f} requests, "
                         f"{cc['hits']:.0f} found filed, {cc['joined']:.0f} found after another judge's compile, "
                         f"{cc['compiled']:.0f} compiled by a worker, {cc['failed']:.0f} failed, {cc['refused']:.0f} "
                         f"refused; workers {cc['compile_ms'] / 1000:,.1f} s, runners waiting {cc['wait_ms'] / 1000:,.1f} s")
            if f["compile_cache_reasons"]:
                lines.append(f"{who}: why requests failed or were refused: "
                             + "; ".join(f"{n}x {why}" for why, n in f["compile_cache_reasons"]))
    for who, f in runs:
        sp = f["shared_phases"]
        if sp["held"]:
            lines.append(f"\n{who}: shared phases held by purpose, summed: "
                         + ", ".join(f"{k} {v:,.1f} s" for k, v in sorted(sp["held"].items(), key=lambda kv: -kv[1]))
                         + "; each evaluation's longest shared phase, by purpose (count, median, max): "
                         + ", ".join(f"{k} {len(v)}x {statistics.median(v):.2f}/{max(v):.2f} s"
                                     for k, v in sorted(sp["longest"].items(), key=lambda kv: -max(kv[1]))))
    for who, f in runs:
        for kind in ("new", "kept"):
            if kind in f["tiny_steps"]:
                n, steps = f["tiny_steps"][kind]
                lines.append(f"{'' if kind == 'kept' else chr(10)}{who}: the tiny run's steps in {n} "
                             f"{'new judges' if kind == 'new' else 'kept judges'}, mean ms: "
                             + ", ".join(f"{k} {steps[k]:,.1f}" for k in _VARIANT_STEPS if k in steps))
    for who, f in runs:
        if any(t["full"] or t["small_odd"] or t["other"] or t["judge"] for t in f["by_task"].values()):
            lines += [f"\n{who}: by task, seconds summed over its evaluations (the candidate's correctness calls on "
                      "their own clock: full-size variants, small_odd with its second compile, the others; the "
                      "judge's variant steps but the calls):\n",
                      md_table(["task", "evaluations", "in new judges", "calls full size", "calls small_odd",
                                "calls other variants", "judge steps"],
                               [[tid, t["n"], t["new"], fmt(t["full"], ",.1f"), fmt(t["small_odd"], ",.1f"),
                                 fmt(t["other"], ",.1f"), fmt(t["judge"], ",.1f")]
                                for tid, t in f["by_task"].items()])]
    if any(f["timing"] for _, f in runs):
        headers, trows = _timing_rows(runs)
        lines += ["\ntiming precision (a faster run that moved these is not faster: the protocol's figures are "
                  "what it sells):\n", md_table(headers, trows)]
    for who, f in runs:
        if f["not_kept"]:
            lines.append(f"\n{who}: judges not kept for another job, why (the judge's stderr): "
                         + "; ".join(f"{v}x {k}" for k, v in sorted(f["not_kept"].items(), key=lambda kv: -kv[1])))
    rate = {who: f["per_hour"] for who, f in runs}
    # grpo.sh --repeat N names its runs head#1, base#1, head#2, ...: head / base for each repetition, and their
    # median, stand for the pair (one pair's ratio moves by about ±5% from run to run); the goal reads the heads'
    # median rate.
    pairs, heads = _repetitions(rate)
    if pairs:
        ratios = [h / b for _k, h, b in pairs]
        lines.append("\nhead / base, evaluations per hour, per repetition: "
                     + ", ".join(f"#{k} {h / b:.3f}" for k, h, b in pairs)
                     + f"; median {statistics.median(ratios):.3f} ({100 * (statistics.median(ratios) - 1):+.1f}%), "
                       f"min {min(ratios):.3f}, max {max(ratios):.3f}")
    if heads:
        rate["head"] = statistics.median(heads)
    if "base" in rate and "head" in rate and rate["base"] and rate["head"]:
        lines.append(f"\nhead / base, evaluations per hour: {rate['head'] / rate['base']:.3f} "
                     f"({100 * (rate['head'] / rate['base'] - 1):+.1f}%)")
        answers = {who: f["answers_per_hour"] for who, f in runs}
        if dedup and answers.get("base") and answers.get("head"):
            lines.append(f"head / base, answers per hour: {answers['head'] / answers['base']:.3f} "
                         f"({100 * (answers['head'] / answers['base'] - 1):+.1f}%)")
    goal = None
    if rate.get("head") is not None:
        goal = verdict_line(rate["head"] >= GOAL_GRPO_PER_HOUR,
                            f"evaluations per GPU-hour on the GRPO-shaped mix ≥ {GOAL_GRPO_PER_HOUR:,}: "
                            f"{fmt(rate['head'], ',.0f')}")
        first_who, first = _yardstick(runs)
        changes = [c for who, f in runs if who.startswith("head") for c in _speedup_changes(first["timing"],
                                                                                              f["timing"])]
        if first_who.startswith("base") and changes:
            goal += "\n" + verdict_line(max(changes) <= GOAL_TIMING_CHANGE,
                                         f"every head run's speedups within {GOAL_TIMING_CHANGE:.0%} of {first_who}'s "
                                         f"(the timing is what a faster run must not move): largest change "
                                         f"{max(changes):.2%} over {len(changes)} timed evaluations")
        elif first_who.startswith("base"):
            goal += ("\n- timing goal not measured: no head run timed a candidate that "
                     f"{first_who} timed")
        lines.append("\ngoal:\n" + goal)
        head = dict(runs).get("head")
        if head and head["twins"]:
            lines.append(f"(head also answered {head['twins']} exact twins unevaluated: "
                         f"{fmt(head['answers_per_hour'], ',.0f')} answers per GPU-hour; the goal counts evaluations)")
    print("\n".join(lines))
    if args.write_doc:
        body = "\n".join(["## Throughput on a GRPO-shaped mix (one GPU, full protocol)", "",
                          f"{provenance(args, gpu)} Command: `{args.command}`.", "",
                          "Mix: `bench/grpo_mix.py` (N KernelBench tasks x 8 samples; the samples of a task differ in "
                          "bytes, two of eight are exact twins), one `kgym bench` process per build."
                          + (" A build run with `--dedup` answers an exact twin with its earlier pair's result, "
                             "unevaluated: its evaluations count the pairs evaluated, its answers every pair; the "
                             "GPU times are the evaluations'." if dedup else ""), "",
                          table] + (["", goal] if goal else []))
        write_doc_section(args.write_doc, "grpo", body)
    return 0


def _window_figures(doc):
    """Where the exclusive windows of one run went, summed over its evaluated (not twin-answered) results: the
    time held by purpose, and inside the timing rounds' purpose the first warm-ups, the rounds themselves
    (kgym's own clock around each) and what is left (the reference timed alone on a cache miss, the gaps between
    rounds); the timed calls' own milliseconds against the judge's host work around them (rounds[].overhead)."""
    done = [e["result"] for e in doc["results"] if isinstance(e.get("result"), dict) and not e.get("cached_from")]
    f = {"timed": 0, "misses": 0, "held": 0.0, "waited": 0.0, "purpose": {}, "warm": 0.0, "warm_calls": 0,
         "rounds": 0, "round_ms": 0.0, "calls": 0, "cand_ms": 0.0, "overhead": {}, "clock_ms": 0.0}
    for r in done:
        ex = get(r, "gpu_phases", "exclusive") or {}
        f["held"] += num(ex.get("held_ms")) or 0.0
        f["waited"] += num(ex.get("waited_ms")) or 0.0
        for k, v in (ex.get("by_purpose") or {}).items():
            f["purpose"][k] = f["purpose"].get(k, 0.0) + (num(v) or 0.0)
        t = r.get("timing")
        if not isinstance(t, dict) or not t.get("rounds"):
            continue
        f["timed"] += 1
        f["misses"] += t.get("reference_samples") == "alone"
        f["clock_ms"] += num(get(t, "clock", "supervisor_ms")) or 0.0
        for x in t["rounds"]:
            if not isinstance(x, dict):
                continue
            w = x.get("warm") or {}
            f["warm"] += num(w.get("ms")) or 0.0
            f["warm_calls"] += int(num(w.get("calls")) or 0)
            f["rounds"] += 1
            f["round_ms"] += num(x.get("supervisor_ms")) or 0.0
            c = x.get("candidate") or {}
            n = int(num(c.get("samples")) or 0)
            f["calls"] += n
            f["cand_ms"] += n * (num(c.get("mean")) or 0.0)
            for k, v in (x.get("overhead") or {}).items():
                f["overhead"][k] = f["overhead"].get(k, 0.0) + (num(v) or 0.0)
    return f


def report_window(args):
    rows, extra = [], []
    for who, path in named_files(args.runs):
        f = _window_figures(load_run(path))
        per = lambda x: fmt(x / f["timed"] if f["timed"] else None, ",.0f")  # noqa: E731
        tr = f["purpose"].get("timing_round", 0.0)
        rows.append([who, f["timed"], f["misses"], f"{fmt(f['held'] / 1000, ',.1f')} s", per(f["held"]),
                     per(f["waited"]), per(tr), per(f["warm"]), per(f["round_ms"]),
                     per(tr - f["warm"] - f["round_ms"]), per(f["purpose"].get("clock_block", 0.0)),
                     per(f["purpose"].get("profile", 0.0)), per(f["purpose"].get("out_of_memory_retry", 0.0))])
        o = f["overhead"]
        extra.append(f"{who}: {f['rounds']} rounds, {f['calls']} timed calls of {fmt(f['cand_ms'] / 1000, ',.2f')} s "
                     f"(the candidate's own); the judge around them: "
                     + ", ".join(f"{k} {fmt(v / 1000, ',.2f')} s" for k, v in sorted(o.items()))
                     + f"; {f['warm_calls']} warm-up calls; clock block {fmt(f['clock_ms'] / 1000, ',.2f')} s")
    print(md_table(["build", "timed", "misses", "exclusive held", "per timed (ms)", "exclusive wait",
                    "timing_round", "warm-up", "rounds", "rest (alone ref, gaps)", "clock_block", "profile",
                    "oom retry"], rows))
    print("\n" + "\n".join(extra))
    return 0


def make_mix(args):
    """Deterministic throughput mix; see the header it writes."""
    out = []
    for lst in ("tests/kernelbench/level1.jsonl", "tests/kernelbench/level2.jsonl"):
        for p in read_pairs(os.path.join(ROOT, lst)):
            out.append({"kernelbench": p["kernelbench"], "candidate": p["candidate"], "expect": p.get("expect")})
    n_kb = len(out)
    n_ex = 0
    # Same rule as `kgym bench DIR`: *.py in a task folder, not task.py, not starting with '_'.
    for task in sorted(glob.glob(os.path.join(ROOT, "examples", "*", "task.py"))):
        folder = os.path.dirname(task)
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".py") or name == "task.py" or name.startswith("_"):
                continue
            expect = "correct" if name.startswith("correct") else "not_correct" if name.startswith("wrong") else None
            out.append({"task": os.path.relpath(task, ROOT), "candidate": os.path.relpath(os.path.join(folder, name), ROOT),
                        "expect": expect})
            n_ex += 1
    again = [p for p in out[:n_kb] if p["expect"] == "correct"]
    out += again
    correct = sum(1 for p in out if p["expect"] == "correct")
    print("# Throughput mix for bench/throughput.sh (fixed; regenerate with: python3 bench/gpu_report.py make-mix "
          "> bench/throughput_mix.jsonl).")
    print(f"# {len(out)} pairs: the {n_kb} pairs of tests/kernelbench/level1.jsonl + level2.jsonl in file order, the "
          f"{n_ex} candidates of examples/*/ (sorted, as `kgym bench examples` lists them), then the {len(again)} "
          "honest KernelBench pairs again.")
    print(f"# {correct} of {len(out)} are expected correct (they run every stage, timing included); the rest stop at "
          "correctness or earlier.  The second pass over the honest pairs brings the correct share near what an RL "
          "batch of a half-trained policy looks like and repeats tasks, as group sampling does (several samples per "
          "task), so a reference-timing cache is exercised.")
    for p in out:
        print(json.dumps({k: v for k, v in p.items() if v is not None}))
    return 0


# ------------------------------------------------------------------------------------ concurrency


def report_concurrency(args):
    pairs = read_pairs(args.pairs)
    doc_a, doc_b = load_run(args.run_a), load_run(args.run_b)
    a = [None] * len(pairs)
    b = [[] for _ in pairs]  # every pass of the shared run; pass 1 is the one compared
    for k, e in match_results(doc_a, pairs, args.run_a):
        if a[k] is None:
            a[k] = timed(e)
    for k, e in match_results(doc_b, pairs, args.run_b):
        b[k].append(timed(e))
    rows, devs, missing = [], [], []
    passes = max(len(x) for x in b)
    for k, pair in enumerate(pairs):
        name = pair_name(pair)
        sa, ta = a[k] if a[k] else (None, "no result")
        sb, tb = b[k][0] if b[k] else (None, "no result")
        ratio = sb / sa if sa and sb else None
        if ratio is not None:
            devs.append((abs(ratio - 1), name))
        else:
            missing.append(f"{name}: " + "; ".join(
                f"jobs {j}: {t}" for j, s, t in ((args.jobs_a, sa, ta), (args.jobs_b, sb, tb)) if s is None))
        ca = num(get(ta, "candidate_ms", "median")) if sa else None
        cb = num(get(tb, "candidate_ms", "median")) if sb else None
        later = [fmt(s) if s is not None else "—" for s, _ in b[k][1:]]
        later += ["—"] * (passes - 1 - len(later))
        rows.append([name, pair.get("kind", ""), fmt(sa) if sa else "—", fmt(sb) if sb else "—", fmt(ratio),
                     fmt(ca), fmt(cb), fmt(cb / ca if ca and cb else None)] + later)
    headers = ["problem", "kind", f"speedup jobs {args.jobs_a}", f"speedup jobs {args.jobs_b}", "ratio",
               f"cand ms jobs {args.jobs_a}", f"cand ms jobs {args.jobs_b}", "cand ms ratio"] + \
              [f"jobs {args.jobs_b} pass {i + 2}" for i in range(passes - 1)]
    table = md_table(headers, rows)
    med = statistics.median([d for d, _ in devs]) if devs else None
    worst = max(devs) if devs else None
    goal = verdict_line(None if med is None else med <= GOAL_CONCURRENCY,
                        f"median |speedup(jobs {args.jobs_b}) / speedup(jobs {args.jobs_a}) − 1| ≤ "
                        f"{GOAL_CONCURRENCY:.0%}: {pct(med)} (max {pct(worst[0]) if worst else '-'}"
                        f"{', ' + worst[1] if worst else ''}; {len(devs)} of {len(pairs)} compared)",
                        len(devs) == len(pairs))
    walls = []
    for j, d in ((args.jobs_a, doc_a), (args.jobs_b, doc_b)):
        s = d["summary"]
        walls.append(f"jobs {j}: {s.get('evaluated', '-')} evaluations in {fmt(num(s.get('wall_s')), ',.1f')} s "
                     f"({fmt(num(s.get('evaluations_per_hour')), ',.0f')}/hour)")
    gpu = gpu_name([doc_a, doc_b], args.gpu_name)
    print(f"concurrency: the same {len(pairs)} pairs with --jobs {args.jobs_a} and --jobs {args.jobs_b} on {gpu}\n")
    print(table)
    print("\n" + "\n".join(walls))
    if missing:
        print("\nincomplete:\n" + "\n".join(f"- {m}" for m in missing))
    print("\ngoal:\n" + goal)
    if args.write_doc:
        body = "\n".join([
            "## Timing under concurrency (shared GPU, exclusive timing windows)", "",
            f"{provenance(args, gpu)} Command: `{args.command}`.", "",
            f"The pairs of `bench/timing_stability.jsonl`, once with `--jobs {args.jobs_a}` and once with "
            f"`--jobs {args.jobs_b}` (that run goes over the list {passes} times so every compared evaluation — "
            f"pass 1 — has other evaluations beside it; later passes are shown for reference). "
            "ratio = speedup with sharing / speedup alone; run-to-run noise is in it too.", "",
            table, "", "; ".join(walls) + ".", "", goal,
            *([""] + ["Incomplete: " + "; ".join(missing) + "."] if missing else []),
        ])
        write_doc_section(args.write_doc, "concurrency", body)
    return 0


# -------------------------------------------------------------------------------------- gpu-check


def gpu_check(args):
    """Print the GPU's name, or say why there is none and exit 1 (the drivers stop before any long run)."""
    smi = ""
    try:
        smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        smi = "(nvidia-smi not found)"
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means this Python cannot measure
        print(f"cannot import torch with {sys.executable}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        built = "built without CUDA" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
        print(f"torch.cuda.is_available() is False in {sys.executable} (torch {torch.__version__}, {built}); "
              f"nvidia-smi -L: {smi or '(no GPU listed)'}", file=sys.stderr)
        return 1
    index = int(args.device.split(":")[1]) if ":" in args.device else 0
    if index >= torch.cuda.device_count():
        print(f"{args.device}: only {torch.cuda.device_count()} GPU(s) visible", file=sys.stderr)
        return 1
    print(torch.cuda.get_device_name(index))
    return 0


# ------------------------------------------------------------------------------------------- driver-counts


def report_driver_counts(args):
    """The driver's memory calls the judges made (KGYM_JUDGE_PROFILE's judge-<pid>-<job>.json files, child._profiled):
    each count summed over the judges' jobs, and per job."""
    files = sorted(glob.glob(os.path.join(args.folder, "judge-*.json")))
    if not files:
        raise ReportError(f"no judge-*.json in {args.folder} (run kgym with KGYM_JUDGE_PROFILE={args.folder})")
    totals, seen = {}, {}
    steps = {"aten_ops": {}, "host_reads": {}}  # by a variant's step, summed over the jobs (child._OpCounter)
    for f in files:
        try:
            with open(f) as fh:
                counts = json.load(fh)
        except (OSError, ValueError) as e:
            raise ReportError(f"{f}: {e}") from None
        if not isinstance(counts, dict):
            raise ReportError(f"{f}: not a JSON object")
        for k, v in counts.items():
            if k in steps and isinstance(v, dict):
                for step, n in v.items():
                    if isinstance(n, (int, float)) and not isinstance(n, bool):
                        steps[k][step] = steps[k].get(step, 0) + n
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                totals[k] = totals.get(k, 0) + v
                seen[k] = seen.get(k, 0) + 1
            else:
                totals.setdefault(k, 0)
                seen.setdefault(k, 0)
    print(f"driver-counts: {len(files)} judge jobs in {args.folder}")
    print()
    print("| count | summed | per job (where counted) | jobs that counted it |")
    print("|---|---:|---:|---:|")
    for k in totals:
        if k in steps:
            continue
        per = f"{totals[k] / seen[k]:.1f}" if seen[k] else "-"
        print(f"| {k} | {totals[k]} | {per} | {seen[k]} |")
    if steps["aten_ops"] or steps["host_reads"]:
        # Operators that are not views (about one kernel each on a GPU) and host reads of tensor values, by step.
        print()
        print("| step | ATen operators per job | host reads per job |")
        print("|---|---:|---:|")
        names = sorted(set(steps["aten_ops"]) | set(steps["host_reads"]), key=lambda n: -steps["aten_ops"].get(n, 0))
        for n in names + ["all"]:
            ops = sum(steps["aten_ops"].values()) if n == "all" else steps["aten_ops"].get(n, 0)
            reads = sum(steps["host_reads"].values()) if n == "all" else steps["host_reads"].get(n, 0)
            print(f"| {n} | {ops / len(files):.1f} | {reads / len(files):.1f} |")
    return 0


# ------------------------------------------------------------------------------------------- main


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--write-doc", metavar="FILE", help="replace this report's section of FILE")
        p.add_argument("--command", default="(not given)", help="the command line that reproduces the figures")
        p.add_argument("--gpu-name", help="GPU name when no result carries timing.gpu")
        p.add_argument("--commit", help="kgym commit the figures were measured at")

    p = sub.add_parser("gpu-check")
    p.add_argument("--device", default="cuda")
    p = sub.add_parser("timing-stability")
    common(p)
    p.add_argument("--pairs", required=True)
    p.add_argument("--do-bench", help="JSON lines from do_bench_agreement.py")
    p.add_argument("runs", nargs="+", help="kgym bench --json outputs, one per run")
    p = sub.add_parser("throughput")
    common(p)
    p.add_argument("--jobs", type=int, required=True)
    p.add_argument("--gpus", type=int, default=1, help="GPUs the run used (evaluations per GPU-hour)")
    p.add_argument("--mix", default="bench/throughput_mix.jsonl", help="the list of pairs the run evaluated")
    p.add_argument("run")
    p = sub.add_parser("concurrency")
    common(p)
    p.add_argument("--pairs", required=True)
    p.add_argument("--jobs-a", type=int, default=1)
    p.add_argument("--jobs-b", type=int, default=8)
    p.add_argument("run_a")
    p.add_argument("run_b")
    p = sub.add_parser("grpo")
    common(p)
    p.add_argument("--jobs", type=int, required=True)
    p.add_argument("--head-jobs", type=int, default=None, help="the head's runs' jobs, where not --jobs")
    p.add_argument("--mix", required=True, help="the mix the runs evaluated")
    p.add_argument("runs", nargs="+", metavar="NAME=FILE", help="kgym bench --json outputs, e.g. base=a.json head=b.json")
    p = sub.add_parser("timing-precision", help="candidates re-measured, per-round CV and speedups against the "
                                                "first run's, for runs of one list")
    p.add_argument("runs", nargs="+", metavar="NAME=FILE",
                   help="kgym bench --json outputs or --out JSON lines, the first the yardstick")
    p = sub.add_parser("window")
    p.add_argument("runs", nargs="+", metavar="NAME=FILE", help="kgym bench --json outputs, e.g. head=b.json")
    p = sub.add_parser("two-rounds", help="what --timing-rounds 2 --timing-agree X would have said of runs made with "
                                          "three planned rounds")
    p.add_argument("--agree", type=float, default=0.003, help="the spread two rounds must lie within (0.003)")
    p.add_argument("runs", nargs="+", metavar="NAME=FILE", help="kgym bench --json outputs or --out JSON lines")
    p = sub.add_parser("coverage", help="each run's profile coverage against the first run's, pair by pair")
    p.add_argument("--floor", type=float, default=0.5, help="the coverage floor whose side is compared (0.5)")
    p.add_argument("runs", nargs="+", metavar="NAME=FILE", help="kgym bench --json outputs or --out JSON lines")
    sub.add_parser("make-mix")
    p = sub.add_parser("driver-counts", help="sum the judges' driver counts of a KGYM_JUDGE_PROFILE folder")
    p.add_argument("folder")
    args = ap.parse_args(argv)
    fn = {"gpu-check": gpu_check, "timing-stability": report_timing_stability, "throughput": report_throughput,
          "concurrency": report_concurrency, "grpo": report_grpo, "window": report_window,
          "timing-precision": report_timing_precision, "two-rounds": report_two_rounds, "coverage": report_coverage,
          "make-mix": make_mix, "driver-counts": report_driver_counts}[args.cmd]
    try:
        return fn(args)
    except ReportError as e:
        print(f"gpu_report.py {args.cmd}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
