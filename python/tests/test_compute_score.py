"""kgym.client's transport and verl functions against a scripted fake server
(fake_kgym_server.py): retries and backoff, Retry-After, 4xx not retried, dead servers,
202 then polling, keep-alive reuse, the same keys for every outcome, verl's extra keyword
arguments kept out of the request, the batch and async forms (concurrent, bounded, the
event loop left free), exceptions that survive pickling (a process pool), a pool per forked
process.  No verl needed (that is test_verl_reward.py); retry delays are injected: only the
fake server's delay=S answers take real time (a few seconds in all)."""

import asyncio
import inspect
import multiprocessing
import pickle
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_kgym_server import FakeKgym, dead_url  # noqa: E402
from kgym import client as kc  # noqa: E402
from kgym.client import (SCORE_KEYS, Client, KgymError, KgymUnavailable, Retry, compute_score,  # noqa: E402
                         compute_score_async, compute_score_batch, compute_score_scalar)

REF = "class Model:\n    pass  # the reference\n"
TYPES = {"score": float, "verdict": str, "compiled": bool, "correctness": bool, "speedup": float,
         "feedback": str, "error": str}


def cand(directive):
    return f"```python\n# fake: {directive}\nclass ModelNew:\n    pass\n```\n"


class Sleeps(list):
    """Records the delays instead of sleeping."""

    def __call__(self, seconds):
        self.append(seconds)


@pytest.fixture
def srv():
    with FakeKgym() as s:
        yield s


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    """compute_score builds its own Client: make its default backoff tiny (env) and its cache fresh."""
    monkeypatch.setenv("KGYM_RETRIES", "3")
    monkeypatch.setenv("KGYM_BACKOFF", "0.001")
    monkeypatch.setattr(kc, "_clients", {})


def client(url, attempts=3, rand=lambda: 1.0, **kw):
    sleeps = Sleeps()
    return Client(url, retry=Retry(attempts=attempts, base=1.0, cap=8.0, sleep=sleeps, rand=rand), **kw), sleeps


def check_keys(s):
    assert set(s) == set(SCORE_KEYS), s
    for k, t in TYPES.items():
        assert type(s[k]) is t, (k, s[k])


# -- transport --

def test_5xx_retried_with_exponential_backoff(srv):
    c, sleeps = client(srv.url, attempts=5)
    r = c.evaluate(REF, cand("fail=500*3 verdict=correct"))
    assert r["correctness"] is True
    assert len(srv.requests("POST", "/evaluate")) == 4
    assert sleeps == [1.0, 2.0, 4.0]  # base * 2**k, rand=1 -> the top of the jitter range


def test_jitter_stays_within_half_to_full_delay():
    r = Retry(attempts=3, base=1.0, cap=8.0, rand=lambda: 0.0)
    assert [r.delay(k) for k in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]  # halves, capped at 8/2
    r.rand = lambda: 0.999
    assert all(d / 2 <= r.delay(k) <= d for k, d in enumerate([1, 2, 4, 8, 8]))


def test_429_honours_retry_after():
    with FakeKgym(retry_after="7") as s:
        c, sleeps = client(s.url)
        assert c.evaluate(REF, cand("fail=429*1"))["correctness"] is True
        assert sleeps == [7.0]  # Retry-After 7 > the first backoff (1 s)
        assert len(s.requests("POST")) == 2


def test_dropped_connections_and_empty_bodies_are_retried(srv):
    c, sleeps = client(srv.url)
    assert c.evaluate(REF, cand("fail=drop*2 verdict=incorrect"))["error_code"] == "CORRECTNESS_ERROR"
    assert len(srv.requests("POST")) == 3
    assert c.evaluate(REF, cand("fail=empty*1"))["correctness"] is True
    assert len(srv.requests("POST")) == 5


def test_4xx_is_not_retried(srv):
    c, sleeps = client(srv.url)
    with pytest.raises(KgymError) as e:
        c.evaluate(REF, cand("reject=400"))
    assert e.value.status == 400 and e.value.field == "kernel_code"
    assert not isinstance(e.value, KgymUnavailable)
    assert len(srv.requests("POST")) == 1 and sleeps == []


def test_dead_server_raises_after_bounded_retries():
    c, sleeps = client(dead_url(), attempts=4)
    with pytest.raises(KgymUnavailable) as e:
        c.evaluate(REF, cand("verdict=correct"))
    assert e.value.status is None and "failed 5 times" in str(e.value)
    assert sleeps == [1.0, 2.0, 4.0, 8.0]


def test_persistent_503_raises_with_its_status(srv):
    c, sleeps = client(srv.url, attempts=2)
    with pytest.raises(KgymUnavailable) as e:
        c.evaluate(REF, cand("fail=503*99"))
    assert e.value.status == 503 and len(srv.requests("POST")) == 3


def test_keep_alive_one_connection_for_many_requests(srv):
    c, _ = client(srv.url)
    for v in ("correct", "incorrect", "compile_error", "correct"):
        c.evaluate(REF, cand(f"verdict={v}"))
    assert len(srv.requests("POST")) == 4 and len(srv.connections()) == 1


def test_idle_closed_connection_is_reopened_without_backoff():
    with FakeKgym(idle_close=True) as s:
        c, sleeps = client(s.url)
        for _ in range(3):
            assert c.evaluate(REF, cand("verdict=correct"))["correctness"] is True
        assert sleeps == [] and len(s.connections()) == 3


def test_202_polls_the_job_instead_of_reposting(srv):
    c, sleeps = client(srv.url, poll=30.0)
    r = c.evaluate(REF, cand("slow=3 verdict=correct speedup=2"))
    assert r["correctness"] is True and r["speedup"] == 2.0
    posts, gets = srv.requests("POST"), srv.requests("GET", "/v1/jobs/")
    assert len(posts) == 1 and len(gets) == 4
    assert {g["path"] for g in gets} == {"/v1/jobs/" + posts[0]["body"]["task_id"]}
    assert all(g["query"]["wait"] == ["30"] for g in gets)
    # The fake answers long polls at once: each early answer is followed by a growing backoff.
    assert sleeps == [1.0, 2.0, 4.0]


def test_polling_ends_at_the_deadline(srv):
    c, _ = client(srv.url, poll=30.0)
    with pytest.raises(KgymUnavailable, match="still running after the 0 s deadline"):
        c.evaluate(REF, cand("slow=50 verdict=correct"), deadline=0)
    assert len(srv.requests("POST")) == 1  # never re-posted
    # A job that did not finish in time is the service's failure, not the candidate's: compute_score raises
    # it, or with on_unavailable="score" scores it as a failure and says why.
    with pytest.raises(KgymUnavailable):
        compute_score(solution_str=cand("slow=50 verdict=correct"), ground_truth=REF, url=srv.url, deadline=0)
    r = compute_score(solution_str=cand("slow=50 verdict=correct"), ground_truth=REF, url=srv.url, deadline=0,
                      on_unavailable="score")
    assert r["score"] == 0.0 and "deadline" in r["error"]
    # Without a deadline the same job is simply waited for.
    assert c.evaluate(REF, cand("slow=3 verdict=correct"))["correctness"] is True


def test_submit_makes_ids_so_a_retried_post_is_idempotent():
    with FakeKgym() as s:
        c, _ = client(s.url)
        with pytest.raises(KgymError):  # the fake has no /v1/jobs POST: 404, but the body is logged
            c.submit("code", reference_code=REF)
        assert s.requests("POST")[0]["body"]["id"].startswith("job-")


# -- verl functions --

OUTCOMES = {
    "correct": ("verdict=correct speedup=2", 1.5, True, True),
    "incorrect": ("verdict=incorrect", 0.0, True, False),
    "compile_error": ("verdict=compile_error", -1.0, False, False),
    "refused": ("reject=413", -1.0, False, False),
    "blank_json": ("verdict=blank", -1.0, False, False),
    "flaky": ("fail=500*2 verdict=correct", 1.0, True, True),
    "slow": ("slow=2 verdict=incorrect", 0.0, True, False),
}


def run_async(*args, **kwargs):
    """compute_score_async awaited in an event loop of its own, as a reward-loop worker does."""
    return asyncio.run(compute_score_async(*args, **kwargs))


FORMS = {"sync": compute_score, "async": run_async}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("name", sorted(OUTCOMES))
def test_every_outcome_has_every_key(srv, name, form):
    directive, score, compiled, correct = OUTCOMES[name]
    s = FORMS[form]("kernelbench", cand(directive), REF, {"index": 3}, url=srv.url, failure_reward=-1.0)
    check_keys(s)
    assert (s["score"], s["compiled"], s["correctness"]) == (score, compiled, correct)
    assert (s["error"] == "") == (name in ("correct", "incorrect", "flaky", "slow"))
    # Retries happen in the async form too: the flaky candidate is posted three times.
    assert len(srv.requests("POST", "/evaluate")) == {"flaky": 3}.get(name, 1)


@pytest.mark.parametrize("reply", ["", "   \n", None])
def test_empty_reply_scores_the_failure_reward_without_a_request(srv, reply):
    s = compute_score("kernelbench", reply, REF, url=srv.url, failure_reward=-0.5)
    check_keys(s)
    assert s["score"] == -0.5 and s["verdict"] == "invalid" and "empty" in s["error"]
    assert srv.requests() == []


def test_dead_server_raises_or_scores_as_asked():
    url = dead_url()
    with pytest.raises(KgymUnavailable):
        compute_score("kernelbench", cand("verdict=correct"), REF, url=url)
    s = compute_score("kernelbench", cand("verdict=correct"), REF, url=url, on_unavailable="score",
                      failure_reward=-2.0)
    check_keys(s)
    assert s["score"] == -2.0 and "failed 4 times" in s["error"]


def test_verls_keyword_arguments_stay_out_of_the_request(srv):
    tok = object()
    s = compute_score(data_source="kernelbench", solution_str=cand("verdict=correct"), ground_truth=REF,
                      extra_info={"num_turns": 2, "rollout_reward_scores": {}}, url=srv.url,
                      reward_router_address="127.0.0.1:1", reward_model_tokenizer=tok, return_dict=True,
                      request={"num_perf_trials": 7})
    assert s["correctness"] is True
    body = srv.requests("POST")[0]["body"]
    assert set(body) == {"task_id", "reference_code", "kernel_code", "force_refresh", "num_perf_trials"}
    assert body["num_perf_trials"] == 7 and body["reference_code"] == REF


def test_staged_reward(srv):
    assert compute_score("k", cand("verdict=incorrect"), REF, url=srv.url, reward="staged")["score"] == 0.7
    assert compute_score("k", cand("verdict=blank"), REF, url=srv.url, reward="staged",
                         failure_reward=-1.0)["score"] == -1.0


def test_positional_call_and_scalar_form(srv):
    # verl's prime manager calls evaluation_func(data_source, solution, ground_truth, extra_info)
    assert compute_score_scalar("kernelbench", cand("verdict=correct speedup=3"), REF, None,
                                url=srv.url) == 2.0
    assert compute_score("kernelbench", cand("verdict=incorrect"), REF, None, url=srv.url)["verdict"] == "incorrect"


def test_batch_form_keeps_order_and_keys(srv):
    names = sorted(OUTCOMES)
    out = compute_score_batch(data_sources=["kernelbench"] * len(names),
                              solution_strs=[cand(OUTCOMES[n][0]) for n in names],
                              ground_truths=[REF] * len(names), extra_infos=[{"i": i} for i in range(len(names))],
                              url=srv.url, failure_reward=-1.0)
    assert [s["score"] for s in out] == [OUTCOMES[n][1] for n in names]
    for s in out:
        check_keys(s)


def test_async_form_is_a_coroutine_function(srv):
    assert inspect.iscoroutinefunction(compute_score_async)

    async def main():
        return await asyncio.gather(*[
            compute_score_async(data_source="kernelbench", solution_str=cand(f"verdict=correct speedup={k}"),
                                ground_truth=REF, extra_info={}, url=srv.url, reward_model_tokenizer=None)
            for k in (1, 2, 3)])

    out = asyncio.run(main())
    assert [s["score"] for s in out] == [1.0, 1.5, 2.0]
    for s in out:
        check_keys(s)


async def gather_with_ticker(calls):
    """(results, longest gap between ticks of a coroutine that wakes every 10 ms meanwhile,
    seconds): a blocked event loop shows up as a long gap."""
    gaps, done = [0.0], False

    async def ticker():
        last = time.monotonic()
        while not done:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    t = asyncio.ensure_future(ticker())
    t0 = time.monotonic()
    try:
        out = await asyncio.gather(*calls)
    finally:
        done = True
        await t
    return out, max(gaps), time.monotonic() - t0


def test_async_calls_overlap_and_leave_the_loop_free(srv, monkeypatch):
    """verl's reward loop awaits one compute_score_async per sample, all at once: 8 answers that
    each take 0.5 s must overlap (8 in flight at the server, well under 8 x 0.5 s in all), and
    the loop must keep running other coroutines meanwhile."""
    monkeypatch.delenv("KGYM_CONCURRENCY", raising=False)
    calls = [compute_score_async("kernelbench", cand(f"delay=0.5 verdict=correct speedup={k}"), REF, {},
                                 url=srv.url) for k in range(8)]
    out, gap, elapsed = asyncio.run(gather_with_ticker(calls))
    assert [s["score"] for s in out] == [0.5 * (1 + min(k, 3)) for k in range(8)]  # in order
    assert srv.max_in_flight == 8, (elapsed, len(srv.requests("POST")))
    assert elapsed < 2.0, elapsed        # sequential: 4 s
    assert gap < 0.25, gap               # a blocking call would stall the ticker for 0.5 s


@pytest.mark.parametrize("how", ["keyword", "environment"])
def test_async_pool_size_bounds_the_evaluations_in_flight(srv, monkeypatch, how):
    kw = {}
    if how == "keyword":
        monkeypatch.setenv("KGYM_CONCURRENCY", "64")
        kw["concurrency"] = 2
    else:
        monkeypatch.setenv("KGYM_CONCURRENCY", "2")
    calls = [compute_score_async("kernelbench", cand(f"delay=0.2 verdict=correct speedup={k}"), REF, {},
                                 url=srv.url, **kw) for k in range(6)]
    out, gap, elapsed = asyncio.run(gather_with_ticker(calls))
    assert [s["correctness"] for s in out] == [True] * 6
    assert srv.max_in_flight == 2
    assert elapsed >= 3 * 0.2, elapsed   # three rounds of two
    assert gap < 0.15, gap               # callers waiting for a thread wait without blocking the loop


def test_concurrency_must_be_positive(srv):
    with pytest.raises(ValueError, match="at least 1"):
        run_async("kernelbench", cand("verdict=correct"), REF, url=srv.url, concurrency=0)


def test_async_raises_what_the_sync_form_raises(srv):
    with pytest.raises(KgymUnavailable, match="failed 4 times"):
        run_async("kernelbench", cand("verdict=correct"), REF, url=dead_url())
    s = run_async("kernelbench", cand("verdict=correct"), REF, url=dead_url(), on_unavailable="score",
                  failure_reward=-2.0)
    assert s["score"] == -2.0 and "failed 4 times" in s["error"]
    with pytest.raises(KgymError) as e:  # a wrong token is never scored
        run_async("kernelbench", cand("reject=401"), REF, url=srv.url)
    assert e.value.status == 401 and not isinstance(e.value, KgymUnavailable)


def test_errors_survive_pickling():
    """An exception raised in a process pool's worker (verl's prime manager) or a Ray actor is
    pickled back to the caller: unpicklable, it broke the whole pool."""
    for e in (KgymError(400, "kernel_code refused", "kernel_code"), KgymUnavailable(None, "no answer")):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e)
        assert (back.status, back.error, back.field) == (e.status, e.error, e.field)


def _scalar_in_child(url, code):
    return compute_score_scalar("kernelbench", code, REF, None, url=url, failure_reward=-1.0)


def test_a_process_pool_gets_scores_and_errors(srv):
    """Run as verl's prime manager runs it: in a process pool, by reference."""
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        ok = pool.submit(_scalar_in_child, srv.url, cand("verdict=correct speedup=3"))
        dead = pool.submit(_scalar_in_child, dead_url(), cand("verdict=correct"))
        refused = pool.submit(_scalar_in_child, srv.url, cand("reject=400"))
        assert ok.result(timeout=30) == 2.0 and refused.result(timeout=30) == -1.0
        with pytest.raises(KgymUnavailable, match="failed 4 times") as e:
            dead.result(timeout=30)
        assert e.value.status is None
        assert pool.submit(_scalar_in_child, srv.url, cand("verdict=incorrect")).result(timeout=30) == 0.0


def _batch_in_child(url, q):
    out = compute_score_batch(["k"] * 3, [cand(f"verdict=correct speedup={k}") for k in (1, 2, 3)], [REF] * 3,
                              url=url)
    q.put([s["score"] for s in out])


def test_a_forked_child_gets_its_own_pool(srv):
    """A child forked after the pool has threads (a trainer forking data loaders or a process
    pool) has none of them: with the parent's pool its first batch waited forever."""
    assert [s["score"] for s in compute_score_batch(["k"], [cand("verdict=correct")], [REF], url=srv.url)] == [1.0]
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_batch_in_child, args=(srv.url, q))
    p.start()
    p.join(20)
    if p.is_alive():
        p.kill()
        p.join()
        pytest.fail("the forked child's batch never finished")
    assert p.exitcode == 0 and q.get(timeout=5) == [1.0, 1.5, 2.0]
