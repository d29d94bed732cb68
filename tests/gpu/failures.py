"""Prints why each non-correct result of kgym bench JSON documents failed (files on the command line)."""
import json
import sys

for path in sys.argv[1:]:
    doc = json.load(open(path))
    for e in doc.get("results", []):
        r = e.get("result")
        if not r or r.get("verdict") == "correct":
            continue
        err = r.get("error") or {}
        failed = [s for s in r.get("stages", []) if s["status"] == "fail"]
        print(path.split("/")[-1], e.get("label", "")[:50], r["verdict"], "|", (failed[0]["detail"][:300] if failed else ""),
              "|", str(err.get("type")), str(err.get("message"))[:300], "| hacks", [h["type"] for h in r.get("hacks", [])])
