"""Prints the timing and profile blocks of kgym results (JSON on stdin: one result or a bench document)."""
import json
import sys

doc = json.load(sys.stdin)
results = [e.get("result") for e in doc["results"]] if "results" in doc else [doc]
for r in results:
    if not r:
        continue
    t, p = r.get("timing"), r.get("profile")
    name = r.get("task", {}).get("name") if isinstance(r.get("task"), dict) else r.get("task")
    line = f"{str(name)[:40]:40} {r['verdict']:10} wall {r.get('wall_ms', 0):7.0f} ms"
    if t:
        line += (f" ref {t['reference_ms']['trimmed_mean']:.4f} cand {t['candidate_ms']['trimmed_mean']:.4f} "
                 f"speedup {t['speedup']:.3f} ci {t['speedup_ci']} rcv {t['round_cv']:.4f} rounds {t['rounds_run']}"
                 f" clock {t['clock']}")
    if p:
        line += f" coverage {p['coverage']} top {[(k['name'][:30], round(k['device_us'], 1), k['candidate']) for k in p['kernels'][:3]]}"
    if r.get("hacks"):
        line += f" hacks {[h['type'] for h in r['hacks']]}"
    print(line)
    stages = {s["name"]: round(s["ms"]) for s in r.get("stages", [])}
    print("    stages", stages)
