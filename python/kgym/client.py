"""HTTP client of `kgym serve` (docs/service.md), standard library only.

    from kgym.client import Client
    c = Client("http://127.0.0.1:10907")            # token=... when the server has --token
    r = c.evaluate(reference_code, kernel_code)     # KernelGYM's response + r["kgym"] (full result)
    ids = c.submit_many([{"reference_code": ref, "kernel_code": k} for k in candidates])
    jobs = c.wait_all(ids)                          # kgym job objects: status, result, kernelgym, ...

Transport.  One keep-alive `http.client` connection per thread and client (a
trainer scores from thread pools; http.client connections are not thread
safe), reopened after a fork.  Connection errors, timeouts, HTTP 5xx, 429 and
a 2xx body that is not JSON are retried with bounded exponential backoff and
jitter (`Retry`), waiting at least the server's Retry-After; other 4xx are the
caller's mistake and raise `KgymError` at once.  When the retries are spent,
`KgymUnavailable` is raised.  Every POST is safe to repeat: a request carries
an id made here (task_id / id), and the server answers a known id with that
job instead of queueing it twice.

verl.  `compute_score` (verl's custom-reward signature), `compute_score_batch`
(the `batch` reward manager), `compute_score_async` (coroutine: the reward
loop's managers await it) and `compute_score_scalar` (the `prime` manager,
which wants a number) -- see docs/service.md, "verl".
"""

import asyncio
import functools
import http.client
import json
import os
import random
import threading
import time
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor

__all__ = ["Client", "KgymError", "KgymUnavailable", "Retry", "compute_score", "compute_score_async",
           "compute_score_batch", "compute_score_scalar", "drkernel_reward", "SCORE_KEYS"]


class KgymError(Exception):
    """The service refused a request: HTTP status, message and the offending field."""

    def __init__(self, status, error, field=None):
        super().__init__(f"HTTP {status}: {error}" + (f" (field {field})" if field else ""))
        self.status = status
        self.error = error
        self.field = field

    def __reduce__(self):
        # Rebuilt from its fields, not from args (the message): an exception raised in a process
        # pool's worker (verl's prime manager) or a Ray actor is pickled back to the caller.
        return type(self), (self.status, self.error, self.field)


class KgymUnavailable(KgymError):
    """The service could not be reached or kept failing (5xx, 429, dropped connections, bodies
    that are not JSON) after every retry: a fault of the service, not of the candidate.
    status is the last HTTP status, None when there was no answer at all."""


class Retry:
    """Bounded exponential backoff with jitter.  Attempt k (0-based) waits a uniform time in
    [d/2, d], d = min(cap, base * 2**k), so clients restarted together do not retry in step;
    a Retry-After from the server is waited at least (up to max_retry_after).  After
    `attempts` retries the error is raised.  sleep and rand are injectable for tests.
    Defaults from $KGYM_RETRIES (8) and $KGYM_BACKOFF (0.5 s): 9 tries over 45-90 s."""

    def __init__(self, attempts=None, base=None, cap=30.0, max_retry_after=300.0, sleep=time.sleep,
                 rand=random.random):
        self.attempts = int(os.environ.get("KGYM_RETRIES", 8) if attempts is None else attempts)
        self.base = float(os.environ.get("KGYM_BACKOFF", 0.5) if base is None else base)
        self.cap = cap
        self.max_retry_after = max_retry_after
        self.sleep = sleep
        self.rand = rand

    def delay(self, attempt, retry_after=None):
        d = min(self.cap, self.base * 2 ** attempt)
        d *= 0.5 + 0.5 * self.rand()
        if retry_after is not None:
            d = max(d, min(retry_after, self.max_retry_after))
        return d


# The server closed the connection (after an idle keep-alive, or before answering).
_CLOSED = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


def _retry_after(value):
    """Retry-After in seconds (the delta form; an HTTP date is ignored: backoff applies)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class Client:
    def __init__(self, url=None, token=None, timeout=1900.0, retry=None, poll=30.0, retries=None):
        self.url = (url or os.environ.get("KGYM_URL") or "http://127.0.0.1:10907").rstrip("/")
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {self.url!r}")
        self._https = parts.scheme == "https"
        self._host, self._port, self._prefix = parts.hostname, parts.port, parts.path
        self.token = token if token is not None else os.environ.get("KGYM_TOKEN")
        self.timeout = timeout  # per request; above the server's --sync-timeout (1,800 s) so /evaluate's 202 arrives
        self.retry = retry or Retry(attempts=retries)
        self.poll = poll  # long-poll length while waiting for a job (the server caps it at 600 s)
        self._local = threading.local()
        self._pid = os.getpid()

    # -- transport --
    def _conn(self):
        """This thread's connection (a fresh one in a forked child: never share a socket)."""
        if self._pid != os.getpid():
            self._local, self._pid = threading.local(), os.getpid()
        c = getattr(self._local, "conn", None)
        if c is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            c = self._local.conn = cls(self._host, self._port, timeout=self.timeout)
        return c

    def _drop(self):
        c = getattr(self._local, "conn", None)
        self._local.conn = None
        if c is not None:
            c.close()

    def _once(self, method, path, data, timeout):
        c = self._conn()
        reused = c.sock is not None
        c.timeout = timeout
        if c.sock is not None:
            c.sock.settimeout(timeout)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        try:
            c.request(method, self._prefix + path, body=data, headers=headers)
            r = c.getresponse()
            text = r.read()
        except BaseException as e:
            self._drop()  # a half-read answer must never be read as the next one's
            if reused and isinstance(e, _CLOSED):
                # The server closed an idle keep-alive connection: a normal event, retried at
                # once on a new connection without counting as a failure.
                return self._once(method, path, data, timeout)
            raise
        if r.will_close:
            self._drop()
        return r.status, r.headers, text

    def _request(self, method, path, body=None, timeout=None, raw=False):
        """(HTTP status, parsed body).  Retries what a retry can fix (module docstring)."""
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(self.retry.attempts + 1):
            status, wait = None, None
            try:
                status, headers, text = self._once(method, path, data, timeout or self.timeout)
            except (OSError, http.client.HTTPException) as e:  # refused, reset, timed out, bad status line
                why = f"{type(e).__name__}: {e}"
            else:
                if status < 400:
                    if status == 202 and not text.strip():
                        return status, {}  # accepted, nothing to say: the caller polls
                    if raw:
                        return status, text.decode("utf-8", "replace")
                    try:
                        doc = json.loads(text)
                        if isinstance(doc, dict):
                            return status, doc
                    except ValueError:
                        pass
                    why = f"HTTP {status} with a body that is not a JSON object ({len(text)} bytes)"
                else:
                    try:
                        doc = json.loads(text)
                        doc = doc if isinstance(doc, dict) else {}
                    except ValueError:
                        doc = {"error": text.decode("utf-8", "replace")[:500] or f"HTTP {status}"}
                    if status != 429 and status < 500:
                        raise KgymError(status, doc.get("error"), doc.get("field"))
                    why = f"HTTP {status}: {doc.get('error')}"
                    wait = _retry_after(headers.get("Retry-After"))
            if attempt < self.retry.attempts:
                self.retry.sleep(self.retry.delay(attempt, wait))
        raise KgymUnavailable(status, f"{method} {self.url}{path} failed {self.retry.attempts + 1} times; "
                              f"last: {why}")

    def _call(self, method, path, body=None, timeout=None, raw=False):
        return self._request(method, path, body, timeout, raw)[1]

    # -- KernelGYM-compatible, synchronous --
    def evaluate(self, reference_code, kernel_code, task_id=None, force_refresh=False, deadline=None, **fields):
        """POST /evaluate: waits for the result (KernelGYM's EvaluationResponse with "kgym" added).
        A job still running after the server's --sync-timeout is answered pending (202 from older
        servers): then the job is long-polled on /v1/jobs/{task_id} (re-POSTing would only wait again
        from the start).  deadline: seconds for the whole call, polling included (default none: a job
        may wait long in a busy server's queue); a job not finished by then raises KgymUnavailable
        (the job itself goes on on the server: ask for it again with results(task_id))."""
        end = None if deadline is None else time.monotonic() + float(deadline)
        body = dict(fields, task_id=task_id or "kgym_" + uuid.uuid4().hex[:16], reference_code=reference_code,
                    kernel_code=kernel_code, force_refresh=bool(force_refresh))
        status, r = self._request("POST", "/evaluate", body)
        if status == 202 or r.get("status") in ("pending", "processing"):
            try:
                job = self.wait(body["task_id"], timeout=None if end is None else max(0.0, end - time.monotonic()))
            except TimeoutError as e:
                raise KgymUnavailable(None, f"{e} after the {deadline:g} s deadline") from None
            r = job.get("kernelgym") or {}
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
        reference_code, or task (a KernelBench id on the server, e.g. "level1/19").
        The id is made here unless given, so a retried POST cannot queue the job twice."""
        body = dict(fields, kernel_code=kernel_code, force_refresh=bool(force_refresh))
        body.setdefault("id", "job-" + uuid.uuid4().hex)
        if reference_code is not None:
            body["reference_code"] = reference_code
        if task is not None:
            body["task"] = task
        return self._call("POST", "/v1/jobs", body)["id"]

    def submit_many(self, requests):
        """POST /v1/jobs with {"jobs": [...]}: all validated before any is queued."""
        ids = []
        for i in range(0, len(requests), 1000):
            chunk = [r if r.get("id") or r.get("task_id") else dict(r, id="job-" + uuid.uuid4().hex)
                     for r in requests[i:i + 1000]]
            r = self._call("POST", "/v1/jobs", {"jobs": chunk})
            ids += [j["id"] for j in r["jobs"]]
        return ids

    def get(self, job_id, wait=0):
        return self._call("GET", f"/v1/jobs/{job_id}?wait={wait:g}", timeout=wait + 60)

    def wait(self, job_id, timeout=None, poll=None):
        """Long-polls until the job is done, failed or cancelled (TimeoutError after timeout).
        A server that answers a long poll early (a proxy, an older server) is polled again only
        after a backoff, never in a tight loop."""
        poll = self.poll if poll is None else poll
        end = None if timeout is None else time.monotonic() + timeout
        early = 0
        while True:
            left = poll if end is None else max(0.0, min(poll, end - time.monotonic()))
            t0 = time.monotonic()
            job = self.get(job_id, wait=left)
            if job.get("status") not in ("queued", "running"):
                return job
            if end is not None and time.monotonic() >= end:
                raise TimeoutError(f"job {job_id} is still {job.get('status')}")
            if time.monotonic() - t0 < left / 2:
                self.retry.sleep(min(self.retry.delay(early), left))
                early += 1

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


# -- verl --

SCORE_KEYS = ("score", "verdict", "compiled", "correctness", "speedup", "feedback", "error")
"""Every dict compute_score returns has exactly these keys, with one type per key (float, str,
bool, bool, float, str, str): verl stacks each key across the batch (KeyError on a missing
one) and skips string-valued keys in its validation metrics."""

_clients = {}
_clients_lock = threading.Lock()
_pools = {}  # concurrency -> ThreadPoolExecutor (this process's)


def _client(url, token, timeout):
    key = (url or os.environ.get("KGYM_URL"), token if token is not None else os.environ.get("KGYM_TOKEN"),
           timeout, os.getpid())
    with _clients_lock:
        if key not in _clients:
            _clients[key] = Client(key[0], key[1], timeout=timeout)
        return _clients[key]


def _failure(failure_reward, error, verdict=""):
    return {"score": float(failure_reward), "verdict": verdict, "compiled": False, "correctness": False,
            "speedup": 0.0, "feedback": "", "error": str(error)}


def compute_score(data_source=None, solution_str=None, ground_truth=None, extra_info=None, *, url=None,
                  token=None, reward="drkernel", failure_reward=0.0, timeout=1900.0, request=None,
                  on_unavailable="raise", deadline=None, **ignored):
    """verl custom reward function: evaluates the model's reply (solution_str; kgym extracts the
    code) against the reference (ground_truth: the reference code, Dr. Kernel's
    reward_model.ground_truth) on the service at url ($KGYM_URL).

    reward: "drkernel" (Dr. Kernel's speedup reward) or "staged" (kgym's staged partial credit).
    failure_reward: the score of a candidate that could not be evaluated (empty reply, a request
    the server refused with 4xx).  request: extra KernelGYM request fields (num_perf_trials, ...).
    Keyword arguments verl adds (reward_router_address, reward_model_tokenizer, ...) are ignored:
    only `request` reaches the HTTP body.

    Returns a dict with exactly SCORE_KEYS whatever happens.  A service that stays unreachable
    after the retries raises KgymUnavailable (on_unavailable="raise", the default: a trainer
    must not learn from zeros that mean "the server was down"; verl's naive/dapo managers let
    the step fail); on_unavailable="score" returns the failure dict instead.  deadline: seconds for
    the whole evaluation, queueing and polling included (default none); past it the job counts as
    unavailable.  A wrong token (401/403) always raises."""
    if not isinstance(solution_str, str) or not solution_str.strip():
        return _failure(failure_reward, "empty reply: no code to evaluate", "invalid")
    if not isinstance(ground_truth, str) or not ground_truth.strip():
        return _failure(failure_reward, "no reference code (reward_model.ground_truth is empty)")
    try:
        r = _client(url, token, timeout).evaluate(ground_truth, solution_str, deadline=deadline,
                                                  **dict(request or {}))
    except KgymUnavailable as e:
        if on_unavailable == "raise":
            raise
        return _failure(failure_reward, e)
    except KgymError as e:
        if e.status in (401, 403):
            raise
        return _failure(failure_reward, e, "rejected")
    result = r.get("kgym") or {}
    if reward == "staged":
        score = result.get("reward") if r.get("kgym") else failure_reward
    else:
        score = drkernel_reward(r, penalty=failure_reward)
    error = "" if r.get("status") == "completed" else (r.get("error_message") or r.get("error_code") or
                                                       f"status {r.get('status')!r}")
    return {"score": float(score if score is not None else failure_reward), "verdict": str(result.get("verdict") or ""),
            "compiled": bool(r.get("compiled")), "correctness": bool(r.get("correctness")),
            "speedup": float(r.get("speedup") or 0.0), "feedback": str(result.get("feedback") or ""),
            "error": str(error or "")}


def compute_score_scalar(data_source=None, solution_str=None, ground_truth=None, extra_info=None, **kwargs):
    """compute_score's score alone, for verl's `prime` manager: it takes float(result) or
    result[0], so a dict would zero the whole batch."""
    return compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)["score"]


def _concurrency(concurrency=None):
    n = int(os.environ.get("KGYM_CONCURRENCY", 32) if concurrency is None else concurrency)
    if n < 1:
        raise ValueError(f"concurrency must be at least 1, not {n}")
    return n


def _executor(concurrency=None):
    """The long-lived pool of this size (concurrency, else $KGYM_CONCURRENCY, else 32), so its
    threads' keep-alive connections outlive a batch.  A forked child starts with none: the
    parent's pool has no threads there and would take work without ever doing it."""
    n = _concurrency(concurrency)
    with _clients_lock:
        pool = _pools.get(n)
        if pool is None:
            pool = _pools[n] = ThreadPoolExecutor(n, thread_name_prefix=f"kgym-score-{n}")
        return pool


def _after_fork_in_child():
    global _clients_lock
    _clients_lock = threading.Lock()  # another thread may have held it at the fork
    _pools.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def compute_score_batch(data_sources=None, solution_strs=None, ground_truths=None, extra_infos=None, *,
                        concurrency=None, **kwargs):
    """verl's `batch` reward manager form: lists in, a list of compute_score dicts out (same
    order), evaluated concurrently by `concurrency` threads ($KGYM_CONCURRENCY, 32).  The first
    exception (KgymUnavailable, a wrong token) is raised, as compute_score raises it."""
    n = len(solution_strs)
    data_sources = list(data_sources) if data_sources is not None else [None] * n
    extra_infos = list(extra_infos) if extra_infos is not None else [None] * n
    ground_truths = list(ground_truths)
    if not (len(data_sources) == len(ground_truths) == len(extra_infos) == n):
        raise ValueError("compute_score_batch: the lists differ in length")
    fn = functools.partial(compute_score, **kwargs)
    return list(_executor(concurrency).map(fn, data_sources, solution_strs, ground_truths, extra_infos))


async def compute_score_async(data_source=None, solution_str=None, ground_truth=None, extra_info=None, *,
                              concurrency=None, **kwargs):
    """compute_score as a coroutine (verl's reward-loop managers await a coroutine function, one
    per sample, all at once): the blocking HTTP call, retries and backoff included, runs in a
    thread of a pool of `concurrency` threads ($KGYM_CONCURRENCY, 32), so the event loop stays
    free and up to that many evaluations are in flight; more wait for a thread.  Returns and
    raises what compute_score returns and raises.  A cancelled await does not stop its thread:
    the evaluation finishes (bounded by timeout/deadline) and its result is dropped."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(concurrency), functools.partial(
        compute_score, data_source, solution_str, ground_truth, extra_info, **kwargs))
