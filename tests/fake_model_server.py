#!/usr/bin/env python3
"""A scripted OpenAI-compatible chat-completions server for kgym's tests (stdlib only).

    python3 tests/fake_model_server.py --script S.json --log requests.jsonl --port-file port.txt

It listens on 127.0.0.1 (a free port, written to --port-file), answers POST .../chat/completions with
replies chosen by a script, injects faults (HTTP errors, delays past the client's timeout, malformed bodies),
and logs every request as one JSON line, so tests can check what kgym sent the model.

Script (JSON):
  {"candidates_dir": "tests/fixtures/candidates",
   "replies": {"1": [R, ...], "2": [R, ...], "*": [R]},   # by turn; list indexed by sample % len
   "tasks": {"SUBSTRING": {"replies": {...}}},            # overrides when the first user message contains it
   "faults": [F, ...],                                    # consumed in order, each `count` times
   "delay": 0.0,                                          # seconds before every reply
   "evaluate_cmd": ["build/kgym", "eval", ...]}           # optional: also serve kgym's POST /evaluate
  With evaluate_cmd, POST /evaluate (KernelGYM's fields: task_id, reference_code, kernel_code, ...) writes the
  reference to a temporary task file, runs evaluate_cmd + ["--task", FILE, "--kernel", "-", "--json"] with
  kernel_code on stdin, and answers {"task_id", "status": "completed", "kgym": <the result>}: a stand-in for
  `kgym serve` that exercises kgym's client side of that contract.
  R: {"candidate": "ok"} (a fixture wrapped in chat prose and a ```python fence) | {"text": "..."}
  F: {"turn": 1, "sample": 0, "status": 429, "retry_after": 0, "count": 1}
     | {"delay": 3, "count": 1} | {"malformed": true, "count": 1}   (turn/sample optional filters)
The turn and sample come from kgym's X-Kgym-Request header ("task=..; sample=..; turn=.."), else the turn is
1 + the number of assistant messages and the sample 0.
"""
import argparse
import json
import os
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()


def parse_tag(tag):
    out = {}
    for part in (tag or "").split(";"):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out


class State:
    def __init__(self, script, log_path):
        self.script = script
        self.log_path = log_path
        self.faults = [dict(f) for f in script.get("faults", [])]
        self.cand_dir = script.get("candidates_dir", "tests/fixtures/candidates")

    def reply_text(self, item, sample, turn):
        if "text" in item:
            return item["text"]
        with open(os.path.join(self.cand_dir, item["candidate"] + ".py")) as f:
            code = f.read()
        return ("Let me think about the kernel step by step. (sample %d, turn %d)\n\n"
                "```python\n%s```\n\nThis implementation should be correct and fast." % (sample, turn, code))

    def choose(self, first_user, sample, turn):
        replies = self.script.get("replies", {})
        for sub, over in self.script.get("tasks", {}).items():
            if sub in first_user:
                replies = over.get("replies", replies)
                break
        items = replies.get(str(turn)) or replies.get("*")
        if not items:
            keys = sorted(int(k) for k in replies if k.isdigit() and int(k) <= turn)
            items = replies[str(keys[-1])] if keys else [{"text": "I have nothing to add."}]
        return items[sample % len(items)]

    def take_fault(self, sample, turn):
        with LOCK:
            for f in self.faults:
                if f.get("count", 1) <= 0:
                    continue
                if "turn" in f and f["turn"] != turn:
                    continue
                if "sample" in f and f["sample"] != sample:
                    continue
                f["count"] = f.get("count", 1) - 1
                return dict(f)
        return None

    def log(self, entry):
        if not self.log_path:
            return
        with LOCK:
            with open(self.log_path, "a") as f:
                f.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, headers=None):
        data = body.encode() if isinstance(body, str) else body
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout): exactly what some tests provoke

    def evaluate(self, raw):
        st = self.server.state
        body = json.loads(raw)
        st.log({"t": time.time(), "evaluate": {k: body.get(k) for k in ("task_id", "backend", "entry_point")},
                "reference_code": body["reference_code"], "kernel_code": body["kernel_code"]})
        with tempfile.TemporaryDirectory() as d:
            task = os.path.join(d, "task.py")
            with open(task, "w") as f:
                f.write(body["reference_code"])
            p = subprocess.run(st.script["evaluate_cmd"] + ["--task", task, "--kernel", "-", "--json"],
                               input=body["kernel_code"].encode(), capture_output=True, timeout=120)
        if p.returncode != 0:
            self.send(500, json.dumps({"error": p.stderr.decode(errors="replace")[-500:]}))
            return
        self.send(200, json.dumps({"task_id": body["task_id"], "status": "completed",
                                   "kgym": json.loads(p.stdout)}))

    def do_POST(self):
        st = self.server.state
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        if self.path.rstrip("/").endswith("/evaluate") and st.script.get("evaluate_cmd"):
            self.evaluate(raw)
            return
        try:
            body = json.loads(raw)
            messages = body["messages"]
            assert isinstance(messages, list) and body.get("model")
        except Exception:
            self.send(400, json.dumps({"error": {"message": "bad request"}}))
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.send(404, json.dumps({"error": {"message": "not found"}}))
            return
        tag = parse_tag(self.headers.get("X-Kgym-Request"))
        turn = int(tag.get("turn", 1 + sum(1 for m in messages if m.get("role") == "assistant")))
        sample = int(tag.get("sample", 0))
        first_user = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
        fault = st.take_fault(sample, turn)
        st.log({"t": time.time(), "task": tag.get("task"), "sample": sample, "turn": turn, "fault": fault,
                "auth": self.headers.get("Authorization"), "params": {k: v for k, v in body.items() if k != "messages"},
                "messages": messages})
        if st.script.get("delay"):
            time.sleep(float(st.script["delay"]))
        if fault:
            if "delay" in fault:
                time.sleep(float(fault["delay"]))
            if fault.get("malformed"):
                self.send(200, '{"choices": [{"message": {"role": "assist')
                return
            if "status" in fault:
                hdr = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else {}
                self.send(int(fault["status"]), json.dumps({"error": {"message": "injected %d" % fault["status"]}}), hdr)
                return
        text = st.reply_text(st.choose(first_user, sample, turn), sample, turn)
        prompt_chars = sum(len(m.get("content") or "") for m in messages)
        resp = {"id": "fake-%d-%d" % (sample, turn), "object": "chat.completion", "created": int(time.time()),
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt_chars // 4 + 1, "completion_tokens": len(text) // 4 + 1,
                          "total_tokens": prompt_chars // 4 + len(text) // 4 + 2}}
        self.send(200, json.dumps(resp))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--log")
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    with open(a.script) as f:
        script = json.load(f)
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    srv.state = State(script, a.log)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, a.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
