"""A scripted stand-in for `kgym serve` for the client's tests (stdlib only, keep-alive HTTP/1.1).

    with FakeKgym() as srv:            # srv.url, srv.log (every request), srv.connections()
        ...

What POST /evaluate answers is chosen by a directive in the candidate's code, so every sample of a
batch can misbehave its own way:  "# fake: verdict=correct speedup=2 fail=500*2 slow=3"
  verdict=correct|incorrect|compile_error|blank (blank: a 200 with "{}")   speedup=S (correct only)
  reject=400|413   the request is refused with that status, {error, field: "kernel_code"}
  fail=KIND*N      the first N requests with this code fail: 500, 503, 429 (Retry-After:
                   FakeKgym.retry_after), drop (the connection is closed without an answer),
                   empty (a 200 with an empty body)
  slow=N           /evaluate answers 202 {status: processing}; GET /v1/jobs/{task_id} says
                   "running" N times, then "done" with the response
  delay=S          /evaluate answers after S seconds (srv.max_in_flight: the most /evaluate
                   requests the server was handling at once)
With idle_close=True the server closes every connection right after answering (as a server's idle
timeout does) while still announcing keep-alive.
"""
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

DIRECTIVE = re.compile(r"#\s*fake:([^\n]*)")


def directives(code):
    m = DIRECTIVE.search(code or "")
    return dict(kv.split("=", 1) for kv in m.group(1).split() if "=" in kv) if m else {}


def response(task_id, d):
    v = d.get("verdict", "correct")
    if v == "blank":
        return {}
    base = {"task_id": task_id, "status": "completed", "compiled": True, "correctness": False, "decoy_kernel": False,
            "speedup": 0.0, "error_message": None, "error_code": None, "metadata": {}}
    if v == "correct":
        base.update(correctness=True, speedup=float(d.get("speedup", 1.0)),
                    kgym={"verdict": "correct", "reward": 1.0, "feedback": "correct on 8 variants"})
    elif v == "incorrect":
        base.update(error_message="elements differ", error_code="CORRECTNESS_ERROR",
                    kgym={"verdict": "incorrect", "reward": 0.7, "feedback": "elements differ at [3]"})
    elif v == "compile_error":
        base.update(status="failed", compiled=False, error_message="SyntaxError: invalid syntax",
                    error_code="COMPILATION_ERROR",
                    kgym={"verdict": "compile_error", "reward": 0.1, "feedback": "SyntaxError at line 3"})
    return base


class FakeKgym:
    def __init__(self, idle_close=False, retry_after="0"):
        self.idle_close = idle_close
        self.retry_after = retry_after
        self.log = []            # {"method", "path", "query", "body", "port"}
        self.lock = threading.Lock()
        self.failures = {}       # kernel_code -> failures served
        self.polls = {}          # task_id -> GETs served
        self.jobs = {}           # task_id -> (directives, response)
        self.in_flight = 0       # /evaluate requests being handled now
        self.max_in_flight = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def send(self, status, doc=None, raw=None, headers=()):
                data = raw if raw is not None else json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
                if fake.idle_close:
                    self.close_connection = True

            def record(self, body):
                u = urlsplit(self.path)
                with fake.lock:
                    fake.log.append({"method": self.command, "path": u.path, "query": parse_qs(u.query),
                                     "body": body, "port": self.client_address[1]})

            def do_GET(self):
                self.record(None)
                u = urlsplit(self.path)
                if not u.path.startswith("/v1/jobs/"):
                    return self.send(404, {"error": "unknown path", "field": None})
                tid = u.path[len("/v1/jobs/"):]
                with fake.lock:
                    if tid not in fake.jobs:
                        return self.send(404, {"error": "unknown id", "field": "id"})
                    d, resp = fake.jobs[tid]
                    n = fake.polls[tid] = fake.polls.get(tid, 0) + 1
                if n <= int(d.get("slow", 0)):
                    return self.send(200, {"id": tid, "status": "running"})
                return self.send(200, {"id": tid, "status": "done", "kernelgym": resp})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
                self.record(body)
                if self.path != "/evaluate":
                    return self.send(404, {"error": "unknown path", "field": None})
                with fake.lock:
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    return self.evaluate(body)
                finally:
                    with fake.lock:
                        fake.in_flight -= 1

            def evaluate(self, body):
                code, tid = body.get("kernel_code", ""), body.get("task_id")
                d = directives(code)
                if "delay" in d:
                    time.sleep(float(d["delay"]))
                if "fail" in d:
                    kind, count = d["fail"].split("*")
                    with fake.lock:
                        served = fake.failures.get(code, 0)
                        fake.failures[code] = served + (served < int(count))
                    if served < int(count):
                        if kind == "drop":
                            self.close_connection = True
                            return
                        if kind == "empty":
                            return self.send(200, raw=b"")
                        return self.send(int(kind), {"error": f"fake {kind}", "field": None},
                                         headers=[("Retry-After", fake.retry_after)] if kind == "429" else ())
                if "reject" in d:
                    return self.send(int(d["reject"]), {"error": "kernel_code refused", "field": "kernel_code"})
                resp = response(tid, d)
                with fake.lock:
                    fake.jobs[tid] = (d, resp)
                if int(d.get("slow", 0)):
                    return self.send(202, {"task_id": tid, "status": "processing"})
                return self.send(200, resp)

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # 5 by default: a burst of connections would wait for SYN retransmits
            daemon_threads = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def requests(self, method=None, path=None):
        with self.lock:
            return [r for r in self.log if (method is None or r["method"] == method) and
                    (path is None or r["path"].startswith(path))]

    def connections(self):
        """Distinct client ports seen: one per TCP connection."""
        with self.lock:
            return {r["port"] for r in self.log}


def dead_url():
    """A loopback URL with nothing listening (bound then closed: connection refused)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"
