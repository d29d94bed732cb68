"""HTTP client of `kgym serve` (docs/service.md), standard library only.

    from kgym.client import Client
    c = Client("http://127.0.0.1:10907")            # token=... when the server has --token
    r = c.evaluate(reference_code, kernel_code)     # KernelGYM's response + r["kgym"] (full result)
    ids = c.submit_many([{"reference_code": ref, "kernel_code": k} for k in candidates])
    jobs = c.wait_all(ids)                          # kgym job objects: status, result, kernelgym, ...

`compute_score` has verl's custom-reward signature
(data_source, solution_str, ground_truth, extra_info=None) and calls the service:
ground_truth is the reference code (Dr. Kernel's reward_model.ground_truth).
"""

import json
import os
import time
import urllib.error
import urllib.request
import uuid

__all__ = ["Client", "KgymError", "compute_score", "drkernel_reward"]


class KgymError(Exception):
    """The service refused a request: HTTP status, message and the offending field."""

    def __init__(self, status, error, field=None):
        super().__init__(f"HTTP {status}: {error}" + (f" (field {field})" if field else ""))
        self.status = status
        self.error = error
        self.field = field


class Client:
    def __init__(self, url=None, token=None, timeout=1800.0, retries=5):
        self.url = (url or os.environ.get("KGYM_URL") or "http://127.0.0.1:10907").rstrip("/")
        self.token = token if token is not None else os.environ.get("KGYM_TOKEN")
        self.timeout = timeout
        self.retries = retries  # for 429 (queue full) and 503, honouring Retry-After

    # -- transport --
    def _call(self, method, path, body=None, timeout=None, raw=False):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=timeout or self.timeout) as f:
                    text = f.read()
                    return text.decode() if raw else json.loads(text)
            except urllib.error.HTTPError as e:
                text = e.read()
                try:
                    doc = json.loads(text)
                except ValueError:
                    doc = {"error": text.decode("utf-8", "replace"), "field": None}
                if e.code in (429, 503) and attempt < self.retries:
                    try:
                        delay = float(e.headers.get("Retry-After") or 1)
                    except ValueError:
                        delay = 1.0
                    time.sleep(min(delay, 30.0))
                    continue
                raise KgymError(e.code, doc.get("error"), doc.get("field")) from None

    # -- KernelGYM-compatible, synchronous --
    def evaluate(self, reference_code, kernel_code, task_id=None, force_refresh=False, **fields):
        """POST /evaluate: waits for the result (KernelGYM's EvaluationResponse with "kgym" added).
        If the server answers before the end (its --sync-timeout), polls until done."""
        body = dict(fields, task_id=task_id or "kgym_" + uuid.uuid4().hex[:16], reference_code=reference_code,
                    kernel_code=kernel_code, force_refresh=bool(force_refresh))
        r = self._call("POST", "/evaluate", body)
        if r.get("status") in ("pending", "processing"):
            job = self.wait(body["task_id"])
            r = job["kernelgym"]
        return r

    def evaluate_batch(self, requests, batch_id=None):
        """POST /evaluate/batch with up to 100 requests (each needs task_id; one is made if absent)."""
        tasks = [dict(r, task_id=r.get("task_id") or "kgym_" + uuid.uuid4().hex[:16]) for r in requests]
        return self._call("POST", "/evaluate/batch", {"batch_id": batch_id or uuid.uuid4().hex, "tasks": tasks})

    def status(self, task_id):
        return self._call("GET", f"/status/{task_id}")

    def results(self, task_id):
        return self._call("GET", f"/results/{task_id}")

    def health(self):
        return self._call("GET", "/health")

    def workers(self):
        return self._call("GET", "/workers/status")

    def metrics(self):
        return self._call("GET", "/metrics", raw=True)

    # -- native, asynchronous --
    def submit(self, kernel_code, reference_code=None, task=None, force_refresh=False, **fields):
        """POST /v1/jobs: queues one evaluation, returns its id at once.
        reference_code, or task (a KernelBench id on the server, e.g. "level1/19")."""
        body = dict(fields, kernel_code=kernel_code, force_refresh=bool(force_refresh))
        if reference_code is not None:
            body["reference_code"] = reference_code
        if task is not None:
            body["task"] = task
        return self._call("POST", "/v1/jobs", body)["id"]

    def submit_many(self, requests):
        """POST /v1/jobs with {"jobs": [...]}: all validated before any is queued."""
        ids = []
        for i in range(0, len(requests), 1000):
            r = self._call("POST", "/v1/jobs", {"jobs": list(requests[i:i + 1000])})
            ids += [j["id"] for j in r["jobs"]]
        return ids

    def get(self, job_id, wait=0):
        return self._call("GET", f"/v1/jobs/{job_id}?wait={wait:g}", timeout=wait + 60)

    def wait(self, job_id, timeout=None, poll=30.0):
        """Long-polls until the job is done, failed or cancelled (TimeoutError after timeout)."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            left = poll if end is None else max(0.0, min(poll, end - time.monotonic()))
            job = self.get(job_id, wait=left)
            if job["status"] not in ("queued", "running"):
                return job
            if end is not None and time.monotonic() >= end:
                raise TimeoutError(f"job {job_id} is still {job['status']}")

    def wait_all(self, ids, timeout=None):
        end = None if timeout is None else time.monotonic() + timeout
        return [self.wait(i, None if end is None else max(0.0, end - time.monotonic())) for i in ids]

    def cancel(self, job_id):
        return self._call("DELETE", f"/v1/jobs/{job_id}")

    def jobs(self, status=None, limit=100):
        q = f"?limit={limit}" + (f"&status={status}" if status else "")
        return self._call("GET", "/v1/jobs" + q)["jobs"]


def drkernel_reward(response, correct_weight=0.5, speed_weight=0.5, speedup_cap=3.0, coverage_weight=0.0,
                    penalty=0.0):
    """Dr. Kernel's calculate_reward_speedup over a KernelGYM response:
    failed/decoy -> penalty; else 0.5*correct + 0.5*min(speedup, 3) (+ coverage when correct)."""
    if response.get("status") != "completed" or response.get("decoy_kernel"):
        return penalty
    correct = 1.0 if response.get("correctness") else 0.0
    s = max(0.0, min(float(response.get("speedup") or 0.0), speedup_cap))
    r = correct_weight * correct + speed_weight * s
    meta = response.get("metadata") or {}
    total = meta.get("total_kernel_run_time_in_profiling_us") or 0
    if correct and coverage_weight and total:
        r += coverage_weight * (meta.get("custom_kernel_cuda_time_in_profiling_us") or 0) / total
    return r


_clients = {}


def compute_score(data_source, solution_str, ground_truth, extra_info=None, url=None, token=None,
                  reward="drkernel", timeout=1800.0, **kwargs):
    """verl custom reward function: evaluates the model's reply (solution_str; kgym extracts the code)
    against the reference (ground_truth) on the service at url ($KGYM_URL).
    reward="drkernel" (Dr. Kernel's speedup reward) or "staged" (kgym's staged partial credit).
    Returns {"score": float, ...} with the verdict and feedback for logging; never raises for a
    bad candidate (an unreachable service does raise: a trainer should not silently score 0)."""
    key = (url, token)
    if key not in _clients:
        _clients[key] = Client(url, token, timeout=timeout)
    c = _clients[key]
    try:
        r = c.evaluate(ground_truth, solution_str, **kwargs)
    except KgymError as e:
        if e.status >= 500 or e.status == 401:
            raise
        return {"score": 0.0, "verdict": "rejected", "feedback": str(e), "correctness": False, "speedup": 0.0}
    result = r.get("kgym") or {}
    score = result.get("reward", 0.0) if reward == "staged" else drkernel_reward(r)
    return {"score": float(score), "verdict": result.get("verdict"), "feedback": result.get("feedback") or "",
            "correctness": bool(r.get("correctness")), "speedup": float(r.get("speedup") or 0.0),
            "compiled": bool(r.get("compiled"))}
